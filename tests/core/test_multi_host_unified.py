"""llama.cpp RPC clusters of unified-memory hosts (Strix Halo, DGX Spark): every other
host's chip is an RPC device of its usable memory, the multi-host path is always shown on
a rig of several hosts and recommended only when it wins; a host without a GPU serves
its CPU (`rpc-cpu:HOST`) the same way."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rigspark_gui.catalog.models import load_entry
from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.cli import gpu_database
from rigspark_gui.cli_speed import speed_model
from rigspark_gui.core.placement import unified_pool
from rigspark_gui.core.placement.layout import device_capacity, device_name, rig_devices
from rigspark_gui.core.plan.path_plans import recommended_placement
from rigspark_gui.core.plan.paths import PathName, candidate_paths, model_paths
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import GIB, Cpu, Host, Rig
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


def test_a_host_without_a_gpu_serves_its_cpu_over_rpc() -> None:
    # rpc-server on a CPU-only host: llama.cpp lists that host's CPU as one RPC device
    rig = _rig("rig-strix-halo-x2.json")
    cpu_box = Host(name="cpu-box", address="10.0.0.9", ram_total_bytes=64 * GIB)
    alone = replace(rig, hosts=(cpu_box,), gpus=tuple(g for g in rig.gpus if not g.host))
    cands = candidate_paths(alone, cpu_only=False)
    mh = next(c for c in cands if c.name is PathName.MULTI_HOST)
    local = alone.local_gpus[0]
    assert mh.order == ["rpc-cpu:cpu-box", local] and mh.gpu_ids == [local]
    assert rig_devices(alone) == ("cpu", "rpc-cpu:cpu-box", f"gpu:{local}")
    assert device_capacity(alone, "rpc-cpu:cpu-box") == (cpu_box.ram_usable_bytes, 0)
    assert device_name(alone, "rpc-cpu:cpu-box") == "CPU on cpu-box"
    # judged on its own: it shares no memory with this machine
    assert "rpc-cpu:cpu-box" not in unified_pool(alone, ["cpu", f"gpu:{local}", "rpc-cpu:cpu-box"])


CPU_BOX = Cpu(name="AMD EPYC 4364P", cores=8, memory_bandwidth_gbps=83.2)


def _with_cpu_boxes(rig: Rig, n: int, ram: int = 64 * GIB) -> Rig:
    """`rig` without its other hosts, plus n CPU-only boxes of `ram` each."""
    boxes = tuple(
        Host(name=f"cpu{k}", address=f"10.0.1.{k}", ram_total_bytes=ram, cpu=CPU_BOX)
        for k in range(1, n + 1)
    )
    return replace(rig, hosts=boxes, gpus=tuple(g for g in rig.gpus if not g.host))


def test_a_gpu_box_and_two_cpu_boxes_plan_a_70b_over_rpc() -> None:
    # one RTX 3090 with 16 GiB of RAM holds no 70B; with two 64 GB CPU boxes it does
    rig = replace(_with_cpu_boxes(_rig("rig-two-hosts-3090.json"), 2), ram_total_bytes=16 * GIB)
    p = plan(load_entry("llama-3.3-70b-instruct").to_spec(), rig, make_settings(
        quant="Q4_K_M", context=8192), PERF)  # fmt: skip
    assert p.recommended is PathName.MULTI_HOST
    mh = _path(p, PathName.MULTI_HOST)
    assert mh.fits and mh.quant == "Q4_K_M" and mh.gpu_count == 1
    # llama.cpp's order: the RPC devices first, host by host, then this machine's GPU
    assert mh.devices == ("cpu", "rpc-cpu:cpu1", "rpc-cpu:cpu2", "gpu:0")
    assert mh.tok_s is not None and mh.tok_s > 0
    for single in (PathName.GPU, PathName.CPU_OFFLOAD, PathName.CPU):
        assert not _path(p, single).fits
    assert p.launch is not None and p.launch.supported
    boxes, head = p.launch.scripts[:-1], p.launch.scripts[-1]
    assert [sc.host for sc in boxes] == ["cpu1", "cpu2"]
    for sc in boxes:
        # the host's CPU: no GPU to show, no environment variable
        assert sc.text.strip() == "rpc-server -H 0.0.0.0 -p 50052 -c"
    assert "--rpc 10.0.1.1:50052,10.0.1.2:50052" in head.text
    assert head.text.startswith("CUDA_VISIBLE_DEVICES=0 llama-server")
    # the layers, KV and compute sit on the CPU boxes as on a GPU under RPC
    spec, s = (
        load_entry("llama-3.3-70b-instruct").to_spec(),
        make_settings(quant="Q4_K_M", context=8192),
    )
    cand = next(c for c in model_paths(spec, rig, s.backend) if c.name is PathName.MULTI_HOST)
    _, loads = recommended_placement(spec, rig, s, mh, cand)
    by = {x.device: x for x in loads}
    for box in ("rpc-cpu:cpu1", "rpc-cpu:cpu2"):
        assert by[box].units and by[box].kv_bytes > 0 and by[box].compute_bytes > 0
        assert by[box].capacity_bytes == 62 * GIB and by[box].reserve_bytes == 0


def test_a_cpu_box_is_as_fast_as_its_cpu() -> None:
    rig = replace(_with_cpu_boxes(_rig("rig-two-hosts-3090.json"), 2), ram_total_bytes=16 * GIB)
    spec = load_entry("llama-3.3-70b-instruct").to_spec()
    fast = plan(spec, rig, make_settings(quant="Q4_K_M"), PERF)
    slow_cpu = replace(CPU_BOX, memory_bandwidth_gbps=40.0)
    slow = replace(rig, hosts=tuple(replace(h, cpu=slow_cpu) for h in rig.hosts))
    slower = plan(spec, slow, make_settings(quant="Q4_K_M"), PERF)
    a, b = _path(fast, PathName.MULTI_HOST).tok_s, _path(slower, PathName.MULTI_HOST).tok_s
    assert a is not None and b is not None and b < a


def test_place_json_works_on_cpu_boxes(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from rigspark_gui.catalog.rig_file import save_rig
    from rigspark_gui.cli import main

    rig = replace(_with_cpu_boxes(_rig("rig-two-hosts-3090.json"), 2), ram_total_bytes=16 * GIB)
    path = tmp_path / "rig.json"
    save_rig(rig, path)
    argv = ["--model", "llama-3.3-70b-instruct", "--rig", str(path), "--quant", "Q4_K_M"]
    assert main(["place", *argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fits"]
    assert data["placement"]["devices"] == ["cpu", "rpc-cpu:cpu1", "rpc-cpu:cpu2", "gpu:0"]
    names = {x["device"]: x["name"] for x in data["device_loads"]}
    assert names["rpc-cpu:cpu1"] == "AMD EPYC 4364P on cpu1"
    llama = next(c for c in data["launch_commands"] if c["engine"] == "llama.cpp")
    assert llama["supported"] and "rpc-server -H 0.0.0.0 -p 50052 -c" in llama["text"]
    assert main(["plan", *argv]) == 0
    assert "multi-host (1 GPU, 2 host CPUs)" in capsys.readouterr().out


def test_gpu_only_engines_leave_the_cpu_boxes_out() -> None:
    # vLLM and SGLang serve no CPU: without another host's GPU there is no multi-host path
    rig = _with_cpu_boxes(_rig("rig-two-hosts-3090.json"), 2)
    spec = load_entry("llama-3.1-8b-instruct").to_spec()
    for backend in ("vllm", "sglang"):
        p = plan(spec, rig, make_settings(backend=backend), PERF)
        assert [x.path for x in p.paths] == [PathName.GPU]
