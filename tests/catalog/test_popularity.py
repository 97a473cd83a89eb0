"""The picker and the Catalog tab list models in the order people run them
(data/popularity.json, read through pydantic), not alphabetically."""

from __future__ import annotations

import json

import pytest

from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.popularity import parse_popularity, read_popularity
from rigspark_gui.core.errors import CatalogError
from rigspark_gui.resources import data_file


def test_every_row_is_cited_and_names_a_catalog_model() -> None:
    pop = read_popularity()
    ids = {e.id for e in load_catalog(updates=False).entries}
    assert pop.ranking and all(r.id in ids for r in pop.ranking)
    assert all(r.source in pop.sources for r in pop.ranking)


def test_the_catalog_follows_the_ranking() -> None:
    ranked = [r.id for r in read_popularity().ranking]
    listed = [e.id for e in load_catalog(updates=False).entries]
    assert listed[: len(ranked)] == ranked  # ranked first, in their order
    assert listed[0] == "llama-3.1-8b-instruct"
    assert listed.index("deepseek-r1-0528-qwen3-8b") < listed.index("codellama-7b")


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["ranking"].append(dict(d["ranking"][0])),  # listed twice
        lambda d: d["ranking"][0].update(source="nowhere"),  # cites no source
        lambda d: d["ranking"][0].update(ollama_pulls=-1),
    ],
)
def test_a_bad_popularity_file_is_refused(tmp_path, change) -> None:
    raw = json.loads(data_file("popularity.json").read_text(encoding="utf-8"))
    change(raw)
    path = tmp_path / "popularity.json"
    with pytest.raises(CatalogError):
        parse_popularity(json.dumps(raw).encode(), path)


def test_the_picker_lists_families_in_run_order(qtbot) -> None:
    from rigspark_gui.ui.model_picker import ID_ROLE, UPDATE_ROLE, ModelPicker

    specs = list(load_catalog(updates=False).specs())
    picker = ModelPicker()
    qtbot.addWidget(picker)
    picker.set_models(specs)
    model = picker.model()
    texts = [model.index(r, 0).data() for r in range(model.rowCount())]
    ids = [model.index(r, 0).data(ID_ROLE) for r in range(model.rowCount())]
    assert texts[0] == "— Llama 3.1 —" and ids[1] == "llama-3.1-8b-instruct"
    families = [t for t in texts if t.startswith("— ")]
    assert families.index("— DeepSeek R1 —") < families.index("— Mixtral —")
    assert families != sorted(families)  # not alphabetical
    # an old shipped catalog: the first row offers the update and choosing it asks for one
    picker.set_stale_notice("Catalog of December 2026, over 6 months old")
    first = model.index(0, 0)
    assert first.data(UPDATE_ROLE) and "update the model catalog" in first.data()
    with qtbot.waitSignal(picker.update_requested):
        picker.activated.emit(0)


def test_the_window_offers_the_update_when_the_catalog_is_old(qtbot, tmp_path, monkeypatch) -> None:
    from PySide6.QtCore import QSettings

    from rigspark_gui.catalog import update
    from rigspark_gui.ui.main_window import MainWindow
    from rigspark_gui.ui.model_picker import UPDATE_ROLE

    monkeypatch.setattr(update, "is_stale", lambda now=None: True)
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    window = MainWindow(detect_on_start=False, settings=settings)
    qtbot.addWidget(window)
    assert window.update_catalog_action.text() == "&Update the model catalog…"
    picker = window.controls.model_picker
    first = picker.model().index(0, 0)
    assert first.data(UPDATE_ROLE) and "over 6 months old" in first.data()
    asked: list[bool] = []
    monkeypatch.setattr(
        "rigspark_gui.ui.catalog_update_dialog.open_catalog_update",
        lambda parent, session: asked.append(True),
    )
    picker.activated.emit(0)  # choosing the notice starts the update (the Help action)
    assert asked == [True]
