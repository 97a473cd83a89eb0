"""Reading llama.cpp load logs and llama-bench output, across format drift and bad input."""

from __future__ import annotations

import time
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.reconcile import (
    MAX_LOG_BYTES,
    BufferKind,
    FlashAttn,
    LlamaLog,
    LogReadError,
    buffer_device,
    parse_llama_log,
    quant_label,
    read_log_text,
)

DATA = Path(__file__).with_name("data")
MIB = 1 << 20


def _log(name: str) -> LlamaLog:
    return parse_llama_log((DATA / name).read_text())


# ------------------------------------------------------------------ the real log


def test_the_real_llama_cpp_log_gives_its_settings_and_every_buffer() -> None:
    log = _log("llama_cpp_load.log")
    assert (log.model_name, log.architecture, log.model_path) == (
        "synthetic",
        "llama",
        "llama3-gqa-Q4_K_M.gguf",
    )
    assert (log.file_type, log.quant, log.n_layer, log.n_ctx_train) == (
        "Q4_K - Medium",
        "Q4_K_M",
        6,
        32768,
    )
    assert (log.n_ctx, log.n_ctx_per_seq, log.n_seq_max, log.n_batch, log.n_ubatch) == (
        4096,
        4096,
        1,
        512,
        512,
    )
    assert log.flash_attn is FlashAttn.ON
    assert (log.type_k, log.type_v, log.kv_unified, log.kv_cells) == (
        "q8_0",
        "q8_0",
        False,
        (4096,),
    )
    assert log.layer_devices == ("CPU",) * 7  # six blocks and the head
    assert {"avx2", "avx512", "amx_int8"} <= set(log.cpu_features)
    got = [(b.name, b.kind, b.device, b.mib) for b in log.buffers]
    assert got == [
        ("CPU_Mapped", BufferKind.MODEL, "cpu", 12.91),
        ("CPU", BufferKind.OUTPUT, "cpu", 0.02),
        ("CPU", BufferKind.KV, "cpu", 6.38),
        ("CPU", BufferKind.COMPUTE, "cpu", 16.04),
    ]
    assert all(b.bytes == round(b.mib * MIB) for b in log.buffers)
    # the destructor's "compute buffer size is 16.0449 MiB" line is not a second buffer
    assert log.loads == 1 and log.skipped_lines > 600


def test_a_log_is_a_frozen_model() -> None:
    log = _log("llama_cpp_load.log")
    with pytest.raises(FrozenInstanceError):
        log.n_ctx = 1  # type: ignore[misc]


def test_sequences_and_streams_are_read_from_the_kv_line() -> None:
    log = _log("llama_cpp_load_2seq.log")
    assert (log.n_ctx, log.n_ctx_per_seq, log.n_seq_max, log.kv_streams) == (8192, 4096, 2, 2)
    assert log.kv_cells == (4096,)  # cells per stream
    assert (log.type_k, log.type_v) == ("f16", "f16")


def test_an_amx_buffer_is_a_repacked_copy_on_the_cpu() -> None:
    log = _log("llama_cpp_load_amx.log")
    amx = [b for b in log.buffers if b.name == "AMX"]
    assert [(b.kind, b.device, b.mib) for b in amx] == [(BufferKind.REPACK, "cpu", 12.01)]


# ------------------------------------------------------------------ format drift

SETTINGS = """\
{ctx}: n_seq_max     = 1
{ctx}: n_ctx         = 8192
{ctx}: n_ubatch      = 512
{ctx}: flash_attn    = 1
"""


