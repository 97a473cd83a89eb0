"""What loads beside the model on llama.cpp's RPC command (-md, -devd, --mmproj and the
loading flags) is on the command as the plan counts it: without -devd the draft takes
the model's whole device list, RPC devices first, and its --tensor-split
(common/speculative.cpp common_base_params_to_speculative, b11434); a draft over
several devices without a split divides them by the memory still free once the
target is loaded (llama-model.cpp load_tensors reads the free memory then)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.cli import gpu_database
from rigspark_gui.core.launch.cluster import rpc_launch
from rigspark_gui.core.launch.llama_layout import launch_split
from rigspark_gui.core.memory import weights_layout
from rigspark_gui.core.placement import auto_place, device_loads
from rigspark_gui.core.plan.draft import draft_gpus, free_split, plan_draft
from rigspark_gui.core.rig import Rig
from tests.core.test_draft import DRAFT, QWEN_32B, settings, spec, two_cards
from tests.core.test_projector import GEMMA3_MMPROJ

ROOT = Path(__file__).resolve().parents[2]


def _two_hosts(local_gpus: int = 1) -> Rig:
    """Two RTX 3090 hosts (examples/rig-two-hosts-3090.json), with `local_gpus` here."""
    rig = load_rig(ROOT / "examples" / "rig-two-hosts-3090.json", gpu_database())
    here = rig.gpus[0]
    extra = tuple(replace(here, index=k) for k in range(1, local_gpus))
    return replace(rig, gpus=(here, *extra, *rig.gpus[1:]))


def _target(devices: tuple[int, ...] | None = None):  # type: ignore[no-untyped-def]
    return spec(QWEN_32B, "qwen2.5-32b", replace(DRAFT, devices=devices))


def _head(launch) -> str:  # type: ignore[no-untyped-def]
    assert launch.supported, launch.explanation
    return launch.scripts[-1].text


def test_the_draft_follows_the_rpc_commands_devices_and_split() -> None:
    rig = _two_hosts()
    s = settings()
    target = _target()
    placement = auto_place(target.geometry, rig, s)  # box2's GPU (gpu:1) first
    head = _head(rpc_launch(placement, target, "Q4_K_M", s, rig))
    assert " -md qwen2.5-0.5b-Q8_0.gguf" in head and "-devd" not in head
    assert "--tensor-split 33,32" in head
    assert launch_split(placement, rig) == ([1, 0], (33, 32))
    d = plan_draft(target, rig, s, placement)
    assert d is not None
    on = d.on()
    # both hosts' GPUs hold the draft, in the target's proportion
    assert on["gpu:1"] > 0 and on["gpu:0"] > 0
    assert abs(on["gpu:1"] - on["gpu:0"]) < (on["gpu:1"] + on["gpu:0"]) * 0.2


def test_a_draft_pinned_here_is_written_with_devd_over_rpc() -> None:
    rig = _two_hosts()
    s = settings()
    target = _target((0,))
    placement = auto_place(target.geometry, rig, s)
    head = _head(rpc_launch(placement, target, "Q4_K_M", s, rig))
    assert " -devd CUDA0" in head and " -dev " not in head
    d = plan_draft(target, rig, s, placement)
    assert d is not None and "gpu:1" not in d.on() and d.on()["gpu:0"] > 0


def test_a_draft_on_a_gpu_the_model_leaves_is_shown_and_the_model_kept_off_it() -> None:
    rig = _two_hosts(local_gpus=2)  # gpu:0, gpu:1 here, gpu:2 on box2
    s = settings()
    target = _target((1,))
    placement = auto_place(target.geometry, rig, s, gpu_ids=[2, 0])
    head = _head(rpc_launch(placement, target, "Q4_K_M", s, rig))
    assert head.startswith("CUDA_VISIBLE_DEVICES=0,1 llama-server")
    assert " -dev RPC0,CUDA0 " in head and head.endswith("-devd CUDA1")
    assert draft_gpus(target.draft, rig, placement) == ([1], None)  # type: ignore[arg-type]


def test_a_draft_pinned_to_another_host_is_refused() -> None:
    rig = _two_hosts()
    s = settings()
    target = _target((1,))  # box2's GPU
    launch = rpc_launch(auto_place(target.geometry, rig, s), target, "Q4_K_M", s, rig)
    assert not launch.supported and "-devd" in launch.explanation


def test_the_projector_and_loading_flags_are_on_the_rpc_command() -> None:
    rig = _two_hosts()
    s = settings(repack=False)
    target = replace(_target(), projector=GEMMA3_MMPROJ)
    placement = auto_place(target.geometry, rig, s)
    head = _head(rpc_launch(placement, target, "Q4_K_M", s, rig))
    assert " --no-repack" in head
    assert f" --mmproj {GEMMA3_MMPROJ.file_name or 'mmproj.gguf'}" in head
    text = _head(rpc_launch(placement, target, "Q4_K_M", replace(s, text_only=True), rig))
    assert " --no-mmproj" in text and "--mmproj " not in text


def test_a_pinned_draft_without_a_split_divides_what_the_target_leaves_free() -> None:
    # Qwen2.5-32B Q4_K_M at 8K on GPU 0 alone (one GPU shown, no --tensor-split); the
    # draft pinned to both cards loads after it, so GPU 0 offers far less than GPU 1
    rig = two_cards()
    s = settings()
    target = _target((0, 1))
    placement = auto_place(target.geometry, rig, s, gpu_ids=[0])
    assert draft_gpus(target.draft, rig, placement) == ([0, 1], None)  # type: ignore[arg-type]
    loads = device_loads(placement, target.geometry, weights_layout(target, "Q4_K_M"), rig, s)
    on0 = next(x.required_bytes for x in loads if x.device == "gpu:0")
    split = free_split(target, rig, s, placement, [0, 1])
    assert split == (rig.gpus[0].memory_bytes - on0, rig.gpus[1].memory_bytes)
    d = plan_draft(target, rig, s, placement)
    assert d is not None
    on = d.on()
    assert on["gpu:1"] > 3 * on["gpu:0"] > 0


def test_a_build_that_hides_no_gpu_splits_the_draft_over_the_local_ones(tmp_path: Path) -> None:
    # mixed vendors here (the Vulkan build: no CUDA_VISIBLE_DEVICES) and a third GPU on
    # another host: the target's --tensor-split counts all three by number, the draft of
    # a local placement takes the two local entries
    from rigspark_gui.core.plan.planner import plan
    from tests.conftest import simple_speed_model

    rig_file = tmp_path / "mixed.json"
    rig_file.write_text(
        '{"schema_version": 1, "name": "mixed", "address": "192.168.1.10",'
        ' "gpus": [{"name": "NVIDIA GeForce RTX 3090"}, {"name": "AMD Radeon RX 7900 XTX"}],'
        ' "ram_total_bytes": 68719476736, "cpu": {"name": "AMD Ryzen 9 5950X", "cores": 16,'
        ' "memory_bandwidth_gbps": 51.2}, "hosts": [{"name": "box2", "address":'
        ' "192.168.1.11", "ram_total_bytes": 34359738368, "gpus": [{"name":'
        ' "NVIDIA GeForce RTX 3090"}]}], "network": {"preset": "10gbe"}}'
    )
    rig = load_rig(rig_file, gpu_database())
    local = auto_place(QWEN_32B, rig, settings(), gpu_ids=[0, 1])
    shown, split = launch_split(local, rig)
    assert shown == [0, 1] and split is not None and len(split) == 2
    p = plan(_target(), rig, settings(), simple_speed_model())  # no error
    assert p.draft is not None
