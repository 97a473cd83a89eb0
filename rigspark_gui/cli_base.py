"""What every `rigspark-plan` command shares: the program's name, its exit codes, the
usage error (one line, exit 2), and how a command writes a note or its JSON."""

from __future__ import annotations

import json
import sys
from typing import Any

EXIT_FITS, EXIT_NO_FIT, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
PROG = "rigspark-plan"


class UsageError(Exception):
    """Bad flags or values; printed as one line, exit 2."""


def print_note(text: str) -> None:
    print(f"{PROG}: note: {text}", file=sys.stderr)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")
