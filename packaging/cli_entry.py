"""PyInstaller entry for `rigspark-plan` (pyproject's console script, frozen)."""

import sys

from rigspark_gui.cli import main

sys.exit(main())
