"""The shipped catalog: complete, cited, plannable; bad entries never sink the rest."""

from __future__ import annotations

import json

import pytest

from rigspark_gui.catalog.models import load_catalog, load_entry, parse_catalog
from rigspark_gui.catalog.size_check import size_checks
from rigspark_gui.core.errors import CatalogError
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.resources import data_file
from tests.conftest import make_rig

CATALOG = load_catalog()


def test_catalog_is_clean_and_large() -> None:
    assert CATALOG.errors == ()
    assert len(CATALOG.entries) >= 120


def test_families_people_run_are_there() -> None:
    families = {e.family.lower() for e in CATALOG.entries}
    for f in (
        "llama 3.1",
        "qwen2.5",
        "qwen3",
        "gemma 2",
        "gemma 3",
        "mixtral",
        "phi-4",
        "gpt-oss",
        "deepseek",
    ):
        assert any(f in fam for fam in families), f


@pytest.mark.parametrize("entry", CATALOG.entries, ids=lambda e: e.id)
def test_every_entry_is_cited_and_plans(entry) -> None:
    assert "config.json" in entry.source
    assert entry.verified_from
    spec = entry.to_spec()
    p = plan(spec, make_rig(2), PlanSettings(context=4096), SpeedModel())
    assert p.paths and p.model_id == entry.id


def test_published_sizes_agree() -> None:
    checks = [c for c in size_checks(CATALOG) if c.stock_recipe]
    assert len(checks) >= 10
    for c in checks:
        assert abs(c.error) < 0.02, (c.model_id, c.quant, c.error)


def test_a_bad_entry_is_named_and_the_rest_load() -> None:
    raw = json.loads(data_file("models.json").read_text())
    raw["models"][3]["geometry"]["n_head"] = -4
    del raw["models"][5]["source"]
    catalog = parse_catalog(raw)
    assert len(catalog.entries) == len(CATALOG.entries) - 2
    bad3, bad5 = raw["models"][3]["id"], raw["models"][5]["id"]
    assert any(bad3 in e and "geometry.n_head" in e for e in catalog.errors)
    assert any(bad5 in e and "source" in e for e in catalog.errors)


def test_unreadable_catalog_is_a_catalog_error(tmp_path) -> None:
    bad = tmp_path / "models.json"
    bad.write_text("{")
    with pytest.raises(CatalogError, match="not valid JSON"):
        load_catalog(bad)
    with pytest.raises(CatalogError, match="unsupported schema_version"):
        parse_catalog({"schema_version": 7, "models": []})


def test_one_entry_is_loaded_alone_and_matches_the_catalog(tmp_path) -> None:
    full = load_catalog()
    entry = load_entry("llama-3.1-8b-instruct")
    assert entry == full.find("llama-3.1-8b-instruct")
    with pytest.raises(CatalogError, match=r"unknown model 'llama-3\.1'.*did you mean"):
        load_entry("llama-3.1")
    raw = json.loads(data_file("models.json").read_text())
    bad = dict(raw["models"][0], geometry={"n_layer": -1})
    path = tmp_path / "models.json"
    path.write_text(json.dumps({**raw, "models": [bad, *raw["models"][1:]]}))
    with pytest.raises(CatalogError, match=f"catalog entry {bad['id']}: "):
        load_entry(bad["id"], path)
    assert load_entry(raw["models"][1]["id"], path).id == raw["models"][1]["id"]
