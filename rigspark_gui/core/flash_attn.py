"""Flash attention in llama.cpp (build b11434): whether a device runs the
FLASH_ATTN_EXT op for a K/V cache pair and head size, and what `-fa auto` makes of the
devices that hold a model's layers.

Every rule names the file and function of the llama.cpp source it comes from. Device
features a rig does not describe (Vulkan's subgroup shuffle/vote or coopmat2, Metal's
simdgroup matrices and bfloat) are taken as present: every GPU those backends target
today has them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from rigspark_gui.core.model import Geometry, KvCacheType
from rigspark_gui.core.rig import Rig, Vendor, gpu_index
from rigspark_gui.core.settings import GpuBackend

K = KvCacheType


class FaWhere(StrEnum):
    """Where a device's flash attention for one K/V pair runs."""

    # a kernel for this pair where the layer is (a GPU's, or the CPU's own)
    NATIVE = "native"
    # on the device, but decode first converts the whole K and V to f16 (no kernel
    # compiled for the pair): slower decode, no figure for how much
    GPU_F16 = "gpu-f16"
    # the GPU refuses the op: `-fa auto` turns flash attention off; forced on (`-fa
    # on`, or a quantized V cache) the scheduler runs the op on the CPU
    CPU = "cpu"
    # the op is accepted where it cannot run: llama.cpp aborts when it gets there
    FAILS = "fails"


@dataclass(frozen=True, slots=True, kw_only=True)
class FaSupport:
    """One device's answer for one K/V pair and head size."""

    # what the device's supports_op says (what `-fa auto` probes)
    supported: bool
    where: FaWhere
    # one line, naming the rule ('' for a native kernel on the CPU)
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class FaShape:
    """The FLASH_ATTN_EXT shape of a model: Q/K and V head sizes and query heads per KV
    head."""

    head_dim_k: int
    head_dim_v: int
    gqa_ratio: int = 1