@pytest.mark.parametrize(
    ("tensors", "ctx", "kv"),
    [
        ("llm_load_tensors", "llama_new_context_with_model", "llama_kv_cache_init"),
        ("load_tensors", "llama_init_from_model", "llama_kv_cache_unified"),
        ("load_tensors", "llama_context", "llama_kv_cache"),
        ("load_tensors", "llama_context", "llama_kv_cache_iswa"),
    ],
)
def test_prefixes_of_every_llama_cpp_generation(tensors: str, ctx: str, kv: str) -> None:
    text = (
        f"{tensors}: offloaded 33/33 layers to GPU\n"
        f"{tensors}:        CUDA0 model buffer size =  4403.49 MiB\n"
        f"{tensors}:   CPU_Mapped model buffer size =   281.81 MiB\n"
        + SETTINGS.format(ctx=ctx)
        + f"{kv}:      CUDA0 KV buffer size =  1024.00 MiB\n"
        f"{ctx}:  CUDA_Host  output buffer size =     0.49 MiB\n"
        f"{ctx}:      CUDA0 compute buffer size =   560.00 MiB\n"
        f"{ctx}:  CUDA_Host compute buffer size =    24.01 MiB\n"
    )
    log = parse_llama_log(text)
    assert (log.offloaded_layers, log.offload_slots, log.n_ctx, log.flash_attn) == (
        33,
        33,
        8192,
        FlashAttn.ON,
    )
    kinds = [(b.name, b.kind, b.device) for b in log.buffers]
    assert kinds == [
        ("CUDA0", BufferKind.MODEL, "gpu:0"),
        ("CPU_Mapped", BufferKind.MODEL, "cpu"),
        ("CUDA0", BufferKind.KV, "gpu:0"),
        ("CUDA_Host", BufferKind.OUTPUT, "cpu"),
        ("CUDA0", BufferKind.COMPUTE, "gpu:0"),
        ("CUDA_Host", BufferKind.COMPUTE, "cpu"),
    ]


def test_old_buffer_lines_without_a_kind_are_weights() -> None:
    log = parse_llama_log(
        "llm_load_tensors:        CPU buffer size =    70.31 MiB\n"
        "llm_load_tensors:      CUDA0 buffer size =  4695.56 MiB\n"
        "llm_load_tensors:      CUDA1 buffer size =  3912.97 MiB\n"
    )
    assert [(b.device, b.kind) for b in log.buffers] == [
        ("cpu", BufferKind.MODEL),
        ("gpu:0", BufferKind.MODEL),
        ("gpu:1", BufferKind.MODEL),
    ]
    assert log.gpu_indices == (0, 1)


@pytest.mark.parametrize(
    "prefix",
    [
        "",
        "Feb 28 12:44:32 ai-server ollama[854770]: ",
        "6月 26 04:34:13 deipss-All-Series ollama[1073]: ",
        "0.01.714.343 I ",
        "\x1b[34m1.14.608.510\x1b[0m \x1b[32mI \x1b[0m",
        "[2025-06-01 10:00:00] ",
    ],
    ids=["bare", "journald", "journald-cjk", "timestamp", "ansi", "bracketed"],
)
def test_collector_prefixes_are_looked_past(prefix: str) -> None:
    lines = [
        "load_tensors:   CPU_Mapped model buffer size =   281.81 MiB",
        "llama_context: n_ctx         = 4096",
        "llama_kv_cache:      CUDA0 KV buffer size =   512.00 MiB",
        "llama_kv_cache: size =  512.00 MiB (  4096 cells,  32 layers,  1/1 seqs), "
        "K (q8_0):  256.00 MiB, V (q8_0):  256.00 MiB",
    ]
    log = parse_llama_log("\r\n".join(prefix + x for x in lines))
    assert log.n_ctx == 4096 and (log.type_k, log.type_v) == ("q8_0", "q8_0")
    assert [(b.name, b.mib) for b in log.buffers] == [("CPU_Mapped", 281.81), ("CUDA0", 512.0)]


def test_unknown_lines_are_skipped_without_changing_the_result() -> None:
    clean = (DATA / "llama_server_2gpu.log").read_text()
    noisy_lines = []
    for i, line in enumerate(clean.splitlines()):
        noisy_lines.append(line)
        noisy_lines += [
            f"srv  log_server_r: request: GET /health 127.0.0.1 200 ({i})",
            "llama_context: something new = [1, 2, 3]",
            "load_tensors: tensor 'token_embd.weight' (q4_K) cannot be used with preferred "
            "buffer type CUDA_Host, using CPU instead",
            "totally: unrelated: colons: everywhere",
            "| not | a | bench | table |",
        ]
    a, b = parse_llama_log(clean), parse_llama_log("\n".join(noisy_lines))
    assert [(x.name, x.kind, x.mib) for x in a.buffers] == [
        (x.name, x.kind, x.mib) for x in b.buffers
    ]
    assert (a.n_ctx, a.type_k, a.pipeline_copies) == (b.n_ctx, b.type_k, b.pipeline_copies)
    assert b.skipped_lines > a.skipped_lines


