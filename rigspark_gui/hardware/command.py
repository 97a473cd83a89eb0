"""Running a short system command with a hard time limit, for probes that shell out."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence

# A probe takes the runner as a parameter so tests can feed it canned output.
CommandRunner = Callable[[Sequence[str], float], str]


def run_command(args: Sequence[str], timeout_s: float) -> str:
    """Run `args` and return its stdout; raise OSError/subprocess errors on failure.

    `check=True` because a failing `sysctl` prints nothing useful on stdout, and a
    timeout so a wedged system tool cannot stall detection.
    """
    completed = subprocess.run(
        list(args),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=True,
    )
    return completed.stdout
