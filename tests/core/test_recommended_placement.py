"""The placement a plan shows is the one its path was measured with: the path's
--tensor-split counts every GPU of the path, idle ones included."""

from __future__ import annotations

from rigspark_gui.catalog.models import resolve_model
from rigspark_gui.cli_speed import speed_model
from rigspark_gui.core.placement import CPU
from rigspark_gui.core.plan import plan
from rigspark_gui.core.rig import Cpu, Gpu, Rig, Vendor
from rigspark_gui.core.settings import make_settings


def test_a_split_that_leaves_a_gpu_idle_places_as_measured() -> None:
    """Found by hypothesis: gpt-oss-20b offloading its experts on a 1 GiB and a 12.5 GiB
    card keeps the small one idle (--tensor-split 0,25); the plan used to rebuild the
    placement over the GPUs in use only and refused its own split."""
    gpu = {"vendor": Vendor.NVIDIA, "bandwidth_gbps": 400.0, "fp16_tflops": 30.0}
    rig = Rig(
        name="drawn",
        ram_total_bytes=3_489_660_928,
        cpu=Cpu(cores=2, memory_bandwidth_gbps=50.0),
        gpus=(
            Gpu(name="GPU 0", index=0, memory_total_bytes=1 << 30, **gpu),
            Gpu(name="GPU 1", index=1, memory_total_bytes=13_421_772_800, **gpu),
        ),
    )
    spec = resolve_model("gpt-oss-20b").spec
    s = make_settings(context=8192, kv_k="f16", kv_v="f16", flash_attn=False)
    p = plan(spec, rig, s, speed_model(), ladders=False)
    shown = next(x for x in p.paths if x.path is p.recommended)
    assert shown.tensor_split is not None and shown.tensor_split[0] == 0
    assert p.placement is not None
    used = {u.device for u in p.placement.units} - {CPU}
    assert used == {"gpu:1"}
