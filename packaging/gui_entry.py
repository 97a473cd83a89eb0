"""PyInstaller entry for the `rigspark` window (pyproject's gui-script, frozen)."""

import sys

from rigspark_gui.app import main

sys.exit(main())
