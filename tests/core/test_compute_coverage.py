"""A plan says when its model's compute graph is not modelled (the compute buffer is then
a plain transformer's), and says nothing for one that is."""

from __future__ import annotations

import pytest

from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.core.memory import compute_coverage, compute_note
from rigspark_gui.core.memory.compute_coverage import COMPUTE_NOT_MODELLED
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import GIB, Rig
from rigspark_gui.core.settings import make_settings
from tests.conftest import simple_speed_model


@pytest.mark.parametrize(
    ("model_id", "flagged"),
    [("gemma-3-4b-it", True), ("gemma-3-4b-it", False), ("gemma-3n-e4b-it", False)],
)
def test_the_plan_names_an_unmodelled_compute_graph(
    model_id: str, flagged: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = next(e for e in load_catalog().entries if e.id == model_id)
    spec = entry.to_spec()
    if flagged:  # whichever architectures stay unmodelled, the mechanism is the same
        notes = {
            **COMPUTE_NOT_MODELLED,
            spec.geometry.architecture: "graph not modelled: a plain compute buffer",
        }
        monkeypatch.setattr(compute_coverage, "COMPUTE_NOT_MODELLED", notes)
    rig = Rig(name="cpu", gpus=(), ram_total_bytes=32 * GIB)
    p = plan(spec, rig, make_settings(context=8192), simple_speed_model())
    note = compute_note(spec.geometry.architecture)
    assert (note is not None) is flagged
    assert any("not modelled" in n and "compute buffer" in n for n in p.notes) is flagged
