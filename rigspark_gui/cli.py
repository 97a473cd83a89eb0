"""`rigspark-plan`: the planning engine, headless. Same engine, same figures as the window.

Exit codes: 0 the recommended path fits, 1 nothing fits, 2 bad input (one line on
stderr), 3 an internal error (one line on stderr, never a traceback).

The entry point: `main` parses the flags (`cli_args`) and runs the named command
(`cli_commands_plan`, `cli_commands_catalog`, `cli_commands_machine`), which read their
inputs through `cli_inputs`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from rigspark_gui.cli_args import build_parser
from rigspark_gui.cli_base import (
    EXIT_BAD_INPUT,
    EXIT_FITS,
    EXIT_INTERNAL,
    EXIT_NO_FIT,
    PROG,
    UsageError,
)
from rigspark_gui.cli_commands_catalog import cmd_gpus, cmd_models, cmd_schema
from rigspark_gui.cli_commands_fit import cmd_fit
from rigspark_gui.cli_commands_machine import cmd_calibrate, cmd_detect
from rigspark_gui.cli_commands_plan import (
    cmd_export,
    cmd_place,
    cmd_plan,
    cmd_rank,
    cmd_reconcile,
)
from rigspark_gui.cli_inputs import LOCAL_ID_PREFIXES, gpu_database

__all__ = [
    "COMMANDS",
    "EXIT_BAD_INPUT",
    "EXIT_FITS",
    "EXIT_INTERNAL",
    "EXIT_NO_FIT",
    "LOCAL_ID_PREFIXES",
    "PROG",
    "UsageError",
    "build_parser",
    "gpu_database",
    "main",
]


COMMANDS = {
    "reconcile": cmd_reconcile,
    "plan": cmd_plan,
    "place": cmd_place,
    "rank": cmd_rank,
    "models": cmd_models,
    "detect": cmd_detect,
    "gpus": cmd_gpus,
    "calibrate": cmd_calibrate,
    "export": cmd_export,
    "schema": cmd_schema,
    "fit": cmd_fit,
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(argv).parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # the reader (e.g. `| head`) went away: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FITS
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as err:  # one line, never a traceback
        from rigspark_gui.core.errors import RigSparkError

        if isinstance(err, RigSparkError):
            print(f"{PROG}: error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        print(f"{PROG}: internal error: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
