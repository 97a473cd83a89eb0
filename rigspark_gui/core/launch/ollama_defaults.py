"""What Ollama decides by itself when it loads a GGUF model, for the versions that hand
the model to llama.cpp's `llama-server` (ollama/ollama PR #16031, v0.30.0, May 2026):
the context, the sequences, the KV type, flash attention, the batch, the `--fit`
margin, and how `ollama ps` reports the load.

Since #16031 Ollama sizes nothing itself: it starts `llama-server` with a handful of
flags and lets `--fit` place the layers. Every rule below is read from Ollama's source
at commit fb30760 (August 2026) and checked against the v0.30.0 tag:

- `llm/llama_server.go` `startLlamaServer`: the flags (`-c num_ctx*num_parallel -np
  num_parallel`, `--cache-type-k/-v`, `--flash-attn`, `-b/-ub`, `-ngl` only for a set
  `num_gpu`); `LlamaServerFlashAttention`; `shouldDisableMMProjOffload` and
  `mmprojFitTargetMiB` (`LLAMA_ARG_FIT_TARGET`, PR #16866, v0.30.11); `MemorySize`
  and `memoryParsingWriter` (the buffer lines `ollama ps` is built from);
  `PredictServerVRAM` (its own rough estimate, used only to pick the batch and a GPU).
- `llm/server.go` `NewLlamaServer`: num_ctx capped at the trained context;
  `OLLAMA_KV_CACHE_TYPE` passed lower-cased, unchecked.
- `server/routes.go` `Serve`: the default context by total VRAM (47/23 GiB tiers);
  `usesAutomaticNumCtx`: a context from `OLLAMA_CONTEXT_LENGTH`, a Modelfile or the
  request is not automatic.
- `server/sched.go` `load`, `getRunner`, `nextLowerAutoNumCtx`,
  `automaticGenerationBatch`, `selectLlamaServerPlacement`: the parallel rules, the one
  retry at a lower context after an out-of-memory load, the batch, one GPU or all.
- `ml/device.go` `FlashAttentionSupported`, `cudaFlashAttentionSupported`.
- `envconfig/config.go`: `OLLAMA_CONTEXT_LENGTH` (0 = automatic), `OLLAMA_NUM_PARALLEL`
  (1), `OLLAMA_KV_CACHE_TYPE` (empty: llama.cpp's f16), `OLLAMA_FLASH_ATTENTION`
  (unset: automatic), `OLLAMA_GPU_OVERHEAD` (0 bytes per GPU).
- `cmd/cmd.go` `ListRunningHandler` and `format/bytes.go` `HumanBytes`: the PROCESSOR
  and SIZE columns of `ollama ps`.

Pure functions over numbers and `Gpu` records; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rigspark_gui.core.rig import Gpu, Vendor

# The Ollama releases these rules model, and how a recipe names them.
OLLAMA_VERSIONS = ">= 0.30"
OLLAMA_VERSIONS_LABEL = "Ollama 0.30 or later (llama-server with --fit)"

GIB = 1 << 30
MIB = 1 << 20

# server/routes.go Serve: "slightly lower thresholds (47/23 GiB vs. 48/24 GiB)"
CONTEXT_TIERS: tuple[tuple[int, int], ...] = ((47 * GIB, 262144), (23 * GIB, 32768))
CONTEXT_FLOOR_TIER = 4096
# server/sched.go getRunner: num_ctx below 4 becomes 4; a vision model gets 2048 at least
MIN_CONTEXT = 4
MIN_VISION_CONTEXT = 2048

# server/sched.go load: these architectures run one sequence whatever
# OLLAMA_NUM_PARALLEL says (ollama/ollama#4165)
SINGLE_SEQUENCE_ARCHITECTURES = frozenset(
    {
        "mllama",
        "qwen3vl",
        "qwen3vlmoe",
        "qwen35",
        "qwen35moe",
        "qwen3next",
        "lfm2",
        "lfm2moe",
        "nemotron_h",
        "nemotron_h_moe",
        "nemotron_h_omni",
    }
)

# llm/llama_server.go: mmprojOffloadHeadroom, "1 GiB for backend buffers beyond
# projector weights"; llama.cpp's own --fit margin (common/common.h fit_params_target)
PROJECTOR_HEADROOM = GIB
LLAMA_FIT_MARGIN = 1024 * MIB

# server/sched.go llamaServerGenerationBatch*: the -b/-ub Ollama picks for a chat model
BATCH_DEFAULT = 512
BATCH_CONSTRAINED = 256
BATCH_MEDIUM = 1024
BATCH_LARGE = 2048
# generationBatchSurcharge: memory Ollama sets aside for the larger batches
_BATCH_SURCHARGE = {BATCH_LARGE: 2 * GIB, BATCH_MEDIUM: 768 * MIB}
# generationBatchHasHeadroom: the predicted load may use this share of free memory
_BATCH_HEADROOM_PERCENT = {BATCH_LARGE: 60, BATCH_MEDIUM: 75}


# ---------------------------------------------------------------- context


def ollama_total_vram(gpus: Sequence[Gpu], gpu_overhead: int = 0) -> int:
    """The VRAM the context tier is chosen by: every local GPU's total memory less
    `OLLAMA_GPU_OVERHEAD` (server/routes.go Serve sums `TotalMemory - GpuOverhead()`).
    A GPU that reports no total counts its free memory; a remote GPU is not Ollama's."""
    total = 0
    for g in gpus:
        if g.host:
            continue
        memory = g.memory_total_bytes if g.memory_total_bytes is not None else g.memory_bytes
        total += max(memory - gpu_overhead, 0)
    return total


