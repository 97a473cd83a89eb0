"""llama.cpp RPC clusters of unified-memory hosts (Strix Halo, DGX Spark): every other
host's chip is an RPC device of its usable memory, the multi-host path is always shown on
a rig of several hosts and recommended only when it wins."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rigspark_gui.catalog.models import load_entry
from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.cli import gpu_database
from rigspark_gui.cli_speed import speed_model
from rigspark_gui.core.placement import unified_pool
from rigspark_gui.core.placement.layout import device_capacity
from rigspark_gui.core.plan.paths import PathName, candidate_paths
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import GIB, Host, Rig
from rigspark_gui.core.settings import make_settings

ROOT = Path(__file__).resolve().parents[2]
DB = gpu_database()
PERF = speed_model()
S = make_settings()


def _rig(name: str) -> Rig:
    return load_rig(ROOT / "examples" / name, DB)


def _boxes(rig: Rig, n: int) -> Rig:
    """`rig` with n - 1 other hosts, each a copy of its first other host."""
    first = rig.hosts[0]
    chip = next(g for g in rig.gpus if g.host == first.name)
    hosts = tuple(replace(first, name=f"box{k}", address=f"10.0.0.{k}") for k in range(2, n + 1))
    gpus = (*(g for g in rig.gpus if not g.host), *(replace(chip, host=h.name) for h in hosts))
    return replace(rig, hosts=hosts, gpus=gpus)


def _path(p, name: PathName):  # type: ignore[no-untyped-def]
    return next(x for x in p.paths if x.path is name)


def _check_rpc_plan(p, hosts: int) -> None:  # type: ignore[no-untyped-def]
    assert p.recommended is PathName.MULTI_HOST
    mh = _path(p, PathName.MULTI_HOST)
    assert mh.fits and mh.gpu_count == hosts
    assert mh.tok_s is not None and mh.tok_s > 0
    assert p.launch is not None and p.launch.supported
    scripts = p.launch.scripts
    assert len(scripts) == hosts
    for sc in scripts[:-1]:
        assert sc.host and "rpc-server -H 0.0.0.0 -p 50052" in sc.text
    head = scripts[-1]
    assert head.host == "" and " llama-server " in head.text
    endpoints = ",".join(f"{sc.address}:50052" for sc in scripts[:-1])
    assert f"--rpc {endpoints}" in head.text


def test_two_strix_halo_boxes_plan_a_model_neither_holds_over_rpc() -> None:
    rig = _rig("rig-strix-halo-x2.json")
    p = plan(load_entry("qwen3-235b-a22b").to_spec(), rig, make_settings(quant="Q4_K_M"), PERF)
    assert not _path(p, PathName.UNIFIED).fits
    _check_rpc_plan(p, 2)


def test_four_strix_halo_boxes_plan_over_rpc() -> None:
    rig = _boxes(_rig("rig-strix-halo-x2.json"), 4)
    p = plan(load_entry("deepseek-v3").to_spec(), rig, make_settings(quant="Q4_K_M"), PERF)
    assert not _path(p, PathName.UNIFIED).fits
    _check_rpc_plan(p, 4)


def test_two_dgx_sparks_plan_over_rpc() -> None:
    rig = _rig("rig-dgx-spark-x2.json")
    p = plan(load_entry("qwen3-235b-a22b").to_spec(), rig, S, PERF)
    # Auto: one Spark holds IQ4_XS at best, the pair a better quantization
    _check_rpc_plan(p, 2)
    assert _path(p, PathName.MULTI_HOST).quant != _path(p, PathName.UNIFIED).quant


def test_a_multi_host_rig_shows_the_multi_host_path_when_one_host_fits() -> None:
    rig = _rig("rig-strix-halo-x2.json")
    p = plan(load_entry("llama-3.1-8b-instruct").to_spec(), rig, S, PERF)
    mh = _path(p, PathName.MULTI_HOST)
    assert mh.fits and mh.tok_s is not None and mh.gpu_count == 2
    # it wins nothing here (same quantization on one box): one box is recommended
    assert p.recommended is PathName.UNIFIED
    assert p.launch is None


def test_the_multi_host_path_is_never_faster_at_the_same_quantization() -> None:
    rig = _rig("rig-strix-halo-x2.json")
    spec = load_entry("llama-3.1-8b-instruct").to_spec()
    p = plan(spec, rig, make_settings(quant="Q4_K_M"), PERF)
    one, two = _path(p, PathName.UNIFIED), _path(p, PathName.MULTI_HOST)
    assert one.tok_s is not None and two.tok_s is not None
    # the same layers in turn on two chips of one bandwidth, plus the network hop
    assert two.tok_s <= one.tok_s
    assert p.recommended is PathName.UNIFIED


def test_another_hosts_unified_chip_holds_that_hosts_usable_memory() -> None:
    rig = _rig("rig-strix-halo-x2.json")
    remote = next(i for i, g in enumerate(rig.gpus) if g.host)
    assert device_capacity(rig, f"gpu:{remote}")[0] == rig.hosts[0].ram_usable_bytes
    small = replace(rig, hosts=(replace(rig.hosts[0], ram_available_bytes=40 * GIB),))
    assert device_capacity(small, f"gpu:{remote}")[0] == 40 * GIB
    # judged on its own: it shares no memory with this machine's CPU
    local = next(i for i, g in enumerate(rig.gpus) if not g.host)
    pool = unified_pool(rig, ["cpu", f"gpu:{local}", f"gpu:{remote}"])
    assert pool == frozenset({"cpu", f"gpu:{local}"})


def test_a_unified_rig_without_hosts_has_no_multi_host_path() -> None:
    rig = _rig("rig-strix-halo-x2.json")
    alone = replace(rig, hosts=(), gpus=tuple(g for g in rig.gpus if not g.host))
    names = [c.name for c in candidate_paths(alone, cpu_only=False)]
    assert names == [PathName.UNIFIED, PathName.CPU]


def test_a_host_without_a_usable_gpu_adds_no_rpc_device() -> None:
    # rpc-server on a CPU-only host is not planned yet: such a host adds no device
    rig = _rig("rig-strix-halo-x2.json")
    cpu_box = Host(name="cpu-box", address="10.0.0.9", ram_total_bytes=64 * GIB)
    alone = replace(rig, hosts=(cpu_box,), gpus=tuple(g for g in rig.gpus if not g.host))
    names = [c.name for c in candidate_paths(alone, cpu_only=False)]
    assert PathName.MULTI_HOST not in names
