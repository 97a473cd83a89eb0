"""Regenerate the real llama.cpp logs in this folder (not part of the test run).

    .venv/bin/python tests/reconcile/data/make_real_log.py ~/.cache/rigspark/llama-venv/bin/python

Writes the synthetic Llama-shaped model of validation/synth.py ("llama3-gqa"), quantizes
it to Q4_K_M with llama.cpp's own quantizer, and loads it with llama-cpp-python's
`Llama(..., verbose=True)` in a child process whose stderr (where llama.cpp writes its
log, file descriptor 2) becomes the fixture. The model's ModelSpec, read back with
`import_gguf`, is saved beside the logs so the tests need no GGUF file.

Extra buffer types (AMX, CPU_REPACK) are turned off for the main logs: on this machine
(a Xeon with AMX) llama.cpp's AMX buffers crash at decode time (ggml-org/llama.cpp#20824),
the failure the calibration probe already works around the same way. The AMX log only
loads the model, with AMX on, and decodes nothing.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from rigspark_gui.formats.jsonable import jsonable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))

from rigspark_gui.catalog.gguf_import import import_gguf  # noqa: E402
from validation.synth import MODELS, write_gguf  # noqa: E402

# Runs in the llama-cpp-python interpreter: argv = model path, JSON settings.
LOADER = r"""
import json, sys
import llama_cpp
import llama_cpp.llama_cpp as low
from llama_cpp import Llama

job = json.loads(sys.argv[2])
model_defaults = low.llama_model_default_params
context_defaults = low.llama_context_default_params


def model_params():
    p = model_defaults()
    p.use_extra_bufts = job["extra_bufts"]
    return p


def context_params():
    p = context_defaults()
    p.n_seq_max = job["n_seq"]
    return p


# Llama() exposes neither knob; it builds its parameters from these two functions.
low.llama_model_default_params = model_params
low.llama_context_default_params = context_params
llm = Llama(
    model_path=sys.argv[1], n_ctx=job["n_ctx"], n_batch=512, n_ubatch=512, n_gpu_layers=0,
    flash_attn=job["fa"], type_k=job["type"], type_v=job["type"], n_threads=2, verbose=True,
)
if job["decode"]:
    llm("hello", max_tokens=4)
print(llama_cpp.__version__)
"""

GGML_Q8_0, GGML_F16 = 8, 1  # llama.cpp's ggml_type numbers
BASE = {"n_ctx": 4096, "fa": True, "type": GGML_Q8_0, "n_seq": 1, "extra_bufts": False}
JOBS = {
    "llama_cpp_load.log": {**BASE, "decode": True},
    "llama_cpp_load_2seq.log": {
        **BASE,
        "n_ctx": 8192,
        "type": GGML_F16,
        "n_seq": 2,
        "decode": True,
    },
    "llama_cpp_load_amx.log": {**BASE, "extra_bufts": True, "decode": False},
}


def main() -> None:
    import json

    llama_py = sys.argv[1]
    synth = next(m for m in MODELS if m.name == "llama3-gqa")
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "llama3-gqa-F32.gguf", Path(tmp) / "llama3-gqa-Q4_K_M.gguf"
        write_gguf(synth, src)
        probe = ROOT / "validation" / "llama_probe.py"
        subprocess.run([llama_py, str(probe), "quantize", str(src), str(dst), "Q4_K_M"], check=True)
        spec = import_gguf(dst)
        (HERE / "llama3-gqa-Q4_K_M.spec.json").write_text(
            json.dumps(jsonable(spec), indent=1, ensure_ascii=False) + "\n"
        )
        for name, job in JOBS.items():
            run = subprocess.run(
                [llama_py, "-c", LOADER, str(dst), json.dumps(job)],
                capture_output=True,
                text=True,
                check=True,
            )
            version = run.stdout.strip().splitlines()[-1]
            header = (
                f"# Real llama.cpp log: llama-cpp-python {version}, Llama(n_ctx={job['n_ctx']},"
                f" flash_attn={job['fa']}, K/V type {job['type']}, n_seq_max={job['n_seq']},"
                f" extra buffer types {'on' if job['extra_bufts'] else 'off'}, verbose=True);\n"
                "# written by tests/reconcile/data/make_real_log.py\n"
            )
            # the model's temporary path is not worth keeping: name the file only
            log = run.stderr.replace(str(dst), dst.name)
            (HERE / name).write_text(header + log)


if __name__ == "__main__":
    main()