def ollama_context(
    total_vram_bytes: int,
    trained_context: int,
    env_context: int | None = None,
    *,
    vision: bool = False,
) -> int:
    """The context of each sequence (num_ctx) Ollama loads a model with.

    `OLLAMA_CONTEXT_LENGTH` (`env_context`; 0 means unset, as in envconfig) or else the
    tier by total VRAM: at least 47 GiB -> 262144, at least 23 GiB -> 32768, else 4096.
    Then at least 4 (2048 for a vision model, server/sched.go getRunner) and at most the
    trained context (llm/server.go NewLlamaServer; 0 = unknown, no cap). A Modelfile's
    or a request's num_ctx takes the place of `env_context` the same way."""
    if env_context:
        ctx = env_context
    else:
        tiers = (c for floor, c in CONTEXT_TIERS if total_vram_bytes >= floor)
        ctx = next(tiers, CONTEXT_FLOOR_TIER)
    ctx = max(ctx, MIN_CONTEXT)
    if vision:
        ctx = max(ctx, MIN_VISION_CONTEXT)
    if trained_context > 0:
        ctx = min(ctx, trained_context)
    return ctx


def ollama_context_fallback(context: int) -> int | None:
    """The context Ollama retries with once when a load at `context` (the automatic
    one, already capped at the trained context) runs out of memory: 32768 above 32768,
    4096 above 4096, else None (server/sched.go nextLowerAutoNumCtx). There is no second
    retry, and none at all for a context set by `OLLAMA_CONTEXT_LENGTH`, a Modelfile or
    the request (`reduceAutoNumCtxForLoadOOM` checks numCtxAuto)."""
    if context > 32768:
        return 32768
    if context > CONTEXT_FLOOR_TIER:
        return CONTEXT_FLOOR_TIER
    return None


def ollama_num_parallel(
    env_parallel: int | None, architecture: str, *, embedding: bool = False
) -> int:
    """Sequences Ollama serves at once: `OLLAMA_NUM_PARALLEL` (default 1, at least 1),
    but 1 for an embedding model and for the architectures of
    `SINGLE_SEQUENCE_ARCHITECTURES` (server/sched.go load)."""
    n = max(env_parallel or 1, 1)
    if embedding or architecture in SINGLE_SEQUENCE_ARCHITECTURES:
        return 1
    return n


