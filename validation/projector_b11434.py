"""Vision projectors against llama.cpp b11434: llama-server loads a synthetic text model
with a synthetic mmproj (validation/mmproj_synth.py) and logs the projector's weights
("load_hparams: model size"), its compute buffer at the warm-up image
("reserve_compute_meta: CPU compute buffer size") and fit's estimate
("[mtmd] estimated worst-case memory usage of mmproj"). Those figures are compared with
core/memory/projector.py.

    .venv/bin/python validation/projector_b11434.py            # measure, write the json
    .venv/bin/python validation/projector_b11434.py --report   # print the table

The measured rows are kept in validation/projector_b11434.json; tests/validation pins
them. Runs on the CPU backend (the only one here); the CUDA compute buffer is not
measured by this script.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))

from mmproj_synth import MmprojSynth, weight_bytes, write_mmproj  # noqa: E402
from server_log import server_log  # noqa: E402
from synth import Synth, write_gguf  # noqa: E402

from rigspark_gui.catalog.mmproj import read_projector  # noqa: E402

SERVER = Path.home() / ".cache/rigspark/llama-src/build/bin/llama-server"
WORK = ROOT / "validation" / ".work" / "mmproj"
OUT = ROOT / "validation" / "projector_b11434.json"
BUILD = "b11434"
MIB = 1 << 20

# name, vision n_embd, n_ff, n_head, n_layer, image size, patch; text width 512
GRID: tuple[MmprojSynth, ...] = (
    MmprojSynth("s224-e256", 256, 1024, 4, 2, 224, 14, 512),
    MmprojSynth("s448-e256", 256, 1024, 4, 2, 448, 14, 512),
    MmprojSynth("s896-e256", 256, 1024, 4, 2, 896, 14, 512),
    MmprojSynth("s448-e384-h6", 384, 1536, 6, 3, 448, 14, 512),
    MmprojSynth("s896-e384-h6", 384, 1536, 6, 2, 896, 14, 512),
    MmprojSynth("s672-e512-h8-ff2048", 512, 2048, 8, 2, 672, 14, 512),
    MmprojSynth("s448-e256-ff4096", 256, 4096, 4, 2, 448, 14, 512),
    MmprojSynth("s896-e128-h2-f32", 128, 512, 2, 2, 896, 14, 512, matrix_type="f32"),
    MmprojSynth("s336-e640-h10", 640, 2560, 10, 2, 336, 14, 512),
    MmprojSynth("s560-e256-p16", 256, 1024, 4, 2, 512, 16, 512),
    # narrow FFN: the attention phase is the peak
    MmprojSynth("s448-e512-h8-ff256", 512, 256, 8, 2, 448, 14, 512),
    # wide FFN at few patches: the FFN phase is the peak without flash attention too
    MmprojSynth("s224-e256-ff8192", 256, 8192, 4, 2, 224, 14, 512),
    # Gemma 3's own encoder width, heads, FFN, image and patch (two blocks of 27)
    MmprojSynth("gemma3-2blk", 1152, 4304, 16, 2, 896, 14, 2560),
)
TEXT = Synth("llama3-gqa", "llama", 2, 512, 8, 2, 1536, 4096)

_WEIGHTS = re.compile(r"load_hparams: model size:\s+([\d.]+) MiB")
_COMPUTE = re.compile(r"reserve_compute_meta:\s+(\S+) compute buffer size =\s+([\d.]+) MiB")
_WARMUP = re.compile(r"warmup with image size = (\d+) x (\d+)")
_FIT = re.compile(r"estimated worst-case memory usage of mmproj is ([\d.]+) MiB")
_FA = re.compile(r"warmup: flash attention is (enabled|disabled)")


def run_server(text: Path, mmproj: Path, fa: str, port: int) -> str:
    cmd = [
        str(SERVER), "-m", str(text), "--mmproj", str(mmproj), "-c", "512",
        "--port", str(port), "-lv", "4", "-fa", fa, "-t", "2",
    ]  # fmt: skip
    return server_log(cmd, 120)


def parse(log: str) -> dict[str, Any]:
    w = _WEIGHTS.findall(log)
    c = _COMPUTE.findall(log)
    s = _WARMUP.findall(log)
    f = _FIT.findall(log)
    fa = _FA.findall(log)
    return {
        "weights_mib": float(w[-1]) if w else None,
        # the last reserve is the one kept (flash attention auto may reserve twice)
        "compute_buffer": c[-1][0] if c else None,
        "compute_mib": float(c[-1][1]) if c else None,
        "warmup_size": int(s[-1][0]) if s else None,
        "fit_estimate_mib": float(f[-1]) if f else None,
        "flash_attn": fa[-1] == "enabled" if fa else None,
    }


def measure() -> dict[str, Any]:
    WORK.mkdir(parents=True, exist_ok=True)
    text = WORK / "text.gguf"
    write_gguf(TEXT, text)
    rows = []
    port = 18740
    for m in GRID:
        path = WORK / f"{m.name}.gguf"
        write_mmproj(m, path)
        for fa in ("on", "off"):
            port += 1
            got = parse(run_server(text, path, fa, port))
            header = read_projector(path)  # RigSpark's own reader of the same file
            rows.append(
                {
                    "synth": asdict(m),
                    "fa": fa,
                    "weight_bytes": weight_bytes(m),
                    "header_weight_bytes": header.weights_bytes,
                    "header_warmup_size": header.warmup_image_size,
                    **got,
                }
            )
            print(m.name, fa, got, flush=True)
    return {"build": BUILD, "backend": "CPU", "rows": rows}


def main() -> None:
    if "--report" in sys.argv:
        data = json.loads(OUT.read_text())
        for r in data["rows"]:
            print(r["synth"]["name"], r["fa"], r["weights_mib"], r["compute_mib"])
        return
    data = measure()
    OUT.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
