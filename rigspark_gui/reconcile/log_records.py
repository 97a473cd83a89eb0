"""What a llama.cpp log yields: the records (LlamaLog, LogBuffer, LogDevice, BenchRow,
FitLog, FitLogDevice) and their kinds, the limits on a log's size, and how llama.cpp's
names and printed values read: the device behind a buffer name, a file type as a
quantization label, and the numbers and flags of `key = value` lines and llama-bench
columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.fit import FitStatus

__all__ = [
    "MAX_LINE_CHARS",
    "MAX_LOG_BYTES",
    "MIB",
    "BenchRow",
    "BufferKind",
    "FitLog",
    "FitLogDevice",
    "FlashAttn",
    "LlamaLog",
    "LogBuffer",
    "LogDevice",
    "LogReadError",
    "buffer_device",
    "parse_flag",
    "parse_flash",
    "parse_float",
    "parse_int",
    "quant_label",
]

MIB = 1 << 20
MAX_LOG_BYTES = 64 * MIB
# llama.cpp's buffer and settings lines are short; a longer line is something else (a
# chat template, a metadata dump) and is skipped whole rather than scanned.
MAX_LINE_CHARS = 16384


class LogReadError(RigSparkError):
    """A log could not be read or holds nothing RigSpark can compare."""


class BufferKind(StrEnum):
    """What a buffer holds, in llama.cpp's words (`model buffer`, `KV buffer` ...)."""

    MODEL = "model"
    REPACK = "repack"  # CPU_REPACK / CPU_AARCH64 / AMX: weights copied into another layout
    KV = "kv"
    COMPUTE = "compute"
    OUTPUT = "output"
    OTHER = "other"


class FlashAttn(StrEnum):
    ON = "on"
    OFF = "off"
    AUTO = "auto"


@dataclass(frozen=True, slots=True, kw_only=True)
class LogBuffer:
    """One `<name> <kind> buffer size = <x> MiB` line."""

    # llama.cpp's buffer name: CUDA0, CPU_Mapped, CUDA_Host ...
    name: str
    kind: BufferKind
    # cpu or gpu:N; None for a backend RigSpark lacks
    device: str | None
    # the MiB figure as printed (two decimals)
    mib: float
    # round(mib * 2^20)
    bytes: int
    # the llama.cpp function that printed it
    origin: str
    # 1-based line number in the log
    line: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDevice:
    """A device llama.cpp named: CUDA0 and its card, with the free memory it saw."""

    name: str
    description: str = ""
    free_mib: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchRow:
    """One llama-bench result."""

    # llama-bench's model type, e.g. 'llama 8B Q4_K - Medium'
    model: str
    model_filename: str | None = None
    size_bytes: int | None = None
    params: int | None = None
    backend: str = ""
    ngl: int | None = None
    threads: int | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
    type_k: str | None = None
    type_v: str | None = None
    flash_attn: FlashAttn | None = None
    tensor_split: tuple[float, ...] | None = None
    # pp512, tg128, pp512+tg128, 'tg128 @ d4096' ...
    test: str
    n_prompt: int = 0
    n_gen: int = 0
    n_depth: int = 0
    tok_s: float
    tok_s_sd: float | None = None

    @property
    def quant(self) -> str | None:
        return quant_label(self.model)