# ---------------------------------------------------------------- flash attention


def _cuda_capability(gpu: Gpu) -> tuple[int, int] | None:
    try:
        major, _, minor = (gpu.compute_capability or "").partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        return None


def ollama_flash_attn(gpus: Sequence[Gpu], env: bool | None = None) -> tuple[bool, str]:
    """Whether flash attention runs under Ollama, and why.

    `OLLAMA_FLASH_ATTENTION` (`env`) decides when set. Otherwise Ollama passes
    `--flash-attn auto` (llama.cpp turns it on where the backend supports it), except
    `--flash-attn off` when a GPU is NVIDIA (CUDA) of compute capability below 6.0 or
    exactly 7.2 (Jetson Xavier) (llm/llama_server.go LlamaServerFlashAttention,
    ml/device.go cudaFlashAttentionSupported). CPU, Metal, ROCm and Vulkan always
    qualify. A GPU whose compute capability is unknown counts as supported (Ollama
    does the same when the driver version is unknown): auto."""
    if env is not None:
        state = "on" if env else "off"
        return env, f"OLLAMA_FLASH_ATTENTION={int(env)}: flash attention {state}"
    for g in gpus:
        if g.vendor is not Vendor.NVIDIA or g.host:
            continue
        cc = _cuda_capability(g)
        if cc is not None and (cc < (6, 0) or cc == (7, 2)):
            return False, (
                f"Ollama turns flash attention off on {g.name} (CUDA compute capability "
                f"{cc[0]}.{cc[1]}: below 6.0 or 7.2)"
            )
    return True, "Ollama passes --flash-attn auto: llama.cpp turns it on where supported"


# ---------------------------------------------------------------- llama-server


def ollama_llama_server_args(
    num_ctx: int,
    num_parallel: int,
    num_gpu: int | None,
    kv_type: str | None,
    flash: bool | None,
    *,
    num_batch: int | None = BATCH_DEFAULT,
) -> list[str]:
    """The sizing flags Ollama starts llama-server with, in its order
    (llm/llama_server.go startLlamaServer; the model, port, log and template flags are
    left out). `num_ctx` is the per-sequence context after `ollama_context`; `num_gpu`
    None is Ollama's default -1 (no `-ngl`: `--fit` places the layers), 0 is CPU only;
    `kv_type` None or "" leaves llama.cpp's f16; `flash` None is auto; `num_batch` is
    the `-b`/`-ub` Ollama passes: always one, 512 (api.DefaultOptions) unless the
    automatic rule (`ollama_generation_batch`) or a num_batch option changed it."""
    n = max(num_parallel, 1)
    args = ["-c", str(num_ctx * n), "-np", str(n)]
    if kv_type:
        kv = kv_type.lower()
        args += ["--cache-type-k", kv, "--cache-type-v", kv]
    args += ["--flash-attn", "auto" if flash is None else ("on" if flash else "off")]
    if num_batch is not None and num_batch > 0:
        args += ["-b", str(num_batch), "-ub", str(num_batch)]
    if num_gpu is not None and num_gpu >= 0:
        args += ["-ngl", str(num_gpu)]
    return args


def ollama_predicted_vram(
    file_bytes: int,
    n_layer: int,
    n_head_kv_min: int,
    n_embd: int,
    n_head_max: int,
    context_total: int,
) -> int:
    """Ollama's own rough load estimate (llm/llama_server.go PredictServerVRAM): the
    model file plus an f16 KV cache of `2 * layers * kv_heads * (n_embd / n_head) *
    context * 2` bytes, with the fewest KV heads of any layer (1 when none). Ollama uses
    it only to pick the batch and whether one GPU is enough; `--fit` places the layers."""
    kv_heads = n_head_kv_min or 1
    head_dim = n_embd // n_head_max if n_head_max > 0 else 0
    return file_bytes + 2 * n_layer * kv_heads * head_dim * context_total * 2


