"""The knobs of one plan: context, KV types, flash attention, sequences, backend."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.model import KvCacheType

MAX_CONTEXT = 1 << 24  # 16 M tokens: beyond any model's trained context
# llama.cpp's --fit defaults (common/common.h): the margin kept free on each device and
# the smallest context fit may shrink to
DEFAULT_FIT_TARGET_MIB = 1024
DEFAULT_FIT_CTX = 4096
# Settings a plan can leave to the engine ("auto"): the value the record holds is then
# what the engine's default resolved to for this model and rig (plan.defaults).
ENGINE_DEFAULTS = ("context", "flash_attn", "parallel")
KV_PAD = 256  # llama.cpp pads the KV cache size to a multiple of 256 cells
DEFAULT_UBATCH = 512  # llama.cpp's default n_ubatch


class Backend(StrEnum):
    """The engine a plan is for: one list for planning and for launching."""

    LLAMA_CPP = "llama.cpp"
    OLLAMA = "ollama"
    LM_STUDIO = "lm-studio"
    KOBOLDCPP = "koboldcpp"
    VLLM = "vllm"
    SGLANG = "sglang"
    MLX = "mlx"

    @property
    def ggml_based(self) -> bool:
        """Ollama, LM Studio and koboldcpp run llama.cpp underneath: same allocator,
        same figures."""
        return self in (Backend.LLAMA_CPP, Backend.OLLAMA, Backend.LM_STUDIO, Backend.KOBOLDCPP)

    @property
    def serving(self) -> bool:
        """Serving engines (vLLM, SGLang): every weight on the GPUs, a memory budget taken
        up front and a paged KV pool shared by the requests."""
        return self in (Backend.VLLM, Backend.SGLANG)

    @property
    def label(self) -> str:
        return _BACKEND_LABELS[self]

    @property
    def kv_types(self) -> tuple[KvCacheType, ...]:
        """The KV cache types this engine can be told to use."""
        return _BACKEND_KV[self]

    @property
    def kv_linked(self) -> bool:
        """One type for K and V (Ollama's OLLAMA_KV_CACHE_TYPE, koboldcpp's --quantkv,
        vLLM's --kv-cache-dtype, MLX)."""
        return self not in (Backend.LLAMA_CPP, Backend.LM_STUDIO)

    def kv_problem(self, k: KvCacheType, v: KvCacheType) -> str | None:
        """Why this engine cannot run K/V types k and v, or None."""
        allowed = self.kv_types
        if self.kv_linked and k != v:
            return f"{self.label} uses one KV type for K and V, not K {k.value} / V {v.value}"
        bad = next((t for t in (k, v) if t not in allowed), None)
        if bad is not None:
            names = ", ".join(t.value for t in allowed)
            return f"{self.label}'s KV cache takes {names}, not {bad.value}"
        return None

    def nearest_kv(self, k: KvCacheType) -> KvCacheType:
        """The type this engine would use for a cache asked to be `k` (same, else the
        closest one it has at least as many bits as, else its first)."""
        if k in self.kv_types:
            return k
        order = list(KvCacheType)
        for t in order[order.index(k) :: -1]:
            if t in self.kv_types:
                return t
        return self.kv_types[0]


_LLAMA_KV = tuple(k for k in KvCacheType if k.llama_cpp)
# Ollama's OLLAMA_KV_CACHE_TYPE and koboldcpp's --quantkv know these three only; vLLM
# stores auto (the model's f16/bf16) or fp8; MLX-LM's cache is the model's dtype.
_BACKEND_KV: dict[Backend, tuple[KvCacheType, ...]] = {
    Backend.LLAMA_CPP: _LLAMA_KV,
    Backend.LM_STUDIO: _LLAMA_KV,
    Backend.OLLAMA: (KvCacheType.F16, KvCacheType.Q8_0, KvCacheType.Q4_0),
    Backend.KOBOLDCPP: (KvCacheType.F16, KvCacheType.Q8_0, KvCacheType.Q4_0),
    Backend.VLLM: (KvCacheType.F16, KvCacheType.BF16, KvCacheType.FP8),
    Backend.SGLANG: (KvCacheType.F16, KvCacheType.BF16, KvCacheType.FP8),
    Backend.MLX: (KvCacheType.F16, KvCacheType.BF16),
}
_BACKEND_LABELS = {
    Backend.LLAMA_CPP: "llama.cpp",
    Backend.OLLAMA: "Ollama",
    Backend.LM_STUDIO: "LM Studio",
    Backend.KOBOLDCPP: "koboldcpp",
    Backend.VLLM: "vLLM",
    Backend.SGLANG: "SGLang",
    Backend.MLX: "MLX",
}


class GpuBackend(StrEnum):
    """The compute backend GPUs run under: the same card decodes at different speeds
    under CUDA and Vulkan. None in the settings means each vendor's own."""

    CUDA = "cuda"
    ROCM = "rocm"
    VULKAN = "vulkan"
    METAL = "metal"
    SYCL = "sycl"


# Below this many tokens per second a chat feels slow (roughly reading speed): Auto's
# default minimum and the Catalog's "slow" line.
DEFAULT_MIN_TOK_S = 8.0


# name -> (low, high, low excluded): what each numeric setting may be. The settings
# file model (formats/settings.py) declares the same bounds; a test keeps them in step.
SETTING_RANGES: dict[str, tuple[float, float, bool]] = {
    "context": (1, MAX_CONTEXT, False),
    "parallel": (1, 256, False),
    "n_ubatch": (1, 65536, False),
    "prompt_tokens": (1, MAX_CONTEXT, False),
    "min_tok_s": (0, 100000, False),
    "memory_utilization": (0, 1, True),
    "tensor_parallel": (1, 1024, False),
    "pipeline_parallel": (1, 1024, False),
    "max_num_seqs": (1, 1 << 16, False),
    "max_num_batched_tokens": (1, 1 << 24, False),
    "cpu_offload_gb": (0, 1 << 20, False),
    "fit_ctx": (1, MAX_CONTEXT, False),
    "image_size": (1, 65536, False),
}
_ENUMS: dict[str, type[StrEnum]] = {
    "kv_k": KvCacheType,
    "kv_v": KvCacheType,
    "backend": Backend,
    "gpu_backend": GpuBackend,
}
_FLOATS = ("min_tok_s", "memory_utilization", "cpu_offload_gb")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanSettings:
    context: int = 8192
    kv_k: KvCacheType = KvCacheType.F16
    kv_v: KvCacheType = KvCacheType.F16
    flash_attn: bool = False
    # sequences served at once
    parallel: int = 1
    backend: Backend = Backend.LLAMA_CPP
    n_ubatch: int = DEFAULT_UBATCH
    # size sliding-window layers at the full context
    swa_full: bool = False
    # fixed quantization, or None = best
    quant: str | None = None
    # for prefill
    prompt_tokens: int = 1024
    # GPU compute backend; None = each vendor's own
    gpu_backend: GpuBackend | None = None
    # Auto: the best quality reaching this decode speed (0 = best that fits)
    min_tok_s: float = DEFAULT_MIN_TOK_S
    # serving engines only (vLLM, SGLang); None = the engine's own default
    # vLLM gpu_memory_utilization / SGLang mem_fraction_static
    memory_utilization: float | None = None
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    # vLLM --cpu-offload-gb
    cpu_offload_gb: float = 0.0
    # the sequences share one KV cache of `context` cells (llama-server's default
    # with auto slots, --kv-unified); else each holds context / parallel
    kv_unified: bool = False
    # llama.cpp's --fit: on, the margin per device in MiB (-fitt: one value for every
    # device, or one per device in llama.cpp's order) and the smallest context (-fitc)
    fit: bool = True
    fit_target_mib: tuple[int, ...] = (DEFAULT_FIT_TARGET_MIB,)
    fit_ctx: int = DEFAULT_FIT_CTX
    # how llama.cpp loads the weights the CPU holds: memory-mapped (True, its default),
    # read into memory (False: `--load-mode none`, `--no-mmap` before b11434), or None:
    # read in where the CPU backend repacks weights (the mapped pages would stay
    # resident beside the repacked copy), mapped otherwise
    mmap: bool | None = None
    # the CPU backend's repacked weight copies (False: llama.cpp's --no-repack)
    repack: bool = True
    # the model's vision/audio projector: not loaded ("text only", llama.cpp's
    # --no-mmproj); on the CPU (--no-mmproj-offload) rather than the first GPU; the
    # largest image side in pixels to size its compute buffer for (None: the warm-up
    # image clip.cpp reserves at load)
    text_only: bool = False
    mmproj_offload: bool = True
    image_size: int | None = None
    # speculative decoding with the model's own MTP / NextN blocks (llama.cpp's
    # `--spec-type draft-mtp`): they load, with a draft context of their own
    mtp_draft: bool = False
    # names of ENGINE_DEFAULTS left to the engine ("auto"); their fields hold what
    # they resolved to once a plan has resolved them
    engine_defaults: frozenset[str] = frozenset()

    def is_auto(self, name: str) -> bool:
        return name in self.engine_defaults

    def _in_range(self) -> None:
        for name, (low, high, strict) in SETTING_RANGES.items():
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidSettingsError(f"{name}: expected a number, not {value!r}")
            if (value <= low if strict else value < low) or value > high:
                lo = f"above {low:g}" if strict else f"at least {low:g}"
                raise InvalidSettingsError(
                    f"{name}: {value!r} is out of range ({lo}, at most {high:g})"
                )

    def _check(self) -> PlanSettings:
        self._in_range()
        unknown = sorted(self.engine_defaults - set(ENGINE_DEFAULTS))
        if unknown:
            raise InvalidSettingsError(f"{unknown[0]}: cannot be left to the engine (auto)")
        if not self.fit_target_mib or any(
            isinstance(m, bool) or not isinstance(m, int) or m < 0 or m > 1 << 30
            for m in self.fit_target_mib
        ):
            raise InvalidSettingsError(
                "fit_target_mib: one or more whole MiB figures of at least 0 are needed"
            )
        serving_knobs = {
            "--memory-utilization": self.memory_utilization,
            "--tensor-parallel": self.tensor_parallel,
            "--pipeline-parallel": self.pipeline_parallel,
            "--max-num-seqs": self.max_num_seqs,
            "--max-num-batched-tokens": self.max_num_batched_tokens,
            "--cpu-offload-gb": self.cpu_offload_gb or None,
        }
        if not self.backend.serving:
            knob = next((k for k, v in serving_knobs.items() if v is not None), None)
            if knob is not None:
                raise InvalidSettingsError(
                    f"{knob} is a vLLM/SGLang setting: add --backend vllm or --backend sglang"
                )
        if self.backend is Backend.SGLANG and self.cpu_offload_gb:
            raise InvalidSettingsError("--cpu-offload-gb is a vLLM option; SGLang has none here")
        ggml = self.backend.ggml_based or self.backend is Backend.MLX
        if ggml and (self.kv_k is KvCacheType.FP8 or self.kv_v is KvCacheType.FP8):
            raise InvalidSettingsError("the fp8 KV cache is a vLLM option; llama.cpp has none")
        problem = self.backend.kv_problem(self.kv_k, self.kv_v)
        if problem is not None:
            raise InvalidSettingsError(problem)
        if self.kv_v.quantized and not self.flash_attn and ggml and not self.is_auto("flash_attn"):
            raise InvalidSettingsError(
                f"a quantized V cache ({self.kv_v.value}) needs flash attention "
                "(llama.cpp refuses it otherwise): turn flash attention on"
            )
        return self

    def __post_init__(self) -> None:
        self._check()


def make_settings(**values: object) -> PlanSettings:
    """PlanSettings from loose values (CLI flags, a window's controls): names of enum
    members become members, whole numbers become floats where a float is meant; anything
    else out of place raises the user-facing InvalidSettingsError, naming the setting."""
    known = PlanSettings.__dataclass_fields__
    out: dict[str, Any] = {}
    auto = set(values.pop("engine_defaults", None) or ())  # type: ignore[call-overload]
    for name, value in values.items():
        if name not in known:
            raise InvalidSettingsError(f"{name}: not a plan setting")
        if value == "auto" and name in ENGINE_DEFAULTS:
            auto.add(name)  # the field keeps its default until a plan resolves it
            continue
        if name == "fit_target_mib" and isinstance(value, int | list):
            value = tuple(value) if isinstance(value, list) else (value,)
        kind = _ENUMS.get(name)
        if kind is not None and value is not None and not isinstance(value, kind):
            try:
                if not isinstance(value, str):
                    raise ValueError(value)
                value = kind(value)
            except ValueError:
                names = ", ".join(m.value for m in kind)
                raise InvalidSettingsError(f"{name}: {value!r} is not one of {names}") from None
        elif name in _FLOATS and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        out[name] = value
        auto.discard(name)
    return PlanSettings(**out, engine_defaults=frozenset(auto))


def settings_values(settings: PlanSettings) -> dict[str, Any]:
    """A PlanSettings as the keyword arguments `make_settings` takes back: a setting left
    to the engine is "auto" (a concrete value given on top of it pins it)."""
    out = {
        name: getattr(settings, name)
        for name in PlanSettings.__dataclass_fields__
        if name != "engine_defaults"
    }
    for name in settings.engine_defaults:
        out[name] = "auto"
    return out


def engine_default_settings(**values: object) -> PlanSettings:
    """A new plan's settings: context, flash attention and parallel slots left to the
    engine (what `llama-server -m model.gguf` or `ollama run` would do), `values` on top."""
    return make_settings(**{**dict.fromkeys(ENGINE_DEFAULTS, "auto"), **values})
