"""Fit's own accounting of a dry run (core/fit/measure.py): with no GPU, the host row's
model part is every tensor but those the CPU backend repacks (CPU_REPACK is in no row
of llama_get_memory_breakdown's host sum)."""

from __future__ import annotations

import pytest

from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.core.fit.measure import FitMeasure
from rigspark_gui.core.memory import gguf_padded, is_repacked, repack_types, synth_rows
from rigspark_gui.core.rig import Cpu, Rig
from rigspark_gui.core.settings import PlanSettings

MIB = 1 << 20

CATALOG = load_catalog()


def _by_tensor(spec, quant: str, features: tuple[str, ...]) -> int:
    """The same count, tensor by tensor, as fit.cpp's accounting makes it."""
    types = repack_types(features)
    rows = synth_rows(spec.geometry, quant)
    return sum(gguf_padded(t.n_bytes) for t in rows if not is_repacked(t, types))


@pytest.mark.parametrize("features", [(), ("avx2",), ("avx2", "avx512")])
@pytest.mark.parametrize(
    "model", ["llama-3.1-8b-instruct", "qwen3-30b-a3b", "gemma-3-1b-it", "gpt-oss-20b"]
)
def test_the_host_row_leaves_out_what_is_repacked(model: str, features) -> None:
    spec = next(e for e in CATALOG.entries if e.id == model).to_spec()
    rig = Rig(ram_total_bytes=64 << 30, cpu=Cpu(features=features))
    for quant in spec.available_quants:
        m = FitMeasure(spec, quant, rig, PlanSettings(), ())
        assert m._host_model() == _by_tensor(spec, quant, features), quant


def test_q4_0_on_avx2_keeps_the_embeddings_and_head_on_the_host() -> None:
    """llama-quantize's Q4_0 mix keeps the head at Q6_K (not repacked on x86): fit's
    host row holds the token embeddings, the head and the norms, about 0.7 GiB of a
    4.4 GiB file (a file of Q4_0 matrices only keeps 282 MiB: validation/fit_cases.json)."""
    spec = next(e for e in CATALOG.entries if e.id == "llama-3.1-8b-instruct").to_spec()
    rig = Rig(ram_total_bytes=64 << 30, cpu=Cpu(features=("avx2",)))
    m = FitMeasure(spec, "Q4_0", rig, PlanSettings(), ())
    rows = {t.name: gguf_padded(t.n_bytes) for t in synth_rows(spec.geometry, "Q4_0")}
    norms = sum(b for n, b in rows.items() if "_norm" in n)
    assert m._host_model() == rows["token_embd.weight"] + rows["output.weight"] + norms
    assert m.layout.total_bytes > 4 << 30


def _qwen3_over_three_rpc_servers() -> FitMeasure:
    from rigspark_gui.core.rig import Host

    spec = next(e for e in CATALOG.entries if e.id == "qwen3-30b-a3b").to_spec()
    hosts = tuple(
        Host(name=f"rpc{i}", address=f"10.0.0.{i + 1}", ram_total_bytes=24 << 30) for i in range(3)
    )
    rig = Rig(ram_total_bytes=24 << 30, cpu=Cpu(features=("avx2",)), hosts=hosts)
    s = PlanSettings(context=16384, flash_attn=True)
    devices = tuple(f"rpc-cpu:rpc{i}" for i in range(3))
    return FitMeasure(spec, spec.available_quants[0], rig, s, devices)


@pytest.mark.parametrize(
    ("layers", "mib"),
    [
        # llama-fit-params b11434 -fitp on, -c 16384, sched_reserve's "RPC0[...] compute
        # buffer size" of the middle server (qwen3moe, three local ggml-rpc-servers)
        (((15, 1, 2), (0, 0, 4), (34, 33, 4)), 48.28),  # no layers: gate and down of blk 14
        (((15, 1, 1), (0, 0, 4), (34, 33, 4)), 80.00),  # no layers: all of blk 14's FFN
        (((15, 1, 2), (9, 0, 4), (25, 24, 4)), 100.28),  # layers 15-23 over blk 14's copies
        (((15, 1, 1), (9, 0, 4), (25, 24, 4)), 96.01),
    ],
)
def test_the_next_device_pays_for_the_overflowing_layer_it_runs(layers, mib: float) -> None:
    """fit's overflow to the next device (-ot blk.N.ffn_...=RPC0[next]) moves part of a
    layer's FFN there; the copies it reads sit under that device's own layers."""
    from rigspark_gui.core.fit.search import DeviceLayers, LayerFraction, Probe, _overrides

    m = _qwen3_over_three_rpc_servers()
    dl = tuple(DeviceLayers(a, b, LayerFraction(c)) for a, b, c in layers)
    ovr = _overrides(dl, [True, False, False], m.g.n_layer)
    got = m(Probe(16384, dl, ovr)).devices[1].compute
    assert got / MIB == pytest.approx(mib, abs=0.55)  # the router's 0.5 MiB is not modelled
    without = m(Probe(16384, dl, tuple(o for o in ovr if o.to_device is None))).devices[1]
    assert without.compute < got
