"""How the speed model sees a device: its class, backend, quantization family, ISA."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from rigspark_gui.core.rig import Cpu, Gpu, Vendor
from rigspark_gui.core.speed.model import CpuIsa, DeviceClass, GpuBackend, QuantFamily

# Data-centre parts whose memory is HBM: they reach a different share of bandwidth and
# pay relatively more fixed cost per token than GDDR cards (llama.cpp scoreboards).
_NVIDIA_HBM = re.compile(
    r"\b(P100|V100|A100|A800|H100|H800|H200|H20|B100|B200|GH200|GB200|TITAN V)\b", re.I
)
_AMD_HBM = re.compile(r"\b(Instinct|MI\d{2,3}X?|Radeon VII|Radeon Pro VII)\b", re.I)

NATIVE_BACKEND = {
    Vendor.NVIDIA: GpuBackend.CUDA,
    Vendor.AMD: GpuBackend.ROCM,
    Vendor.INTEL: GpuBackend.SYCL,
    Vendor.APPLE: GpuBackend.METAL,
}
# Which backends run on which vendor's GPUs at all.
RUNS_ON: Mapping[GpuBackend, tuple[Vendor, ...]] = {
    GpuBackend.CUDA: (Vendor.NVIDIA,),
    GpuBackend.ROCM: (Vendor.AMD,),
    GpuBackend.VULKAN: (Vendor.NVIDIA, Vendor.AMD, Vendor.INTEL, Vendor.OTHER),
    GpuBackend.METAL: (Vendor.APPLE,),
    GpuBackend.SYCL: (Vendor.INTEL,),
}


def device_class(gpu: Gpu) -> DeviceClass:
    return class_of(gpu.vendor.value, gpu.name)


def class_of(vendor: str, name: str) -> DeviceClass:
    """Device class from a vendor and a marketing or driver name (also for data rows).
    Unified-memory SoCs other than Apple's (GB10, Strix Halo, Jetson) run the same GPU
    architectures and kernels as their vendor's discrete cards and reach a similar share
    of their (LPDDR5X) bandwidth, so they share the vendor's class."""
    if vendor == "apple":
        return DeviceClass.APPLE
    if vendor == "nvidia":
        return DeviceClass.NVIDIA_HBM if _NVIDIA_HBM.search(name) else DeviceClass.NVIDIA
    if vendor == "amd":
        return DeviceClass.AMD_HBM if _AMD_HBM.search(name) else DeviceClass.AMD
    if vendor == "intel":
        return DeviceClass.INTEL
    return DeviceClass.NVIDIA


def default_backend(gpu: Gpu) -> GpuBackend:
    return NATIVE_BACKEND.get(gpu.vendor, GpuBackend.VULKAN)


def backend_for(gpu: Gpu, chosen: GpuBackend | None) -> GpuBackend:
    return default_backend(gpu) if chosen is None else chosen


@lru_cache(maxsize=512)
def quant_family(type_name: str) -> QuantFamily:
    """Family of a ggml type ("Q4_K") or a file-type label ("Q4_K_M", "UD-Q4_K_XL")."""
    t = type_name.upper()
    if t in ("F32", "F16", "BF16", "ALL_F32", "F64"):
        return QuantFamily.FLOAT
    if "MXFP4" in t:
        return QuantFamily.MXFP4
    if t.startswith("Q8") or "-Q8" in t:
        return QuantFamily.Q8
    if "IQ4_NL" in t:
        return QuantFamily.LEGACY
    if "IQ" in t or t.startswith("TQ"):
        return QuantFamily.IQ
    if re.search(r"Q\d_K", t):
        return QuantFamily.KQUANT
    if re.search(r"Q\d_[01]", t):
        return QuantFamily.LEGACY
    return QuantFamily.KQUANT


def cpu_label(cpu: Cpu) -> str:
    """The CPU as a calibration knows it: its name, and on a VM the cores' worth its
    vCPUs were measured at, so a calibration made under another figure is not applied
    (its measured / predicted ratio holds only for the prediction it was made against)."""
    if cpu.compute_cores is None:
        return cpu.name
    return f"{cpu.name} ({cpu.compute_cores:g} cores' worth)"


def cpu_isa(cpu: Cpu) -> CpuIsa:
    """The vector ISA llama.cpp's kernels use on this CPU: from the flags the hardware
    layer read (Linux), else from the CPU's name."""
    feats = cpu.features
    if "amx" in feats:
        return CpuIsa.AMX
    if "avx512_vnni" in feats:
        return CpuIsa.AVX512_VNNI
    if "avx512" in feats:
        return CpuIsa.AVX512
    if "avx2" in feats:
        return CpuIsa.AVX2
    if "sve" in feats:
        return CpuIsa.SVE
    name = cpu.name.lower()
    if "apple" in name:
        return CpuIsa.APPLE
    # Neoverse V1/V2 cores: Graviton 3 and 4, NVIDIA Grace
    if any(k in name for k in ("graviton3", "graviton4", "graviton 3", "graviton 4", "grace")):
        return CpuIsa.SVE
    arm = ("apple", "arm", "neoverse", "cortex", "graviton", "snapdragon", "ampere", "grace")
    if any(k in name for k in arm):
        return CpuIsa.NEON
    # x86-64 desktop and server lines have had AVX2 since 2013-2015 (Haswell, Zen); the
    # flags are only read on Linux, so a rig file's CPU name is the next best evidence
    x86 = ("ryzen", "epyc", "threadripper", "core", "xeon")
    if any(k in name for k in x86) and not any(k in name for k in ("celeron", "pentium", "atom")):
        return CpuIsa.AVX2
    return CpuIsa.OTHER


def family_mix(tensor_types: Mapping[str, int]) -> dict[QuantFamily, float]:
    """Share of the weights' bytes in each family."""
    total = sum(tensor_types.values())
    mix: dict[QuantFamily, float] = {}
    if total <= 0:
        return mix
    for name, b in tensor_types.items():
        f = quant_family(name)
        mix[f] = mix.get(f, 0.0) + b / total
    return mix


def mixed_factor(mix: Mapping[QuantFamily, float], factor: Mapping[QuantFamily, float]) -> float:
    """The factor of a mix of families: bytes-weighted harmonic mean (time adds up)."""
    inv = sum(share / factor.get(f, 1.0) for f, share in mix.items())
    return 1.0 / inv if inv > 0 else 1.0


def geforce_accumulate_factor(name: str) -> float:
    """data/gpus.json gives GeForce cards' FP16 tensor rate with FP32 accumulation (half
    rate on GeForce); llama.cpp's cuBLAS F16 GEMMs accumulate in FP16 (CUBLAS_COMPUTE_16F
    in ggml-cuda), which runs at the full rate the professional cards are listed with."""
    return 2.0 if "geforce" in name.lower() else 1.0
