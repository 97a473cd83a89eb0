"""The one identity reaches every file that names the app, and those files validate."""

from __future__ import annotations

import configparser
import importlib.util
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

from rigspark_gui import identity as ident
from rigspark_gui.resources import data_file, resource_file

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"
DESKTOP = PACKAGING / f"{ident.APP_ID}.desktop"
METAINFO = PACKAGING / f"{ident.APP_ID}.metainfo.xml"


def _metadata_module() -> ModuleType:
    # packaging/ is not a package (a `packaging` package would shadow the PyPI one).
    spec = importlib.util.spec_from_file_location("rigspark_metadata", PACKAGING / "metadata.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _desktop_entry() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(DESKTOP, encoding="utf-8")
    return parser["Desktop Entry"]


def test_pyproject_takes_its_version_from_identity() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" in project["project"]["dynamic"]
    assert "version" not in project["project"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "rigspark_gui.identity.APP_VERSION"


def test_installed_metadata_carries_the_identity_version() -> None:
    from importlib.metadata import version

    assert version("rigspark") == ident.APP_VERSION


def test_executable_names_match_pyproject_scripts() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["gui-scripts"][ident.GUI_EXECUTABLE] == "rigspark_gui.app:main"
    assert project["scripts"][ident.CLI_EXECUTABLE] == "rigspark_gui.cli:main"


def test_generated_files_are_up_to_date() -> None:
    metadata = _metadata_module()
    for path, text in metadata.outputs().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.name} is stale: run .venv/bin/python packaging/metadata.py"
        )


def test_desktop_file_matches_identity() -> None:
    entry = _desktop_entry()
    assert entry["Type"] == "Application"
    assert entry["Name"] == ident.APP_NAME
    assert entry["Exec"] == ident.GUI_EXECUTABLE
    assert entry["Icon"] == ident.ICON_NAME
    assert entry["Comment"] == ident.APP_SUMMARY
    assert entry["Categories"].rstrip(";").split(";") == list(ident.DESKTOP_CATEGORIES)


def test_metainfo_matches_identity() -> None:
    root = ET.parse(METAINFO).getroot()
    assert root.tag == "component"
    assert root.get("type") == "desktop-application"
    assert root.findtext("id") == ident.APP_ID
    assert root.findtext("name") == ident.APP_NAME
    assert root.findtext("summary") == ident.APP_SUMMARY
    assert root.findtext("project_license") == ident.APP_LICENSE
    paragraphs = [p.text for p in root.findall("description/p")]
    assert paragraphs == list(ident.APP_DESCRIPTION)
    launchable = root.find("launchable")
    assert launchable is not None
    assert launchable.get("type") == "desktop-id"
    assert launchable.text == DESKTOP.name
    assert root.find("content_rating") is not None
    release = root.find("releases/release")
    assert release is not None
    assert release.get("version") == ident.APP_VERSION
    binaries = {b.text for b in root.findall("provides/binary")}
    assert binaries == {ident.GUI_EXECUTABLE, ident.CLI_EXECUTABLE}


def test_summary_suits_menus_and_software_centres() -> None:
    assert 10 <= len(ident.APP_SUMMARY) < 80
    assert not ident.APP_SUMMARY.endswith(".")
    assert all("http" not in p for p in ident.APP_DESCRIPTION)


def test_spec_takes_names_from_identity() -> None:
    spec = (PACKAGING / "rigspark.spec").read_text(encoding="utf-8")
    assert "from rigspark_gui import identity" in spec
    for name in ("ident.GUI_EXECUTABLE", "ident.CLI_EXECUTABLE", "ident.APP_NAME"):
        assert f"name={name}" in spec
    for folder in ("data", "resources"):
        assert f'(str(ROOT / "{folder}"), "{folder}")' in spec


def test_icon_resources_exist() -> None:
    svg = resource_file(ident.ICON_FILE)
    root = ET.parse(svg).getroot()
    assert root.get("viewBox") == "0 0 256 256"
    png = resource_file(ident.ICON_PNG_FILE).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (256, 256)


def test_resources_sit_beside_data() -> None:
    assert resource_file("x").parent.parent == data_file("x").parent.parent


def test_frozen_bundle_resolves_under_meipass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert resource_file(ident.ICON_FILE) == tmp_path / "resources" / ident.ICON_FILE
    assert data_file("models.json") == tmp_path / "data" / "models.json"


def _validate(tool: str, *args: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed (apt-get install desktop-file-utils appstream)")
    done = subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_desktop_file_validates() -> None:
    _validate("desktop-file-validate", str(DESKTOP))


def test_metainfo_validates() -> None:
    _validate("appstreamcli", "validate", "--no-net", str(METAINFO))