def attention_shape(g: Geometry) -> FaShape:
    """The head sizes llama.cpp hands flash attention. MLA models attend over the latent
    cache (src/llama-graph.cpp build_attn_mha with the absorbed MLA weights): K =
    kv_lora_rank + rope dims (576 for DeepSeek), V = kv_lora_rank (512), one KV head."""
    if g.is_mla and g.kv_lora_rank:
        return FaShape(
            head_dim_k=g.kv_lora_rank + (g.rope_head_dim or 0),
            head_dim_v=g.kv_lora_rank,
            gqa_ratio=max(g.n_head, 1),
        )
    kv_heads = max(g.n_head_kv, 1)
    return FaShape(
        head_dim_k=g.head_dim_k,
        head_dim_v=g.head_dim_v,
        gqa_ratio=max(g.n_head // kv_heads, 1),
    )


# Each vendor's own backend (as speed.devices.NATIVE_BACKEND; this module sits below it)
_NATIVE = {
    Vendor.NVIDIA: GpuBackend.CUDA,
    Vendor.AMD: GpuBackend.ROCM,
    Vendor.INTEL: GpuBackend.SYCL,
    Vendor.APPLE: GpuBackend.METAL,
}

_QUANTS_5 = (K.Q4_0, K.Q4_1, K.Q5_0, K.Q5_1, K.Q8_0)

# ---- CUDA and ROCm/HIP (HIP compiles the CUDA sources: ggml-hip/CMakeLists.txt)
# ggml-cuda/fattn.cu ggml_cuda_fattn_kv_type_supported: K and V each one of these
CUDA_FA_TYPES = frozenset({K.F16, K.BF16, *_QUANTS_5})
# ggml/CMakeLists.txt GGML_CUDA_FA_QUANTS default "q4_0-q4_0;q8_0-q8_0;f16-f16;bf16-bf16"
# (ggml/cmake/common.cmake ggml_cuda_fattn_vec_instances): the vector (decode) kernels
# a standard build compiles. Any other pair of CUDA_FA_TYPES still runs on the GPU:
# fattn.cu ggml_cuda_flash_attn_ext_vec converts K and V to f16 first ("slow").
CUDA_FA_VEC_PAIRS = frozenset(
    {(K.F16, K.F16), (K.Q4_0, K.Q4_0), (K.Q8_0, K.Q8_0), (K.BF16, K.BF16)}
)
# fattn.cu ggml_cuda_get_best_fattn_kernel, can_use_vector_kernel: the vector kernels
# exist for these head sizes only; other sizes use the tile/MMA kernels, which convert
# any non-f16 K/V to f16 for every batch size (ggml_cuda_flash_attn_ext_get_alloc_size)
CUDA_VEC_HEADS = frozenset({64, 128, 256})
# fattn.cu ggml_cuda_get_best_fattn_kernel, switch (K->ne[0]): K = V head sizes
CUDA_EQUAL_HEADS = frozenset({40, 64, 72, 80, 96, 112, 128, 256})
# ... and K/V head sizes that need the GQA optimisation (gqa_opt_applies: at least 2
# query heads per KV head, a mask, no ALiBi), with what the ratio must be a multiple
# of: 192/128 (MiMo), 320/256 (Mistral Small 4), 512/512, 576/512 (DeepSeek MLA)
CUDA_GQA_HEADS = {(192, 128): 8, (320, 256): 32, (512, 512): 1, (576, 512): 1}

# ---- Vulkan: ggml-vulkan.cpp ggml_backend_vk_device_supports_op, GGML_OP_FLASH_ATTN_EXT
VULKAN_FA_TYPES = frozenset({K.F16, K.BF16, *_QUANTS_5, K.IQ4_NL})
VULKAN_HEAD_MULTIPLE = 8  # HSK % 8 == 0 and HSV % 8 == 0

# ---- Metal: ggml-metal/ggml-metal-device.m ggml_metal_device_supports_op
METAL_FA_TYPES = frozenset({K.F16, K.BF16, *_QUANTS_5})
METAL_HEADS = frozenset({32, 40, 48, 64, 72, 80, 96, 112, 128, 192, 256, 320, 512, 576})

# ---- SYCL: ggml-sycl/fattn.cpp ggml_sycl_get_best_fattn_kernel at the probe's shape
# (one token per sequence); ggml-sycl/common.hpp defines GGML_SYCL_FA_ALL_QUANTS, so K and
# V may differ. The check reads K's type only; the decode vector kernel
# (ggml_sycl_flash_attn_ext_vec) has cases for V in SYCL_FA_VEC_V only and aborts otherwise.
SYCL_FA_K_TYPES = frozenset({K.F16, K.BF16, *_QUANTS_5})
SYCL_FA_VEC_V = frozenset({K.F16, *_QUANTS_5})
SYCL_EQUAL_HEADS = frozenset({40, 64, 72, 80, 96, 112, 128, 256, 512})
SYCL_GQA_HEADS = {(576, 512): 1}

_CPU_FALLBACK = "auto turns flash attention off; forced on, attention runs on the CPU"


def _as_seen(t: KvCacheType) -> KvCacheType:
    """src/llama-graph.cpp build_attn_mha casts an f32 K or V to f16 before
    ggml_flash_attn_ext: every backend sees f16 for it."""
    return K.F16 if t is K.F32 else t


def _pair(k: KvCacheType, v: KvCacheType) -> str:
    return f"{k.value}/{v.value}"


def _no(where: str, why: str, rule: str) -> FaSupport:
    return FaSupport(
        supported=False, where=FaWhere.CPU, reason=f"{where}: {why} ({rule}); {_CPU_FALLBACK}"
    )


def _heads_problem(
    dk: int, dv: int, gqa: int, equal: frozenset[int], gqa_heads: dict[tuple[int, int], int]
) -> str | None:
    if dk == dv and dk in equal:
        return None
    need = gqa_heads.get((dk, dv))
    if need is None:
        return f"no flash-attention kernel for head sizes K {dk} / V {dv}"
    if gqa < 2 or gqa % need:
        many = "at least 2" if need == 1 else f"a multiple of {need}"
        return (
            f"head sizes K {dk} / V {dv} need {many} query heads per KV head (the model has {gqa})"
        )
    return None


def _cuda(k: KvCacheType, v: KvCacheType, dk: int, dv: int, gqa: int, name: str) -> FaSupport:
    rule = "ggml-cuda/fattn.cu ggml_cuda_get_best_fattn_kernel"
    heads = _heads_problem(dk, dv, gqa, CUDA_EQUAL_HEADS, CUDA_GQA_HEADS)
    if heads is not None:
        return _no(name, heads, rule)
    bad = next((t for t in (k, v) if t not in CUDA_FA_TYPES), None)
    if bad is not None:
        why = f"no flash attention for the {bad.value} cache type"
        return _no(name, why, "ggml-cuda/fattn.cu ggml_cuda_fattn_kv_type_supported")
    if (k, v) not in CUDA_FA_VEC_PAIRS and dk == dv and dk in CUDA_VEC_HEADS:
        return FaSupport(
            supported=True,
            where=FaWhere.GPU_F16,
            reason=f"{name}: no flash-attention decode kernel for {_pair(k, v)} in llama.cpp's "
            "standard build (GGML_CUDA_FA_QUANTS = q4_0-q4_0;q8_0-q8_0;f16-f16;bf16-bf16): "
            "each token converts the whole K and V to f16 first, slower by an unmeasured "
            "amount (ggml-cuda/fattn.cu ggml_cuda_flash_attn_ext_vec)",
        )
    return FaSupport(supported=True, where=FaWhere.NATIVE)


def _vulkan(k: KvCacheType, v: KvCacheType, dk: int, dv: int) -> FaSupport:
    rule = "ggml-vulkan.cpp ggml_backend_vk_device_supports_op"
    if dk % VULKAN_HEAD_MULTIPLE or dv % VULKAN_HEAD_MULTIPLE:
        return _no("Vulkan", f"head sizes K {dk} / V {dv} are not multiples of 8", rule)
    bad = next((t for t in (k, v) if t not in VULKAN_FA_TYPES), None)
    if bad is not None:
        return _no("Vulkan", f"no flash attention for the {bad.value} cache type", rule)
    if (k is K.BF16) != (v is K.BF16):
        return _no("Vulkan", f"bf16 pairs only with bf16, not {_pair(k, v)}", rule)
    return FaSupport(supported=True, where=FaWhere.NATIVE)


def _metal(k: KvCacheType, v: KvCacheType, dk: int, dv: int) -> FaSupport:
    rule = "ggml-metal-device.m ggml_metal_device_supports_op"
    if dk not in METAL_HEADS or dk < dv or (dk == 72 and dv != 72):
        return _no("Metal", f"no flash-attention kernel for head sizes K {dk} / V {dv}", rule)
    if k is not v:
        return _no("Metal", f"K and V must be one type, not {_pair(k, v)}", rule)
    if k not in METAL_FA_TYPES:
        return _no("Metal", f"no flash attention for the {k.value} cache type", rule)
    return FaSupport(supported=True, where=FaWhere.NATIVE)


def _sycl(k: KvCacheType, v: KvCacheType, dk: int, dv: int, gqa: int) -> FaSupport:
    rule = "ggml-sycl/fattn.cpp ggml_sycl_get_best_fattn_kernel"
    heads = _heads_problem(dk, dv, gqa, SYCL_EQUAL_HEADS, SYCL_GQA_HEADS)
    if heads is not None:
        return _no("SYCL", heads, rule)
    if k not in SYCL_FA_K_TYPES:
        return _no("SYCL", f"no flash attention for the {k.value} K cache type", rule)
    vec = dk <= 512 and dk % 64 == 0 and K.BF16 not in (k, v)
    if vec and v not in SYCL_FA_VEC_V:
        return FaSupport(
            supported=True,
            where=FaWhere.FAILS,
            reason=f"SYCL: the support check reads K's type only, and the decode kernel has "
            f"no case for the {v.value} V cache type: llama.cpp aborts "
            "(ggml-sycl/fattn.cpp ggml_sycl_flash_attn_ext_vec)",
        )
    return FaSupport(supported=True, where=FaWhere.NATIVE)


_NAMES = {
    GpuBackend.CUDA: "CUDA",
    GpuBackend.ROCM: "ROCm",
    GpuBackend.VULKAN: "Vulkan",
    GpuBackend.METAL: "Metal",
    GpuBackend.SYCL: "SYCL",
}


def native_backend(vendor: Vendor) -> GpuBackend:
    """A vendor's own backend (Vulkan for any other)."""
    return _NATIVE.get(vendor, GpuBackend.VULKAN)


def flash_attn_support(
    backend: GpuBackend | None,
    vendor: Vendor | None,
    k: KvCacheType,
    v: KvCacheType,
    head_dim_k: int,
    head_dim_v: int,
    *,
    gqa_ratio: int = 1,
) -> FaSupport:
    """One device's flash attention for K/V types k and v at these head sizes.

    The device: a GPU under `backend`, or under its `vendor`'s own backend when backend
    is None (as PlanSettings.gpu_backend); the CPU when both are None (ggml-cpu.cpp
    ggml_backend_cpu_device_supports_op: every FLASH_ATTN_EXT). `gqa_ratio`: query heads
    per KV head, which some head sizes need (`attention_shape` gives all three)."""
    if backend is None and vendor is None:
        return FaSupport(supported=True, where=FaWhere.NATIVE)
    chosen = backend if backend is not None else native_backend(vendor or Vendor.OTHER)
    k, v = _as_seen(k), _as_seen(v)
    dk, dv, gqa = head_dim_k, head_dim_v, gqa_ratio
    if chosen in (GpuBackend.CUDA, GpuBackend.ROCM):
        return _cuda(k, v, dk, dv, gqa, _NAMES[chosen])
    if chosen is GpuBackend.VULKAN:
        return _vulkan(k, v, dk, dv)
    if chosen is GpuBackend.METAL:
        return _metal(k, v, dk, dv)
    return _sycl(k, v, dk, dv, gqa)


def device_support(
    rig: Rig,
    device: str,
    k: KvCacheType,
    v: KvCacheType,
    shape: FaShape,
    gpu_backend: GpuBackend | None = None,
) -> FaSupport:
    """The answer of one placement device (`cpu`, `rpc-cpu:HOST`, `gpu:N`). A GPU on
    another host is an RPC device: ggml-rpc.cpp ggml_backend_rpc_device_supports_op says
    yes to every op, so the probe passes and a pair its own backend lacks fails there."""
    i = gpu_index(device)
    if i is None:
        return FaSupport(supported=True, where=FaWhere.NATIVE)
    gpu = rig.gpus[i]
    own = flash_attn_support(
        gpu_backend,
        gpu.vendor,
        k,
        v,
        shape.head_dim_k,
        shape.head_dim_v,
        gqa_ratio=shape.gqa_ratio,
    )
    if not gpu.host or own.supported:
        return own
    return FaSupport(
        supported=True,
        where=FaWhere.FAILS,
        reason=f"over RPC every op is accepted (ggml-rpc.cpp ggml_backend_rpc_device_supports_op)"
        f"; on {gpu.host}: {own.reason.split('; ')[0]}",
    )


_SEVERITY = {FaWhere.NATIVE: 0, FaWhere.GPU_F16: 1, FaWhere.CPU: 2, FaWhere.FAILS: 3}


def worst(answers: Iterable[FaSupport]) -> FaSupport:
    """The answer that matters most of several devices' (a native kernel when none)."""
    return max(
        answers,
        key=lambda a: _SEVERITY[a.where],
        default=FaSupport(supported=True, where=FaWhere.NATIVE),
    )


def rig_support(
    rig: Rig, k: KvCacheType, v: KvCacheType, g: Geometry, gpu_backend: GpuBackend | None
) -> FaSupport:
    """The worst answer of every GPU of the rig (each under `gpu_backend`, None = its
    vendor's own) for K/V types k and v of model g."""
    shape = attention_shape(g)
    return worst(
        device_support(rig, f"gpu:{i}", k, v, shape, gpu_backend) for i in range(len(rig.gpus))
    )


def resolve_flash_attn_auto(
    rig: Rig,
    devices: Iterable[str],
    k: KvCacheType,
    v: KvCacheType,
    g: Geometry,
    gpu_backend: GpuBackend | None = None,
) -> tuple[bool, dict[str, FaSupport]]:
    """What `-fa auto` becomes, and each device's answer.

    `devices`: the device of each attention layer as -ngl/--tensor-split assign it
    (placement.kv_devices: llama.cpp's model.dev_layer(il)). src/llama-context.cpp
    resolve_fused_ops reserves a one-token-per-sequence graph and turns flash attention
    off when any layer's FLASH_ATTN_EXT lands on another device than the layer's, which
    the scheduler does when that device refuses the op. Before the probe
    (llama_init_from_model) Grok turns it off and a quantized V cache turns it on."""
    shape = attention_shape(g)
    answers = {d: device_support(rig, d, k, v, shape, gpu_backend) for d in dict.fromkeys(devices)}
    if g.architecture == "grok":
        return False, answers
    if _as_seen(v).quantized:
        return True, answers
    return all(a.supported for a in answers.values()), answers


def auto_note(on: bool, answers: dict[str, FaSupport], g: Geometry) -> str:
    """One line on what `resolve_flash_attn_auto` decided and why ('' when every device
    has a kernel of its own)."""
    if g.architecture == "grok":
        return "llama.cpp turns flash attention off for Grok (llama_init_from_model)"
    odd = [(d, a) for d, a in answers.items() if a.where is not FaWhere.NATIVE]
    if not odd:
        return ""
    device, a = odd[0]
    if on and not a.supported:
        return f"a quantized V cache keeps flash attention on; on {device}, {a.reason}"
    return f"on {device}, {a.reason}"