def _batch_fits(batch: int, predicted: int, available: int) -> bool:
    # server/sched.go generationBatchFits, unsigned integer arithmetic as in Go
    if predicted == 0 or available == 0:
        return True
    threshold = available * 80 // 100
    if predicted > threshold:
        return False
    headroom = _BATCH_HEADROOM_PERCENT.get(batch)
    if headroom is not None and predicted > available * headroom // 100:
        return False
    return _BATCH_SURCHARGE.get(batch, 0) <= threshold - predicted


def _gpu_memory(g: Gpu) -> int:
    # the free memory, or the total when none is reported or it exceeds the total
    free, total = g.memory_free_bytes or 0, g.memory_total_bytes or 0
    return total if free == 0 or (total > 0 and total < free) else free


def ollama_generation_batch(
    context_total: int,
    predicted_vram: int,
    available_bytes: int,
    gpus: Sequence[Gpu],
    flash: bool,
) -> int:
    """The `-b`/`-ub` Ollama gives a chat model whose Modelfile and request set no
    num_batch (server/sched.go automaticGenerationBatch). With flash attention off and a
    CUDA GPU: 256 when the context (all sequences) exceeds 4096 and a CUDA GPU has at
    most 8 GiB, else 512. Otherwise 2048 above 32768 tokens, 1024 above 4096, else 512,
    stepped down to 1024 then 512 while the estimate (`ollama_predicted_vram`) plus the
    batch's surcharge (2 GiB, 768 MiB) exceeds 80 % of `available_bytes` or the
    estimate exceeds 60 % (2048) / 75 % (1024) of it. An embedding model gets
    min(2048, context) instead (llm/llama_server.go DefaultEmbeddingNumBatch)."""
    cuda = [g for g in gpus if g.vendor is Vendor.NVIDIA and not g.host]
    if not flash and cuda:
        small = context_total > 4096 and any(0 < _gpu_memory(g) <= 8 * GIB for g in cuda)
        return BATCH_CONSTRAINED if small else BATCH_DEFAULT
    if context_total > 32768:
        batch = BATCH_LARGE
    elif context_total > 4096:
        batch = BATCH_MEDIUM
    else:
        batch = BATCH_DEFAULT
    while batch > BATCH_DEFAULT and not _batch_fits(batch, predicted_vram, available_bytes):
        batch = BATCH_MEDIUM if batch > BATCH_MEDIUM else BATCH_DEFAULT
    return batch


def ollama_single_gpu(predicted_vram: int, gpu_available_bytes: int) -> bool:
    """Whether Ollama loads onto this one GPU alone (`--split-mode none --main-gpu`)
    rather than spreading over all of them: its estimate fits in 80 % of that GPU's
    available memory (server/sched.go bestSingleGPUFit; the GPU with the most available
    memory that qualifies wins). `OLLAMA_SCHED_SPREAD=1` turns this off."""
    return predicted_vram <= gpu_available_bytes * 80 // 100


# ---------------------------------------------------------------- vision projector