def test_the_two_gpu_server_log() -> None:
    log = _log("llama_server_2gpu.log")
    assert log.pipeline_copies == 4
    assert (log.offloaded_layers, log.offload_slots) == (33, 33)
    assert [(d.name, d.description, d.free_mib) for d in log.devices] == [
        ("CUDA0", "NVIDIA GeForce RTX 3090", 23871.0),
        ("CUDA1", "NVIDIA GeForce RTX 3090", 24124.0),
    ]
    assert log.build == "6123 (79c1160b)"
    assert log.model_name == "Meta Llama 3.1 8B Instruct"
    assert log.gpu_indices == (0, 1)


def test_the_ollama_log_keeps_the_load_that_allocated() -> None:
    log = _log("ollama_server.log")
    # a second, vocab-only load follows the real one: its lines do not replace it
    assert log.loads == 1
    assert (log.n_ctx, log.n_ctx_per_seq, log.n_seq_max, log.n_batch) == (81920, 8192, 10, 5120)
    assert log.flash_attn is FlashAttn.OFF
    assert (log.type_k, log.type_v, log.kv_streams, log.kv_cells) == ("f16", "f16", 1, (81920,))
    assert log.quant == "Q4_K_M"
    assert log.devices[0].description == "NVIDIA GeForce RTX 4090"
    assert len(log.buffers) == 6


def test_flash_attention_auto_and_what_llama_cpp_chose() -> None:
    base = "load_tensors:          CPU model buffer size =   100.00 MiB\n"
    auto = parse_llama_log(base + "llama_context: flash_attn    = auto\n")
    assert auto.flash_attn is FlashAttn.AUTO and not auto.flash_attn_was_auto
    chosen = parse_llama_log(
        base
        + "llama_context: flash_attn    = auto\n"
        + "llama_context: Flash Attention was auto, set to enabled\n"
    )
    assert chosen.flash_attn is FlashAttn.ON and chosen.flash_attn_was_auto


def test_sliding_window_caches() -> None:
    text = (
        "load_tensors:          CPU model buffer size =   100.00 MiB\n"
        "llama_kv_cache_iswa: using full-size SWA cache (ref: https://github.com/ggml-org/"
        "llama.cpp/pull/13194#issuecomment-2868343055)\n"
        "llama_kv_cache_iswa: creating non-SWA KV cache, size = 8192 cells\n"
        "llama_kv_cache:        CPU KV buffer size =    64.00 MiB\n"
        "llama_kv_cache: size =   64.00 MiB (  8192 cells,   4 layers,  1/1 seqs), "
        "K (f16):   32.00 MiB, V (f16):   32.00 MiB\n"
        "llama_kv_cache_iswa: creating     SWA KV cache, size = 8192 cells\n"
        "llama_kv_cache:        CPU KV buffer size =   192.00 MiB\n"
    )
    log = parse_llama_log(text)
    assert log.swa_full is True and log.swa_cells == 8192 and log.kv_cells == (8192,)
    assert [b.mib for b in log.buffers_of(BufferKind.KV)] == [64.0, 192.0]


@pytest.mark.parametrize(
    ("name", "device"),
    [
        ("CUDA0", "gpu:0"),
        ("CUDA12", "gpu:12"),
        ("CUDA_Host", "cpu"),
        ("CPU", "cpu"),
        ("CPU_Mapped", "cpu"),
        ("CPU_REPACK", "cpu"),
        ("AMX", "cpu"),
        ("ROCm1", "gpu:1"),
        ("ROCm_Host", "cpu"),
        ("Vulkan2", "gpu:2"),
        ("Metal", "gpu:0"),
        ("MTL0_Mapped", "gpu:0"),
        ("SYCL0", "gpu:0"),
        ("RPC[127.0.0.1:50052]", None),
        ("Mystery9", None),
    ],
)
def test_buffer_names_to_devices(name: str, device: str | None) -> None:
    assert buffer_device(name) == device


