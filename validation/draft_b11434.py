"""Draft models (speculative decoding) against llama.cpp b11434: llama-server loads a
synthetic target with a synthetic draft (`-md FILE --spec-type draft-simple`) on the CPU
backend and logs the draft context's buffers after the target's (model, KV, output,
compute). Those are compared with core/plan/draft.py's tally of the same files.

    .venv/bin/python validation/draft_b11434.py            # measure, write the json
    .venv/bin/python validation/draft_b11434.py --report   # print the recorded rows

The rows are kept in validation/draft_b11434.json; tests/validation pins them.
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

from server_log import server_log  # noqa: E402
from synth import Synth, write_gguf  # noqa: E402

SERVER = Path.home() / ".cache/rigspark/llama-src/build/bin/llama-server"
WORK = ROOT / "validation" / ".work" / "draft"
OUT = ROOT / "validation" / "draft_b11434.json"
MIB = 1 << 20

TARGET = Synth("target", "llama", 4, 512, 8, 2, 1536, 4096)
DRAFTS: tuple[Synth, ...] = (
    Synth("draft-llama", "llama", 2, 256, 4, 2, 768, 4096),
    # a vocabulary 64 tokens smaller: llama.cpp accepts up to 128 apart
    Synth("draft-qwen2-tied", "qwen2", 3, 256, 4, 2, 768, 4032, tied=True),
)
# (context, flash attention, -np: -1 = llama-server's auto 4 unified slots)
SETTINGS = ((1024, "on", -1), (1024, "off", -1), (4096, "on", 1), (4096, "off", 1))

_LINE = re.compile(
    r"(?P<fn>\w+):\s+(?P<name>\S+)\s+(?P<kind>model|KV|output|compute) buffer size =\s+"
    r"(?P<mib>[\d.]+) MiB"
)


def run_server(draft: Path, ctx: int, fa: str, np_: int, port: int) -> str:
    cmd = [
        str(SERVER), "-m", str(WORK / "target.gguf"), "-md", str(draft),
        "--spec-type", "draft-simple", "-c", str(ctx), "-fa", fa, "--port", str(port),
        "-t", "2", "-lv", "4",
    ]  # fmt: skip
    if np_ > 0:
        cmd += ["-np", str(np_)]
    return server_log(cmd, 120)


def draft_buffers(log: str) -> dict[str, float]:
    """The buffer lines logged after 'loading draft model' (the draft's context)."""
    tail = log.split("loading draft model", 1)[-1]
    out: dict[str, float] = {}
    for m in _LINE.finditer(tail):
        out[m["kind"]] = out.get(m["kind"], 0.0) + float(m["mib"])
    return out


def measure() -> dict[str, Any]:
    WORK.mkdir(parents=True, exist_ok=True)
    write_gguf(TARGET, WORK / "target.gguf")
    rows = []
    port = 18960
    for d in DRAFTS:
        path = WORK / f"{d.name}.gguf"
        write_gguf(d, path)
        for ctx, fa, np_ in SETTINGS:
            port += 1
            got = draft_buffers(run_server(path, ctx, fa, np_, port))
            row = {"draft": asdict(d), "context": ctx, "fa": fa, "np": np_, "mib": got}
            rows.append(row)
            print(d.name, ctx, fa, np_, got, flush=True)
    return {"build": "b11434", "backend": "CPU", "target": asdict(TARGET), "rows": rows}


def main() -> None:
    if "--report" in sys.argv:
        for r in json.loads(OUT.read_text())["rows"]:
            print(r["draft"]["name"], r["context"], r["fa"], r["np"], r["mib"])
        return
    OUT.write_text(json.dumps(measure(), indent=1) + "\n")


if __name__ == "__main__":
    main()