def ollama_fit_margin(projector_bytes: int) -> int:
    """The memory `--fit` keeps free on each GPU under Ollama, in bytes: with a vision
    projector on the GPU, its weights plus 1 GiB rounded up to whole MiB (Ollama sets
    `LLAMA_ARG_FIT_TARGET` in MiB, llm/llama_server.go mmprojFitTargetMiB, PR #16866,
    v0.30.11); without one, llama.cpp's default 1024 MiB. (A `LLAMA_ARG_FIT_TARGET` the
    user exported is kept as it is; one in the runner's own environment is raised by
    the projector's share.)"""
    if projector_bytes <= 0:
        return LLAMA_FIT_MARGIN
    return -(-(projector_bytes + PROJECTOR_HEADROOM) // MIB) * MIB


def ollama_projector_on_cpu(
    projector_bytes: int,
    gpus: Sequence[Gpu],
    num_gpu: int | None = None,
    model_layers: int = 0,
) -> tuple[bool, str]:
    """Whether Ollama keeps the vision projector on the CPU (`--no-mmproj-offload`), and
    why (llm/llama_server.go shouldDisableMMProjOffload): `num_gpu` 0 (cpu-only); a
    `num_gpu` below the model's layers + 1 (`model_layers`, partial-text-offload); or a
    GPU with less memory (free, else total) than the projector plus 1 GiB
    (limited-vram). Then the fit margin stays llama.cpp's default."""
    if num_gpu == 0:
        return True, "cpu-only: num_gpu 0"
    if num_gpu is not None and num_gpu > 0 and model_layers > 0 and num_gpu < model_layers:
        return True, f"partial-text-offload: num_gpu {num_gpu} < {model_layers} layers"
    need = projector_bytes + PROJECTOR_HEADROOM
    for g in gpus:
        if g.host:
            continue
        memory = _gpu_memory(g)
        if 0 < memory < need:
            return True, f"limited-vram: {g.name} has less than the projector + 1 GiB"
    return False, ""


# ---------------------------------------------------------------- ollama ps


def _go_round(x: float) -> int:
    # Go's math.Round: halves away from zero (Python's round() halves to even)
    floor = math.floor(x)
    return floor + 1 if x - floor >= 0.5 else floor


def ollama_ps_processor(cpu_bytes: int, gpu_bytes: int, *, all_layers_on_gpu: bool = False) -> str:
    """The PROCESSOR column of `ollama ps` (cmd/cmd.go ListRunningHandler) for a load
    whose llama-server buffers total `cpu_bytes` outside and `gpu_bytes` on the GPUs.

    Ollama sums llama-server's "... buffer size = X MiB" lines: `CPU`, `CPU_*` (such as
    `CPU_Mapped`, `CPU_REPACK`), `BLAS` and `*_Host` buffers are CPU, everything else
    (`CUDA0`, `MTL0_Mapped` ...) is GPU (llm/llama_server.go isGPUBuffer). When every
    layer is offloaded and none overflows, the total is the GPU figure alone
    (`all_layers_on_gpu`, MemorySize): "100% GPU" although the token embeddings and the
    host compute buffer sit in system memory. Percentages are the CPU share rounded
    half away from zero, GPU = 100 minus it: "48%/52% CPU/GPU"."""
    size = gpu_bytes if all_layers_on_gpu else cpu_bytes + gpu_bytes
    vram = gpu_bytes
    if vram == 0:
        return "100% CPU"
    if vram == size:
        return "100% GPU"
    if vram > size or size == 0:
        return "Unknown"
    cpu_percent = _go_round(float(size - vram) / float(size) * 100)
    return f"{cpu_percent}%/{100 - cpu_percent}% CPU/GPU"


def ollama_ps_size(total_bytes: int) -> str:
    """The SIZE column of `ollama ps`: decimal units, whole numbers from 10 up, one
    decimal below 10 unless whole (format/bytes.go HumanBytes): 9.6 GB, 42 GB, 1 GB."""
    b = total_bytes
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if b >= scale:
            value = b / scale
            if value >= 10 or value == math.trunc(value):
                return f"{int(value)} {unit}"
            return f"{value:.1f} {unit}"
    return f"{b} B"


def ollama_ps_total(cpu_bytes: int, gpu_bytes: int, *, all_layers_on_gpu: bool = False) -> int:
    """The byte count behind SIZE: all buffers, or the GPU ones alone when every layer
    is offloaded without overflow (llm/llama_server.go MemorySize)."""
    return gpu_bytes if all_layers_on_gpu else cpu_bytes + gpu_bytes
