"""The application's one identity, shared by QApplication, packaging and reports.

Everything that names the program reads it from here: `QApplication` (app.py), the
version in pyproject.toml (a dynamic attr), the PyInstaller spec, and the freedesktop
`.desktop` and AppStream metainfo files, which packaging/metadata.py generates and
tests/packaging/test_identity.py checks against this module. Plain constants only:
setuptools reads APP_VERSION without importing the package.
"""

APP_ID = "io.github.rigspark.RigSpark"
APP_NAME = "RigSpark"
APP_VERSION = "0.1.0"
# The date APP_VERSION was cut; AppStream lists it as the release.
APP_RELEASE_DATE = "2026-11-30"
ORGANIZATION = "RigSpark"

# The desktop file's GenericName: what kind of program this is.
APP_GENERIC_NAME = "LLM Hardware Planner"
# One line for menus and software centres: no trailing period, well under 80 characters.
APP_SUMMARY = "See whether a local LLM fits your GPUs, and how fast it runs"
# Paragraphs for the AppStream description; plain text, no links.
APP_DESCRIPTION = (
    "RigSpark answers, before you download anything, whether a large language model "
    "runs on this machine: on one GPU, split over several, partly offloaded to system "
    "memory, or on the CPU alone, at which quantization and KV-cache precision, with "
    "which layers where, and how fast.",
    "It detects the GPUs, CPU and memory, computes memory figures the way llama.cpp "
    "allocates them, compares every KV-cache precision, and lets you move layers between "
    "devices and copy the exact launch command. A command-line tool, rigspark-plan, "
    "gives the same answers to scripts as JSON.",
)
# SPDX identifiers: the program's license, and the one for the metainfo file itself.
APP_LICENSE = "MIT"
METADATA_LICENSE = "CC0-1.0"

# The icon theme name; resources/rigspark.svg is installed under this name.
ICON_NAME = APP_ID
ICON_FILE = "rigspark.svg"
ICON_PNG_FILE = "rigspark.png"

# The executables, as in pyproject's [project.scripts] / [project.gui-scripts].
GUI_EXECUTABLE = "rigspark"
CLI_EXECUTABLE = "rigspark-plan"

# freedesktop menu categories (one main category, so it is listed once) and search keywords.
DESKTOP_CATEGORIES = ("Utility",)
DESKTOP_KEYWORDS = ("LLM", "GPU", "VRAM", "llama.cpp", "GGUF", "quantization", "inference")