@dataclass(frozen=True, slots=True, kw_only=True)
class FitLogDevice:
    """One device in llama.cpp's fit lines (common/fit.cpp), MiB as printed (floored)."""

    # llama.cpp's device name (CUDA0, ROCm1, RPC0) and its description
    name: str
    description: str = ""
    # '- CUDA0 (...): T total, U used, F free vs. target of M' with the initial settings
    # (printed when fit sees more than one device); F < 0 is a deficit
    total_mib: int | None = None
    projected_mib: int | None = None
    projected_free_mib: int | None = None
    target_mib: int | None = None
    # '- CUDA0 (...): N layers (K overflowing), X MiB used, Y MiB free' with fit's settings
    layers: int | None = None
    overflowing: int | None = None
    used_mib: int | None = None
    free_mib: int | None = None

    @property
    def device(self) -> str | None:
        """RigSpark's device (gpu:N) for the name; None for RPC and unknown backends."""
        return buffer_device(self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class FitLog:
    """What llama.cpp's `--fit` printed for one model load. A log holds a FitLog only when
    fit ran; figures it did not print stay None."""

    # the function named in the lines: llama_params_fit_impl (libllama, Dec 2025 - 2026)
    # or common_params_fit_impl (common/fit.cpp)
    function: str
    # None when the log stops before fit's verdict
    status: FitStatus | None = None
    # why fit failed, in llama.cpp's words ('n_gpu_layers already set by user to 99, abort')
    reason: str = ""
    # no GPU: fit weighed host memory against the total host memory
    host_only: bool = False
    # 'projected to use X MiB of device memory vs. Y MiB of free device memory'
    projected_mib: int | None = None
    free_mib: int | None = None
    # the free-memory target of a single device ('will leave X >= Y', 'target of Y')
    margin_mib: int | None = None
    # 'need to reduce device memory by X' / 'need to use X MiB less in total'
    shortfall_mib: int | None = None
    # the context fit started from and the one it left (reduced, or kept)
    initial_context: int | None = None
    context: int | None = None
    context_set_by_user: bool = False
    # 'context size reduced from A to B -> need X MiB less memory in total'
    context_saving_mib: int | None = None
    # MoE: surplus (> 0) or deficit (< 0) with only the dense weights in device memory
    dense_surplus_mib: int | None = None
    devices: tuple[FitLogDevice, ...] = ()
    # 'fitting params to free memory took S seconds'
    seconds: float | None = None
    # 1-based lines of the first and last fit line of this run
    first_line: int = 0
    last_line: int = 0

    @property
    def changed(self) -> bool:
        """Fit changed the settings (context, layers, overrides)."""
        return self.status is FitStatus.FITTED


@dataclass(frozen=True, slots=True, kw_only=True)
class LlamaLog:
    """What one llama.cpp log recovered. Settings describe the last model load in it."""

    model_path: str | None = None
    # general.name
    model_name: str | None = None
    architecture: str | None = None
    # as printed: 'Q4_K - Medium'
    file_type: str | None = None
    n_layer: int | None = None
    n_ctx_train: int | None = None
    n_ctx: int | None = None
    n_ctx_per_seq: int | None = None
    n_seq_max: int | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
    flash_attn: FlashAttn | None = None
    flash_attn_was_auto: bool = False
    type_k: str | None = None
    type_v: str | None = None
    kv_unified: bool | None = None
    # cells per stream of each KV cache printed (iswa: two)
    kv_cells: tuple[int, ...] = ()
    kv_streams: int | None = None
    swa_full: bool | None = None
    # cells of the sliding-window cache
    swa_cells: int | None = None
    offloaded_layers: int | None = None
    # Y of 'offloaded X/Y layers'
    offload_slots: int | None = None
    # device of each slot, when llama.cpp printed the assignment
    layer_devices: tuple[str, ...] = ()
    pipeline_copies: int | None = None
    mmap: bool | None = None
    devices: tuple[LogDevice, ...] = ()
    # system_info flags set to 1
    cpu_features: tuple[str, ...] = ()
    build: str | None = None
    # allocation failures printed
    failures: tuple[str, ...] = ()
    buffers: tuple[LogBuffer, ...] = ()
    bench: tuple[BenchRow, ...] = ()
    # markdown, json, jsonl or csv
    bench_format: str | None = None
    # what llama.cpp's --fit printed before the load; None when it did not run
    fit: FitLog | None = None
    # model loads seen; the fields are the last one's
    loads: int = 0
    lines: int = 0
    skipped_lines: int = 0

    @property
    def quant(self) -> str | None:
        """The file type as a quantization label (Q4_K_M, Q8_0 ...)."""
        return quant_label(self.file_type) if self.file_type else None

    def buffers_of(self, kind: BufferKind) -> tuple[LogBuffer, ...]:
        return tuple(b for b in self.buffers if b.kind is kind)

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        """GPUs that hold a buffer, by llama.cpp's index (CUDA1 -> 1)."""
        found = {int(b.device[4:]) for b in self.buffers if b.device and b.device[:4] == "gpu:"}
        return tuple(sorted(found))


# ------------------------------------------------------------------ names and labels

# ggml backend names for GPUs (GGML_CUDA_NAME is "ROCm" in HIP builds, "MUSA" for Moore
# Threads; Metal names its device MTL0; Apple's old builds say "Metal").
_GPU_BACKENDS = (
    "CUDA",
    "ROCm",
    "HIP",
    "MUSA",
    "Vulkan",
    "SYCL",
    "CANN",
    "OpenCL",
    "MTL",
    "Metal",
    "WebGPU",
    "Kompute",
)


def buffer_device(name: str) -> str | None:
    """RigSpark's device for a llama.cpp buffer name: pinned host (`CUDA_Host`), mapped
    and repacked CPU buffers are `cpu`; `CUDA1`, `ROCm0`, `Vulkan2` are `gpu:N`."""
    if name.startswith(("CPU", "AMX")) or name.endswith("_Host"):
        return "cpu"
    for backend in _GPU_BACKENDS:
        if name.startswith(backend):
            tail = name[len(backend) :].split("_", 1)[0]
            if tail == "":
                return "gpu:0"
            if tail.isdigit() and len(tail) <= 3:
                return f"gpu:{int(tail)}"
    return None


_FTYPE_SIZE = {"Small": "_S", "Medium": "_M", "Large": "_L"}
_QUANT_HEAD = re.compile(r"(?:I?Q\d\w*|TQ\d\w*|B?F16|F32|MXFP4)\Z")


def quant_label(text: str) -> str | None:
    """A llama.cpp file type name as a quantization label: 'Q4_K - Medium' -> Q4_K_M,
    'mostly Q4_0' -> Q4_0, 'all F32' -> F32, 'IQ4_XS - 4.25 bpw' -> IQ4_XS, and the same
    inside llama-bench's model column ('qwen2 7B Q4_K - Medium')."""
    words = text.replace("(guessed)", "").split()
    for i, w in enumerate(words):
        if not _QUANT_HEAD.match(w):
            continue
        if i + 2 < len(words) and words[i + 1] == "-" and words[i + 2] in _FTYPE_SIZE:
            if w == "Q2_K" and words[i + 2] == "Medium":
                return "Q2_K"  # llama-quantize's Q2_K is the 'Medium' mix
            return w + _FTYPE_SIZE[words[i + 2]]
        return w
    return None


# ------------------------------------------------------------------ printed values


def parse_int(text: str | None) -> int | None:
    """The integer at the start of a printed value ('4096', '-1', '512 (x)'), else None."""
    if text is None:
        return None
    t = text.strip().split(" ", 1)[0]
    if t.startswith("-") and t[1:].isdigit() and len(t) < 20:
        return int(t)
    return int(t) if t.isdigit() and len(t) < 20 else None


def parse_float(text: str | None) -> float | None:
    """A printed number as a finite float, else None."""
    if text is None:
        return None
    try:
        v = float(text.strip())
    except ValueError:
        return None
    return v if v == v and abs(v) != float("inf") else None


def parse_flag(value: str) -> bool | None:
    """A printed on/off value (1, true, enabled ... / 0, false, disabled ...), else None."""
    v = value.strip().lower()
    if v in ("1", "true", "enabled", "on", "yes"):
        return True
    if v in ("0", "false", "disabled", "off", "no"):
        return False
    return None


def parse_flash(value: str) -> FlashAttn | None:
    """A printed flash-attention setting: auto (or -1), on or off, else None."""
    v = value.strip().lower()
    if v in ("auto", "-1"):
        return FlashAttn.AUTO
    on = parse_flag(v)
    return None if on is None else FlashAttn.ON if on else FlashAttn.OFF
