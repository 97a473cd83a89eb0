"""Start llama-server, keep its log until it listens (or reports an error, or the time
runs out), stop it: the buffer lines of a load, for the b11434 suites that need the
server itself (projector, draft model, MTP drafting)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence


def server_log(cmd: Sequence[str], timeout: float) -> str:
    p = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert p.stdout is not None
    for line in p.stdout:
        lines.append(line)
        if "listening on" in line or "error" in line.lower() or time.monotonic() > deadline:
            break
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
    return "".join(lines)
