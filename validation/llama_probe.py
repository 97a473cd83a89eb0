"""Runs inside the llama-cpp-python environment: quantize a GGUF, or load one with given
context settings, print llama.cpp's buffer sizes and time prompt and generation.

    python llama_probe.py quantize SRC DST FTYPE
    python llama_probe.py measure '{"path": ..., "n_ctx": ..., ...}'

`measure` prints one JSON object on stdout. llama.cpp writes its log straight to file
descriptor 2, so the caller reads it from the child's stderr (parse_log in
run_validation.py); with the LD_PRELOAD shim the log also carries exact byte counts.
"""

from __future__ import annotations

import json
import os
import sys
import time

import llama_cpp as L

# quantizing and decoding are the app's own calibration probe's (stdlib + llama_cpp only,
# so this interpreter can load it by its path)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "rigspark_gui", "calibrate"))
from probe_script import decode, quantize

GGML_TYPES = {"f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "f32": 0}


def measure(job: dict[str, object]) -> dict[str, object]:
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = L.llama_model_load_from_file(str(job["path"]).encode(), mp)
    if not model:
        raise SystemExit("model load failed")
    cp = L.llama_context_default_params()
    cp.n_ctx = int(job["n_ctx"])  # type: ignore[arg-type]
    cp.n_batch = 512
    cp.n_ubatch = 512
    cp.n_seq_max = int(job["n_seq"])  # type: ignore[arg-type]
    cp.type_k = GGML_TYPES[str(job["type_k"])]
    cp.type_v = GGML_TYPES[str(job["type_v"])]
    cp.flash_attn_type = 1 if job["flash_attn"] else 0
    cp.swa_full = bool(job.get("swa_full", False))
    cp.kv_unified = bool(job.get("kv_unified", False))
    threads = os.cpu_count() or 1
    cp.n_threads = threads
    cp.n_threads_batch = threads
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        raise SystemExit("context creation failed")
    out: dict[str, object] = {"n_threads": threads}
    if job.get("bench"):
        n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
        prompt = [300 + (i * 37) % (n_vocab - 300) for i in range(int(job.get("n_prompt", 64)))]  # type: ignore[call-overload]
        decode(ctx, prompt[:8])  # warm-up: page in the mapped weights, spin up threads
        L.llama_memory_clear(L.llama_get_memory(ctx), True)
        t0 = time.perf_counter()
        decode(ctx, prompt)
        t1 = time.perf_counter()
        n_gen = int(job.get("n_gen", 32))  # type: ignore[call-overload]
        for i in range(n_gen):
            decode(ctx, [400 + i])
        t2 = time.perf_counter()
        out["prompt_tok_s"] = len(prompt) / (t1 - t0)
        out["gen_tok_s"] = n_gen / (t2 - t1)
    L.llama_free(ctx)
    L.llama_model_free(model)
    return out


def main() -> None:
    if sys.argv[1] == "quantize":
        quantize(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "measure":
        print(json.dumps(measure(json.loads(sys.argv[2]))))
    elif sys.argv[1] == "version":
        print(json.dumps({"llama_cpp_python": L.__version__}))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
