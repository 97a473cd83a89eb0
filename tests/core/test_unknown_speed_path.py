"""A path that holds weights in system memory, whose speed is unknown because its CPU's
bandwidth is, does not win Auto's choice over paths whose speed is known (on a DGX Spark
pair the CPU-only path was recommended over the GPU's own unified memory)."""

from __future__ import annotations

from pathlib import Path

from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.cli import gpu_database
from rigspark_gui.cli_speed import speed_model
from rigspark_gui.core.plan import plan
from rigspark_gui.core.plan.path_plans import choose_recommended
from rigspark_gui.core.settings import engine_default_settings

ROOT = Path(__file__).resolve().parents[2]


def test_a_dgx_spark_pair_is_not_sent_to_its_cpu() -> None:
    rig = load_rig(ROOT / "examples" / "rig-dgx-spark-x2.json", gpu_database())
    spec = next(e for e in load_catalog().entries if e.id == "llama-3.3-70b-instruct").to_spec()
    p = plan(spec, rig, engine_default_settings(), speed_model(), kv_pairs="none")
    by = {x.path.value: x for x in p.paths}
    assert by["cpu"].fits and by["cpu"].tok_s is None  # its speed is unknown here
    assert p.recommended is not None and p.recommended.value != "cpu"
    rec = by[p.recommended.value]
    assert rec.tok_s is not None


def test_an_unknown_gpu_speed_still_cannot_be_held_against_its_path() -> None:
    # the rule is about RAM paths: a GPU-only path of unknown speed keeps its chance
    rig = load_rig(ROOT / "examples" / "rig-dgx-spark-x2.json", gpu_database())
    spec = next(e for e in load_catalog().entries if e.id == "llama-3.3-70b-instruct").to_spec()
    p = plan(spec, rig, engine_default_settings(), speed_model(), kv_pairs="none")
    from dataclasses import replace

    unknown = {"throughput": replace(p.paths[0].throughput, tok_s=None)}
    paths = [replace(x, **unknown) if x.path.value == "unified" else x for x in p.paths]
    chosen = choose_recommended(paths, spec, 8.0)
    assert chosen is not None and chosen.path.value == "unified"
