"""The projector on the GPU llama-server picks for the plan's own launch command: the
first GPU the command shows (tools/mtmd/clip.cpp b11434, `ggml_backend_init_by_type`)."""

from __future__ import annotations

from dataclasses import replace

from rigspark_gui.core.launch import Engine, launch_command, visible_from_env
from rigspark_gui.core.plan import loads_with_beside
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import GIB, Rig
from tests.core.test_projector import MIB, card, gemma27b, settings


def two_cards() -> Rig:
    """A small GPU 0 beside a 24 GB GPU 1: the one-GPU path runs on GPU 1 alone."""
    big = card().gpus[0]
    small = replace(
        big,
        name="NVIDIA GeForce RTX 3050",
        memory_total_bytes=6 * GIB,
        memory_free_bytes=6 * GIB - 500 * MIB,
    )
    return replace(card(), gpus=(small, big))


def test_the_projector_follows_the_gpu_the_launch_command_shows() -> None:
    from rigspark_gui.core.memory import weights_layout

    rig = two_cards()
    s = settings(quant="Q4_K_M", context=8192)
    p = plan(gemma27b(), rig, s, None)
    assert p.placement is not None and p.recommended is not None
    used = {u.device for u in p.placement.units} - {"cpu"}
    assert used == {"gpu:1"}  # the path runs on GPU 1 only
    cmd = launch_command(Engine.LLAMA_CPP, p.placement, gemma27b(), "Q4_K_M", p.settings, rig)
    assert visible_from_env(cmd.env) == [1]  # GPU 0 hidden: llama-server's CUDA0 is GPU 1
    assert p.projector is not None and p.projector.device == "gpu:1"
    by = {d.device: d for d in p.device_loads}
    assert by["gpu:1"].projector_bytes == p.projector.device_bytes
    assert by.get("gpu:0") is None or by["gpu:0"].projector_bytes == 0
    rec = next(x for x in p.paths if x.path is p.recommended)
    assert rec.breakdown.projector_bytes >= p.projector.device_bytes
    # the Layers lanes tally the same placement the same way
    layout = weights_layout(gemma27b(), "Q4_K_M")
    lanes = {
        d.device: d for d in loads_with_beside(p.placement, gemma27b(), layout, rig, p.settings)
    }
    assert lanes["gpu:1"].projector_bytes == by["gpu:1"].projector_bytes
    assert lanes.get("gpu:0") is None or lanes["gpu:0"].projector_bytes == 0


def test_a_cpu_only_placement_keeps_the_projector_on_the_cpu() -> None:
    from rigspark_gui.core.memory import weights_layout
    from rigspark_gui.core.placement import auto_place

    rig = two_cards()
    s = settings(quant="Q4_K_M", context=8192)
    spec = gemma27b()
    placement = auto_place(spec.geometry, rig, s, ngl=0, gpu_ids=[])
    loads = loads_with_beside(placement, spec, weights_layout(spec, "Q4_K_M"), rig, s)
    # the command hides every GPU (CUDA_VISIBLE_DEVICES=""): clip.cpp falls back to the CPU
    assert all(d.projector_bytes == 0 for d in loads if d.device != "cpu")
    assert sum(d.projector_bytes for d in loads) > 0


def test_ranks_memory_counts_the_projector_as_the_plan_does() -> None:
    # rank's fit decisions set the projector aside; the memory it shows (CLI text and
    # JSON: RankedModel.required_bytes) counts it, equal to the plan's recommended path
    from rigspark_gui.core.plan.ranking import rank_model

    for rig in (card(), two_cards()):
        s = settings(quant=None, context=8192)
        p = plan(gemma27b(), rig, s, None)
        row = rank_model(gemma27b(), rig, s, None)  # type: ignore[arg-type]
        rec = next(x for x in p.paths if x.path is p.recommended)
        assert (row.path, row.quant) == (rec.path, rec.quant)
        assert rec.breakdown.projector_bytes > 0
        assert row.required_bytes == rec.required_bytes


def test_ranks_memory_counts_the_draft_as_the_plan_does() -> None:
    from rigspark_gui.core.model import DraftModel
    from rigspark_gui.core.plan.ranking import rank_model

    target = gemma27b(None)
    spec = replace(target, draft=DraftModel(spec=target, quant="Q2_K"))
    s = settings(quant=None, context=4096)
    p = plan(spec, card(48), s, None)
    row = rank_model(spec, card(48), s, None)  # type: ignore[arg-type]
    rec = next(x for x in p.paths if x.path is p.recommended)
    assert rec.breakdown.draft_bytes > 0
    assert (row.path, row.quant, row.required_bytes) == (rec.path, rec.quant, rec.required_bytes)


def test_every_path_counts_the_projector_where_its_own_command_puts_it() -> None:
    # the recommended path runs on a GPU, with the projector there; the CPU-only path's
    # command hides every GPU, so on that path the projector's weights and compute are
    # in system memory
    rig = card()
    s = settings(quant="Q4_K_M", context=8192)
    p = plan(gemma27b(), rig, s, None)
    assert p.projector is not None and p.projector.device == "gpu:0"
    by = {x.path.value: x for x in p.paths}
    cpu = by["cpu"]
    assert cpu.breakdown.projector_bytes >= p.projector.device_bytes
    rec = next(x for x in p.paths if x.path is p.recommended)
    assert rec.breakdown.projector_bytes >= p.projector.device_bytes
    text = replace(s, text_only=True)
    bare = {x.path.value: x for x in plan(gemma27b(), rig, text, None).paths}
    assert cpu.required_bytes - bare["cpu"].required_bytes >= p.projector.device_bytes
