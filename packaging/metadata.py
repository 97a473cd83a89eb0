"""Generate the freedesktop .desktop file and the AppStream metainfo from identity.py.

Run `.venv/bin/python packaging/metadata.py` after changing rigspark_gui/identity.py;
`--check` exits 1 when a committed file is stale (tests/packaging/test_identity.py and
`make bundle` both check). The outputs are committed so distributions and Flatpak
manifests can use them without running Python.
"""

from __future__ import annotations

import sys
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rigspark_gui import identity as ident  # noqa: E402

PACKAGING = ROOT / "packaging"
DESKTOP_FILE = PACKAGING / f"{ident.APP_ID}.desktop"
METAINFO_FILE = PACKAGING / f"{ident.APP_ID}.metainfo.xml"
GENERATED_NOTE = "Generated from rigspark_gui/identity.py by packaging/metadata.py; do not edit."


def desktop_entry() -> str:
    lines = [
        f"# {GENERATED_NOTE}",
        "[Desktop Entry]",
        "Type=Application",
        "Version=1.0",
        f"Name={ident.APP_NAME}",
        f"GenericName={ident.APP_GENERIC_NAME}",
        f"Comment={ident.APP_SUMMARY}",
        f"Exec={ident.GUI_EXECUTABLE}",
        f"TryExec={ident.GUI_EXECUTABLE}",
        f"Icon={ident.ICON_NAME}",
        "Terminal=false",
        "StartupNotify=true",
        f"Categories={''.join(c + ';' for c in ident.DESKTOP_CATEGORIES)}",
        f"Keywords={''.join(k + ';' for k in ident.DESKTOP_KEYWORDS)}",
    ]
    return "\n".join(lines) + "\n"


def metainfo() -> str:
    paragraphs = "\n".join(f"    <p>{escape(p)}</p>" for p in ident.APP_DESCRIPTION)
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- {GENERATED_NOTE} -->
<component type="desktop-application">
  <id>{ident.APP_ID}</id>
  <metadata_license>{ident.METADATA_LICENSE}</metadata_license>
  <project_license>{ident.APP_LICENSE}</project_license>
  <name>{escape(ident.APP_NAME)}</name>
  <summary>{escape(ident.APP_SUMMARY)}</summary>
  <developer_name>{escape(ident.ORGANIZATION)}</developer_name>
  <description>
{paragraphs}
  </description>
  <launchable type="desktop-id">{DESKTOP_FILE.name}</launchable>
  <provides>
    <binary>{ident.GUI_EXECUTABLE}</binary>
    <binary>{ident.CLI_EXECUTABLE}</binary>
  </provides>
  <content_rating type="oars-1.1"/>
  <releases>
    <release version="{ident.APP_VERSION}" date="{ident.APP_RELEASE_DATE}"/>
  </releases>
</component>
"""


def outputs() -> dict[Path, str]:
    return {DESKTOP_FILE: desktop_entry(), METAINFO_FILE: metainfo()}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in outputs().items():
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        if check:
            stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"metadata: wrote packaging/{path.name}")
    if stale:
        print(
            f"metadata: stale {', '.join(stale)}; run .venv/bin/python packaging/metadata.py",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
