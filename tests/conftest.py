"""Shared fixtures: real catalog geometry, and rigs described as users would."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

from rigspark_gui.core.model.model_spec import Geometry, ModelSpec
from rigspark_gui.core.rig import Cpu, Gpu, Rig, Vendor
from rigspark_gui.core.speed import (
    Band,
    CpuIsa,
    DecodeParams,
    DeviceClass,
    PrefillParams,
    QuantFamily,
    SpeedModel,
)

GIB = 1 << 30
QUANTS = ("BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K")

# meta-llama/Llama-3.1-8B-Instruct/config.json
LLAMA_31_8B = Geometry(
    architecture="llama",
    n_layer=32,
    n_embd=4096,
    n_head=32,
    n_head_kv=8,
    head_dim_k=128,
    head_dim_v=128,
    n_vocab=128256,
    n_ff=14336,
    context_length=131072,
)


def spec_of(g: Geometry, model_id: str = "m", quants: tuple[str, ...] = QUANTS) -> ModelSpec:
    return ModelSpec(id=model_id, name=model_id, geometry=g, quants=quants)


@pytest.fixture(autouse=True)
def _private_user_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> None:
    """No test reads or writes the real per-user cache (measured bandwidth, calibration)."""
    monkeypatch.setenv("RIGSPARK_CACHE_DIR", str(tmp_path_factory.mktemp("user-cache")))


@pytest.fixture
def llama8b() -> ModelSpec:
    return spec_of(LLAMA_31_8B, "llama-3.1-8b")


def rtx3090(index: int, free: int | None = None) -> Gpu:
    return Gpu(
        name="NVIDIA GeForce RTX 3090",
        vendor=Vendor.NVIDIA,
        index=index,
        memory_total_bytes=24 * GIB,
        memory_free_bytes=free,
        bandwidth_gbps=936.2,
        fp16_tflops=71.0,
    )


def make_rig(n_gpus: int = 2, ram_gib: int = 64, vram_gib: int = 24) -> Rig:
    gpus = tuple(
        Gpu(
            name=f"GPU {i}",
            vendor=Vendor.NVIDIA,
            index=i,
            memory_total_bytes=vram_gib * GIB,
            bandwidth_gbps=900.0,
            fp16_tflops=70.0,
        )
        for i in range(n_gpus)
    )
    return Rig(
        name="test",
        gpus=gpus,
        ram_total_bytes=ram_gib * GIB,
        ram_available_bytes=(ram_gib - 4) * GIB,
        cpu=Cpu(name="CPU", cores=16, memory_bandwidth_gbps=60.0),
    )


@pytest.fixture
def rig2x3090() -> Rig:
    return Rig(
        name="2x3090",
        gpus=(rtx3090(0), rtx3090(1)),
        ram_total_bytes=64 * GIB,
        ram_available_bytes=60 * GIB,
        cpu=Cpu(name="Ryzen 9 5950X", cores=16, memory_bandwidth_gbps=51.2),
    )


def simple_speed_model() -> SpeedModel:
    """Round parameters, so a test can work a speed out by hand: 70 % of bandwidth on
    NVIDIA cards for every quantization, 10 us per layer, a +-15 % band."""
    same = dict.fromkeys(QuantFamily, 1.0)
    return SpeedModel(
        decode=DecodeParams(
            efficiency={
                DeviceClass.NVIDIA: 0.7,
                DeviceClass.NVIDIA_HBM: 0.6,
                DeviceClass.AMD: 0.6,
                DeviceClass.AMD_HBM: 0.5,
                DeviceClass.INTEL: 0.5,
                DeviceClass.APPLE: 0.8,
            },
            backend_factor={"vulkan:nvidia": 0.8},
            quant_factor=same,
            layer_seconds={"cuda": 1e-5, "rocm": 1e-5, "vulkan": 2e-5, "metal": 1e-5, "cpu": 0.0},
            hop_seconds=2e-4,
            cpu_efficiency=0.8,
            cpu_core_rate=dict.fromkeys(CpuIsa, 4e9),
            cpu_quant_factor=same,
            band=Band(low=0.85, high=1.15, rows=100),
            cpu_band=Band(low=0.6, high=1.5, rows=20),
        ),
        prefill=PrefillParams(
            efficiency=dict.fromkeys(DeviceClass, 0.4),
            quant_factor=same,
            cpu_core_flops=dict.fromkeys(CpuIsa, 5e10),
            band=Band(low=0.7, high=1.4, rows=50),
        ),
        basis="test calibration",
    )


@pytest.fixture
def perf() -> SpeedModel:
    return simple_speed_model()