def test_buffer_kinds() -> None:
    log = parse_llama_log(
        "load_tensors:   CPU_REPACK model buffer size =  1200.00 MiB\n"
        "load_tensors:  CPU_AARCH64 model buffer size =    10.00 MiB\n"
        "llama_memory_recurrent:      CUDA0 RS buffer size =    10.00 MiB\n"
        "llama_new_context_with_model:  CUDA_Host input buffer size =     9.01 MiB\n"
    )
    assert [b.kind for b in log.buffers] == [
        BufferKind.REPACK,
        BufferKind.REPACK,
        BufferKind.KV,
        BufferKind.OTHER,
    ]


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("Q4_K - Medium", "Q4_K_M"),
        ("Q5_K - Small", "Q5_K_S"),
        ("Q3_K - Large", "Q3_K_L"),
        ("Q2_K - Medium", "Q2_K"),
        ("Q8_0", "Q8_0"),
        ("mostly Q4_0", "Q4_0"),
        ("all F32", "F32"),
        ("BF16", "BF16"),
        ("IQ4_XS - 4.25 bpw", "IQ4_XS"),
        ("MXFP4 MoE", "MXFP4"),
        ("Q4_K - Medium (guessed)", "Q4_K_M"),
        ("qwen2 7B Q4_K - Medium", "Q4_K_M"),
        ("llama 7B mostly Q4_0", "Q4_0"),
        ("something else", None),
    ],
)
def test_file_types_as_quantization_labels(text: str, label: str | None) -> None:
    assert quant_label(text) == label


# ------------------------------------------------------------------ llama-bench


def test_llama_bench_markdown() -> None:
    log = _log("llama_bench.md")
    assert log.bench_format == "markdown" and not log.buffers
    shapes = [(r.test, r.n_prompt, r.n_gen, r.n_depth) for r in log.bench]
    assert shapes == [
        ("pp512", 512, 0, 0),
        ("tg128", 0, 128, 0),
        ("pp512 @ d4096", 512, 0, 4096),
        ("tg128 @ d4096", 0, 128, 4096),
        ("pp512+tg128", 512, 128, 0),
    ]
    first = log.bench[0]
    assert (first.model, first.backend, first.ngl, first.flash_attn) == (
        "llama 8B Q4_K - Medium",
        "CUDA",
        99,
        FlashAttn.ON,
    )
    assert (first.tok_s, first.tok_s_sd, first.quant) == (4796.12, 38.61, "Q4_K_M")
    assert first.size_bytes == round(4.58 * (1 << 30)) and first.params == 8_030_000_000
    assert log.devices[0].description == "NVIDIA GeForce RTX 3090"


@pytest.mark.parametrize(
    ("name", "fmt"), [("llama_bench.json", "json"), ("llama_bench.csv", "csv")]
)
def test_llama_bench_json_and_csv_agree_with_the_markdown(name: str, fmt: str) -> None:
    log = _log(name)
    md = _log("llama_bench.md")
    assert log.bench_format == fmt
    keys = [(r.model, r.test, r.ngl, r.flash_attn, r.tok_s, r.tok_s_sd) for r in log.bench]
    assert keys == [
        (r.model, r.test, r.ngl, r.flash_attn, r.tok_s, r.tok_s_sd) for r in md.bench[:2]
    ]
    row = log.bench[0]
    assert row.model_filename == "models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"
    assert (row.params, row.n_ubatch, row.type_k, row.threads) == (8030261248, 512, "f16", 16)


def test_llama_bench_json_after_log_lines_and_as_jsonl() -> None:
    body = (DATA / "llama_bench.json").read_text()
    mixed = "ggml_cuda_init: found 1 CUDA devices:\n  Device 0: NVIDIA GeForce RTX 3090, " + (
        "compute capability 8.6, VMM: yes\n" + body
    )
    assert len(parse_llama_log(mixed).bench) == 2
    import json

    rows = json.loads(body[body.index("[") :])
    jsonl = "\n".join(json.dumps(r) for r in rows)
    log = parse_llama_log(jsonl)
    assert log.bench_format == "jsonl" and [r.test for r in log.bench] == ["pp512", "tg128"]


