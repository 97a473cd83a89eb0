"""A draft pinned to devices (llama.cpp's -devd, common/arg.cpp b11434): read as llama.cpp
reads it, planned where llama.cpp puts it (common_base_params_to_speculative: -devd
replaces the draft's devices, the target's --tensor-split applies to them by position,
one device takes the whole draft) and written in the launch command where it differs
from the target's devices."""

from dataclasses import replace

import pytest

from rigspark_gui.core.errors import InvalidPlacementError, InvalidSettingsError
from rigspark_gui.core.launch.beside_args import draft_device_args, parse_draft_devices
from rigspark_gui.core.launch.llama_cpp import llama_server_command
from rigspark_gui.core.plan.draft import draft_gpus, plan_draft
from rigspark_gui.core.plan.planner import plan
from tests.conftest import simple_speed_model
from tests.core.test_draft import DRAFT, QWEN_32B, settings, spec, two_cards


def pinned(devices: tuple[int, ...] | None):
    return spec(QWEN_32B, "qwen2.5-32b", replace(DRAFT, devices=devices))


@pytest.mark.parametrize(
    ("text", "devices"),
    [("CUDA1", (1,)), ("none", ()), ("CUDA1,CUDA0", (1, 0)), ("Vulkan0", (0,))],
)
def test_devd_is_read_as_llama_cpp_reads_it(text: str, devices: tuple[int, ...]) -> None:
    assert parse_draft_devices(text) == devices


@pytest.mark.parametrize(
    ("text", "why"),
    [("", "no devices"), ("CPU", "invalid device"), ("CUDA0,", "no devices"),
     ("CUDA0,CUDA0", "twice"), ("gpu1", "invalid device"), ("none,CUDA0", "invalid device")],
)  # fmt: skip
def test_devd_that_llama_cpp_refuses_is_one_line(text: str, why: str) -> None:
    with pytest.raises(InvalidSettingsError, match=why):
        parse_draft_devices(text)


def test_a_draft_pinned_to_the_other_card_loads_there_alone() -> None:
    # Qwen2.5-32B Q4_K_M at 8K fits GPU 0: the draft, pinned to GPU 1, takes none of it
    target = pinned((1,))
    rig = two_cards()
    p = plan(target, rig, settings(), simple_speed_model())
    assert p.placement is not None and p.draft is not None
    on = p.draft.on()
    assert on.get("gpu:0", 0) == 0 and on["gpu:1"] > p.draft.weights_bytes // 2
    unpinned = plan_draft(pinned(None), rig, settings(), p.placement)
    assert unpinned is not None and unpinned.on().get("gpu:1", 0) == 0
    # the command shows llama.cpp both cards, keeps the model on its own with --device,
    # and names the draft's by the backend's numbering
    cmd = llama_server_command(p.placement, target, "Q4_K_M", p.settings, rig)
    assert cmd.supported, cmd.reason
    used = {u.device for u in p.placement.units if u.device != "cpu"}
    model_gpu = int(next(iter(used)).split(":")[1])
    assert ("CUDA_VISIBLE_DEVICES", "0,1") in cmd.env
    assert cmd.argv[cmd.argv.index("-dev") + 1] == f"CUDA{model_gpu}"
    assert cmd.argv[cmd.argv.index("-devd") + 1] == "CUDA1"


def test_several_devices_take_the_targets_split_by_position() -> None:
    rig = two_cards()
    s = settings(quant="Q8_0", context=32768)
    p = plan(pinned(None), rig, s, simple_speed_model())
    assert p.placement is not None
    gpus, split = draft_gpus(DRAFT, rig, p.placement)
    assert gpus == [0, 1] and split is not None and split[0] != split[1]
    # -devd CUDA1,CUDA0: GPU 1 takes the target's first share, GPU 0 its second
    assert draft_gpus(replace(DRAFT, devices=(1, 0)), rig, p.placement) == ([1, 0], split)
    # one device takes the whole draft, whatever the split
    assert draft_gpus(replace(DRAFT, devices=(1,)), rig, p.placement) == ([1], None)
    swapped = plan_draft(pinned((1, 0)), rig, s, p.placement)
    assert swapped is not None and set(swapped.on()) >= {"gpu:0", "gpu:1"}


def test_devd_none_keeps_the_draft_off_every_gpu() -> None:
    d = plan_draft(pinned(()), two_cards(), settings())
    assert d is not None and d.n_gpu_layers == 0 and set(d.on()) == {"cpu"}


def test_devd_is_written_only_where_it_differs_from_the_targets() -> None:
    s = settings()
    assert draft_device_args(pinned(None), s, [0, 1], "CUDA") == []
    assert draft_device_args(pinned((0, 1)), s, [0, 1], "CUDA") == []
    assert draft_device_args(pinned((1,)), s, [0, 1], "CUDA") == ["-devd", "CUDA1"]
    assert draft_device_args(pinned((1, 0)), s, [0, 1], "ROCm") == ["-devd", "ROCm1,ROCm0"]
    # CUDA_VISIBLE_DEVICES=1: rig GPU 1 is the backend's CUDA0
    assert draft_device_args(pinned((1,)), s, [1], "CUDA") == []
    assert draft_device_args(pinned(()), s, [0], "CUDA") == ["-devd", "none"]
    with pytest.raises(InvalidPlacementError, match="GPU 1"):
        draft_device_args(pinned((1,)), s, [0], "CUDA")


def test_a_pinned_gpu_the_rig_lacks_is_refused() -> None:
    with pytest.raises(InvalidPlacementError, match="no GPU 5"):
        plan_draft(pinned((5,)), two_cards(), settings())


def test_devd_over_both_cards_is_written_when_the_model_is_kept_to_one() -> None:
    # -dev keeps the model on GPU 0; without -devd the draft would inherit that one GPU
    # (common_base_params_to_speculative), so a draft pinned to both must say so even
    # though both are the GPUs the command shows
    target = pinned((0, 1))
    rig = two_cards()
    p = plan(target, rig, settings(), simple_speed_model())
    assert p.placement is not None and p.draft is not None
    assert {d for d, b in p.draft.on().items() if b and d != "cpu"} == {"gpu:0", "gpu:1"}
    cmd = llama_server_command(p.placement, target, "Q4_K_M", p.settings, rig)
    assert cmd.supported, cmd.reason
    assert "-dev" in cmd.argv
    assert cmd.argv[cmd.argv.index("-devd") + 1] == "CUDA0,CUDA1"
