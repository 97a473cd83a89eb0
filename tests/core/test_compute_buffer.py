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

from dataclasses import replace

import pytest

from rigspark_gui.core.memory import (
    PIPELINE_COPIES,
    device_compute_bytes,
    host_compute_bytes,
)
from rigspark_gui.core.model.model_spec import Geometry
from rigspark_gui.core.settings import KvCacheType, PlanSettings

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


# llama.cpp b11434's CPU compute buffer (validation/compute_b11434.py): the Llama-shaped,
# tied-embedding and sliding-window (a second cache's indices and mask) rows, fitted and
# held out, to the log's 0.01 MiB. The other architectures (fused QKV, MoE, MLA) are not
# modelled yet.
_B11434_EXACT = {
    "llama3-gqa", "ff4096", "embd1024", "vocab8192", "vocab32000", "kv4", "mha", "hd128",
    "hd32-h16", "qwen2-tied", "wide-held", "gemma2-swa",
}  # fmt: skip


def test_cpu_buffer_matches_llama_cpp_b11434_on_llama_shapes() -> None:
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    from validation.compute_b11434 import OUT, evaluate

    rows = [r for r in evaluate(json.loads(OUT.read_text())) if r["model"] in _B11434_EXACT]
    assert len(rows) >= 500 and any(r["held_out"] for r in rows)
    worst = max(rows, key=lambda r: abs(r["error_mib"]))
    assert abs(worst["error_mib"]) <= 0.0101, worst


# RPC devices (ggml-rpc-server on a CPU) in llama.cpp b11434's fit dry runs, ctx 16384, flash
# attention, n_ubatch 512. Two decimals: llama-fit-params -fitp with GGML_SCHED_DEBUG (the
# sched_reserve lines) on validation/.work/fit/fit-llama3-8b-Q4_0.gguf, local RPC servers;
# whole MiB: the memory breakdown tables in validation/fit_cases.json's traces.
LLAMA3_8B = _g("llama", 32, 4096, 32, 8, 128, 128256, 14336)
LLAMA3_3B = _g("llama", 28, 3072, 24, 8, 128, 128256, 8192)
GEMMA2_9B = Geometry(
    architecture="gemma2", n_layer=42, n_embd=3584, n_head=16, n_head_kv=8, head_dim_k=256,
    head_dim_v=256, n_vocab=256000, n_ff=14336, tied_embeddings=True, sliding_window=4096,
    swa_pattern=2, context_length=8192,
)  # fmt: skip

RPC_CASES = [
    # geometry, n_ctx, layers [lo, hi), holds the head, pipeline copies, MiB, digits
    # -ngl 33 -ts 24,9 (pipeline parallelism: every layer and the head on RPC devices)
    (LLAMA3_8B, 16384, (0, 24), False, 4, 276.05, 2),
    (LLAMA3_8B, 16384, (24, 32), True, 4, 386.55, 2),
    (LLAMA3_8B, 16384, (0, 32), True, 4, 426.56, 2),  # -ts 0,1: the idle device counts
    (LLAMA3_8B, 16384, (11, 22), False, 4, 236.04, 2),  # -ts 11,11,11, the middle one
    # -ngl 21 -ts 12,9: layers 0-11 on the CPU, no pipeline copies
    (LLAMA3_8B, 16384, (12, 24), False, 1, 116.01, 2),
    (LLAMA3_8B, 16384, (24, 32), True, 1, 258.50, 2),
    (LLAMA3_8B, 16384, (0, 32), True, 1, 298.52, 2),  # a single RPC device
    # fit_cases.json traces (held out: the formula was read off the llama3-8b runs)
    (LLAMA3_3B, 16384, (0, 18), False, 4, 208, 0),  # rpc2-split, -ts 18,11
    (LLAMA3_3B, 16384, (18, 28), True, 4, 368, 0),
    (LLAMA3_3B, 16384, (13, 23), False, 1, 76, 0),  # rpc2-partial, -ngl 16 -ts 10,6
    (LLAMA3_3B, 74496, (0, 15), False, 4, 435, 0),  # rpc2-auto-ctx
    (GEMMA2_9B, 8192, (0, 27), False, 4, 247, 0),  # rpc2-split, -ts 27,16
    (GEMMA2_9B, 8192, (27, 42), True, 4, 613, 0),
    (GEMMA2_9B, 8192, (28, 37), False, 4, 212, 0),  # rpc3-partial, -ts 28,9,6
    (GEMMA2_9B, 8192, (18, 34), False, 1, 110, 0),  # rpc2-partial, -ngl 25 -ts 16,9
]


@pytest.mark.parametrize(("g", "n_ctx", "span", "head", "copies", "mib", "digits"), RPC_CASES)
def test_rpc_device_matches_llama_cpp_b11434(
    g: Geometry, n_ctx: int, span: tuple[int, int], head: bool, copies: int, mib: float,
    digits: int,
) -> None:  # fmt: skip
    s = PlanSettings(context=n_ctx, flash_attn=True)
    got = device_compute_bytes(g, s, list(range(*span)), head, copies=copies, rpc_cpu=True)
    if digits:
        assert got / MIB == pytest.approx(mib, abs=0.006)
    else:  # the breakdown table truncates to whole MiB
        assert got // MIB == mib


def test_rpc_device_rotated_quantized_cache() -> None:
    """-ctk q8_0 -ctv q8_0 -ts 11,11,11: 268.37 and 228.35 MiB (Hadamard inputs, a row
    fewer under the FFN); -np 2, -ts 23,10: the first device 236.37 MiB."""
    s = PlanSettings(context=16384, flash_attn=True, kv_k=KvCacheType.Q8_0, kv_v=KvCacheType.Q8_0)
    first = device_compute_bytes(LLAMA3_8B, s, list(range(11)), False, copies=4, rpc_cpu=True)
    mid = device_compute_bytes(LLAMA3_8B, s, list(range(11, 22)), False, copies=4, rpc_cpu=True)
    assert (first / MIB, mid / MIB) == pytest.approx((268.37, 228.35), abs=0.006)
    s2 = replace(s, parallel=2)
    np2 = device_compute_bytes(LLAMA3_8B, s2, list(range(23)), False, copies=4, rpc_cpu=True)
    assert np2 / MIB == pytest.approx(236.37, abs=0.006)


def test_rpc_device_matches_b11434_single_device_rows() -> None:
    """validation/compute_b11434.json's RPC rows (every layer and the head on one RPC
    device, synthetic models, flash attention on and off), to the log's 0.01 MiB."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    from validation.compute_b11434 import OUT, evaluate_rpc

    rows = evaluate_rpc(json.loads(OUT.read_text()))
    assert len(rows) >= 70
    worst = max(rows, key=lambda r: abs(r["rpc_error_mib"]))
    assert abs(worst["rpc_error_mib"]) <= 0.0051, worst
