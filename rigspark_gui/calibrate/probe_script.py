"""Runs inside a Python that has llama-cpp-python (never installed by RigSpark): quantize
a GGUF, or time prompt processing and generation on it. Only the standard library and
llama_cpp are imported here, so any such interpreter can run this file by its path.

    python probe_script.py quantize SRC DST FTYPE
    python probe_script.py bench '{"path": ..., "n_gpu_layers": 0, "n_prompt": 64, "n_gen": 32}'
    python probe_script.py version

`bench` prints one JSON object on stdout.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time

import llama_cpp as L

# llama.cpp's llama_ftype numbers (include/llama.h)
FTYPES = {"F16": 1, "Q4_0": 2, "Q8_0": 7, "Q4_K_M": 15, "Q6_K": 18}


def quantize(src: str, dst: str, ftype: str) -> None:
    params = L.llama_model_quantize_default_params()
    params.ftype = FTYPES[ftype]
    params.nthread = os.cpu_count() or 1
    if L.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params)) != 0:
        raise SystemExit("quantize failed")


def decode(ctx: object, tokens: list[int]) -> None:
    arr = (L.llama_token * len(tokens))(*tokens)
    if L.llama_decode(ctx, L.llama_batch_get_one(arr, len(tokens))) != 0:
        raise SystemExit("llama_decode failed")


def bench(job: dict[str, object]) -> dict[str, object]:
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = int(job.get("n_gpu_layers", 0))  # type: ignore[call-overload]
    if mp.n_gpu_layers > 0 and not L.llama_supports_gpu_offload():
        return {"no_gpu": True}  # a CPU-only build would time the CPU as the GPU
    if job.get("no_extra_bufts") and hasattr(mp, "use_extra_bufts"):
        mp.use_extra_bufts = False  # llama.cpp --no-repack: no AMX / CPU_REPACK buffers
    model = L.llama_model_load_from_file(str(job["path"]).encode(), mp)
    if not model:
        raise SystemExit("model load failed")
    cp = L.llama_context_default_params()
    cp.n_ctx = 1024
    cp.n_batch = 512
    cp.n_ubatch = 512
    threads = int(job.get("threads") or 0) or (os.cpu_count() or 1)  # type: ignore[call-overload]
    cp.n_threads = threads
    cp.n_threads_batch = threads
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        raise SystemExit("context creation failed")
    n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    n_prompt = int(job.get("n_prompt", 64))  # type: ignore[call-overload]
    n_gen = int(job.get("n_gen", 32))  # type: ignore[call-overload]
    prompt = [300 + (i * 37) % (n_vocab - 300) for i in range(n_prompt)]
    decode(ctx, prompt[:8])  # warm-up: page the weights in, start the threads
    best_pp = best_tg = 0.0
    for _ in range(int(job.get("repeats", 2))):  # type: ignore[call-overload]
        L.llama_memory_clear(L.llama_get_memory(ctx), True)
        t0 = time.perf_counter()
        decode(ctx, prompt)
        t1 = time.perf_counter()
        for i in range(n_gen):
            decode(ctx, [400 + i])
        t2 = time.perf_counter()
        best_pp = max(best_pp, n_prompt / (t1 - t0))
        best_tg = max(best_tg, n_gen / (t2 - t1))
    L.llama_free(ctx)
    L.llama_model_free(model)
    return {"pp_tok_s": best_pp, "tg_tok_s": best_tg, "threads": threads}


def main() -> None:
    if sys.argv[1] == "quantize":
        quantize(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "bench":
        print(json.dumps(bench(json.loads(sys.argv[2]))))
    elif sys.argv[1] == "version":
        print(json.dumps({"llama_cpp_python": L.__version__}))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