def test_old_llama_bench_test_names() -> None:
    text = (
        # the README's example before test names lost their space (pp 512 -> pp512)
        "| model                | size     | params | backend | ngl | test   | t/s             |\n"
        "| -------------------- | -------: | -----: | ------- | --: | ------ | --------------: |\n"
        "| llama 7B mostly Q4_0 | 3.56 GiB | 6.74 B | CUDA    |  -1 | pp 512 | 2368.80 ± 93.24 |\n"
        "| llama 7B mostly Q4_0 | 3.56 GiB | 6.74 B | CUDA    |  -1 | tg 128 |   131.42 ± 0.59 |\n"
    )
    log = parse_llama_log(text)
    assert [(r.test, r.n_prompt, r.n_gen, r.ngl, r.quant) for r in log.bench] == [
        ("pp 512", 512, 0, -1, "Q4_0"),
        ("tg 128", 0, 128, -1, "Q4_0"),
    ]


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ("", "empty"),
        ("   \n\n\t\n", "empty"),
        ("hello world\nthis is not a log\n", "no llama.cpp buffer sizes"),
        ("llama_context: n_ctx = 4096\nllama_context: n_batch = 512\n", "no llama.cpp buffer"),
        (b"GGUF\x03\x00\x00\x00" + bytes(64), "GGUF model file"),
        (bytes(range(256)) * 4, "binary"),
        ("text with a NUL\x00 inside", "binary"),
    ],
    ids=["empty", "blank", "garbage", "settings-only", "gguf", "binary", "nul-text"],
)
def test_bad_input_is_one_plain_sentence(data: str | bytes, words: str) -> None:
    with pytest.raises(LogReadError) as err:
        parse_llama_log(data)
    msg = str(err.value)
    assert words in msg and "\n" not in msg
    assert isinstance(err.value, RigSparkError)


def test_a_huge_log_is_refused_before_it_is_read() -> None:
    huge = "x" * (MAX_LOG_BYTES + 1)
    t0 = time.perf_counter()
    with pytest.raises(LogReadError, match="RigSpark reads logs up to 64 MiB"):
        parse_llama_log(huge)
    assert time.perf_counter() - t0 < 1.0


def test_read_log_text(tmp_path: Path) -> None:
    with pytest.raises(LogReadError, match=r"cannot read missing\.log"):
        read_log_text(tmp_path / "missing.log")
    big = tmp_path / "big.log"
    with big.open("wb") as f:
        f.truncate(MAX_LOG_BYTES + 10)  # sparse: no disk used
    with pytest.raises(LogReadError, match="64 MiB"):
        read_log_text(big)
    ok = tmp_path / "ok.log"
    ok.write_bytes((DATA / "llama_cpp_load.log").read_bytes())
    assert parse_llama_log(read_log_text(ok)).n_ctx == 4096


@pytest.mark.parametrize(
    "line",
    [
        ": " * 8000,
        "a" * 16000 + ": x",
        " buffer size" * 1300,
        "x buffer size = " + "9" * 15000 + " MiB",
        "Device " * 2000 + "compute capability",
        "| model | t/s | test |" + "|" * 15000,
        "llama_kv_cache: size = (" + " " * 15000 + "cells",
        "CPU : " + "A = 1 | " * 1800,
        "~" * 15000 + ": x",
        "\x1b[" * 5000,
    ],
    ids=["colons", "long-word", "buffer-size", "digits", "device", "pipes", "cells", "flags",
         "tildes", "ansi"],
)  # fmt: skip
def test_hostile_lines_are_fast(line: str) -> None:
    text = "load_tensors:          CPU model buffer size =   100.00 MiB\n" + (line + "\n") * 200
    t0 = time.perf_counter()
    log = parse_llama_log(text)
    assert time.perf_counter() - t0 < 2.0
    assert log.buffers[0].mib == 100.0


def test_hostile_json_and_csv_are_fast() -> None:
    nested = "load_tensors:          CPU model buffer size =   1.00 MiB\n" + "\n[" * 1000
    deep = "[" * 100000 + '"avg_ts"'
    wide = "build_commit," + "avg_ts," * 20000 + "\n" + "1," * 20000
    t0 = time.perf_counter()
    parse_llama_log(nested + "avg_ts")
    for text in (deep, wide):
        with pytest.raises(LogReadError):
            parse_llama_log(text)
    assert time.perf_counter() - t0 < 2.0
