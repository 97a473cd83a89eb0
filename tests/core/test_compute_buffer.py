"""GPU compute buffers against llama.cpp's own CUDA logs, as users and CI published them.

Each case is one load with the whole model on one GPU: CUDA0 is the device compute
buffer, CUDA_Host the pinned host one (llama.cpp prints MiB with two decimals; the host
buffer also holds a few KiB of small inputs). Sources, all single-GPU full offload:
- open-llama 7B v2: ggml-org/ci, llama.cpp build 2459, Tesla V100 (main and perplexity).
- Pythia 2.8B: ggml-org/ci, builds 3332-4715, Tesla V100, flash attention off and on.
- Mistral 7B Instruct v0.2: fedora-copr/logdetective PR #106 (2K and 32K context).
- WizardLM-2 7B (Mistral geometry): ggml-org/llama.cpp issue #8096.
- Llama 3.2 3B and Llama 3.1 8B: ollama/ollama issues #8310 and #9352; those builds kept
  one unified KV stream, so n_kv is the whole context (planned here as one sequence).
- DeepSeek-R1-Distill-Qwen-32B: ggml-org/llama.cpp issue #11861, flash attention on.
Two GPUs with pipeline parallelism ("pipeline parallelism enabled (n_copies=4)"):
- DeepSeek-R1-Distill-Qwen-32B on 2x RTX 4090, 33 + 31 layers: ollama/ollama issue #9068.
- A Command-R v01 geometry (40 layers, 64 heads, no GQA, 256000 vocab) on an RTX 4070 Ti
  and an RTX 3090 Ti, first device: ggml-org/llama.cpp PR #6122.
"""

from __future__ import annotations

import pytest

from rigspark_gui.core.memory import (
    PIPELINE_COPIES,
    device_compute_bytes,
    host_compute_bytes,
)
from rigspark_gui.core.model.model_spec import Geometry
from rigspark_gui.core.settings import PlanSettings

MIB = 1 << 20


def _g(arch: str, layers: int, embd: int, heads: int, kv: int, hd: int, vocab: int, ff: int):
    return Geometry(
        architecture=arch, n_layer=layers, n_embd=embd, n_head=heads, n_head_kv=kv,
        head_dim_k=hd, head_dim_v=hd, n_vocab=vocab, n_ff=ff, context_length=131072,
    )  # fmt: skip


OPEN_LLAMA_7B = _g("llama", 32, 4096, 32, 32, 128, 32000, 11008)
PYTHIA_2_8B = _g("gptneox", 32, 2560, 32, 32, 80, 50304, 10240)
MISTRAL_7B = _g("llama", 32, 4096, 32, 8, 128, 32000, 14336)
LLAMA_32_3B = _g("llama", 28, 3072, 24, 8, 128, 128256, 8192)
LLAMA_31_8B = _g("llama", 32, 4096, 32, 8, 128, 128256, 14336)
QWEN_32B = _g("qwen2", 64, 5120, 40, 8, 128, 152064, 27648)

CASES = [
    # geometry, n_ctx, flash attention, CUDA0 MiB, CUDA_Host MiB
    (OPEN_LLAMA_7B, 512, False, 70.50, 9.00),
    (OPEN_LLAMA_7B, 2048, False, 164.00, 12.00),
    (PYTHIA_2_8B, 2048, False, 162.00, 9.01),
    (PYTHIA_2_8B, 2048, True, 103.25, 9.01),
    (MISTRAL_7B, 2048, False, 164.00, 12.01),
    (MISTRAL_7B, 32768, False, 2144.00, 72.01),
    (MISTRAL_7B, 8192, False, 560.00, 24.01),
    (LLAMA_32_3B, 8192, False, 424.00, 22.01),
    (LLAMA_31_8B, 81920, False, 5312.00, 168.01),
    (QWEN_32B, 16384, True, 307.00, 42.01),
]


@pytest.mark.parametrize(("g", "n_ctx", "fa", "device_mib", "host_mib"), CASES)
def test_full_offload_matches_llama_cpp_cuda_logs(
    g: Geometry, n_ctx: int, fa: bool, device_mib: float, host_mib: float
) -> None:
    s = PlanSettings(context=n_ctx, flash_attn=fa)  # n_ubatch 512, as in every log
    device = device_compute_bytes(g, s, list(range(g.n_layer)), has_output=True)
    assert device / MIB == pytest.approx(device_mib, abs=0.005)
    assert host_compute_bytes(g, s) / MIB == pytest.approx(host_mib, abs=0.02)


COMMAND_R = _g("command-r", 40, 8192, 64, 64, 128, 256000, 22528)

PIPELINE_CASES = [
    # geometry, n_ctx, layers on the device, holds the head, CUDAn MiB
    (QWEN_32B, 2048, 33, False, 256.01),
    (QWEN_32B, 2048, 31, True, 363.02),
    (COMMAND_R, 4096, 12, False, 672.01),
]


@pytest.mark.parametrize(("g", "n_ctx", "n_layers", "head", "device_mib"), PIPELINE_CASES)
def test_pipeline_parallel_devices_match_llama_cpp_cuda_logs(
    g: Geometry, n_ctx: int, n_layers: int, head: bool, device_mib: float
) -> None:
    """Each device keeps four copies of the activation row and the KQ mask it receives."""
    s = PlanSettings(context=n_ctx)
    device = device_compute_bytes(g, s, list(range(n_layers)), head, copies=PIPELINE_COPIES)
    assert device / MIB == pytest.approx(device_mib, abs=0.02)


def test_pipeline_parallel_host_buffer() -> None:
    """ollama #9068: CUDA_Host compute 26.02 MiB: the input row and four mask copies."""
    s = PlanSettings(context=2048)
    assert host_compute_bytes(QWEN_32B, s, PIPELINE_COPIES) / MIB == pytest.approx(26.02, abs=0.03)
