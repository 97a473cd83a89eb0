"""A whole window session with sockets blocked: it works, and nothing tries the network."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt

from fuzz.seeds import decoder_gguf
from rigspark_gui.core.rig import GIB, Cpu, Gpu, Rig, Vendor
from rigspark_gui.ui import dialogs

pytestmark = pytest.mark.gui


def test_a_session_never_touches_the_network(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[str] = []

    def refuse(name: str):  # type: ignore[no-untyped-def]
        def blocked(*args: object, **kwargs: object) -> None:
            attempts.append(f"{name}{args[:3]!r}")
            raise OSError(f"network access attempted: {name}")

        return blocked

    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("connect_ex"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    dialogs.shown.clear()

    from rigspark_gui.ui.main_window import MainWindow

    rig = Rig(
        name="2x3090",
        gpus=tuple(
            Gpu(
                name="NVIDIA GeForce RTX 3090",
                vendor=Vendor.NVIDIA,
                index=i,
                memory_total_bytes=24 * GIB,
                bandwidth_gbps=936.2,
            )
            for i in range(2)
        ),
        ram_total_bytes=64 * GIB,
        cpu=Cpu(cores=16, memory_bandwidth_gbps=51.2),
    )
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    window = MainWindow(rig=rig, detect_on_start=False, settings=settings)
    qtbot.addWidget(window)
    window.show()

    # Pick a model the way a user does: type, choose from the completer.
    picker = window.controls.model_picker
    picker.lineEdit().clear()
    qtbot.keyClicks(picker.lineEdit(), "qwen2.5 7b instruct")
    popup = picker.completer().popup()
    qtbot.waitUntil(popup.isVisible)
    popup.setCurrentIndex(picker.completer().completionModel().index(0, 0))
    qtbot.keyClick(popup, Qt.Key.Key_Return)
    assert window.session.spec is not None and "qwen2.5-7b" in window.session.spec.id

    # Change the context.
    qtbot.mouseClick(window.controls.preset_buttons["32K"], Qt.MouseButton.LeftButton)
    assert window.session.settings.context == 32768

    # Import a model from a local file (off the GUI thread, like every import).
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(decoder_gguf("llama", extra={"general.name": "Tiny offline"}))
    window.import_model(gguf)
    qtbot.waitUntil(lambda: window.session.spec.name == "Tiny offline", timeout=10_000)

    # Open every tab and let its background work finish.
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        qtbot.wait(20)
    window.tabs.setCurrentWidget(window.kv_tab)
    qtbot.waitUntil(lambda: window.kv_tab.table.rowCount() > 0, timeout=10_000)
    window.tabs.setCurrentWidget(window.catalog_tab)
    qtbot.waitUntil(lambda: window.catalog_tab.model.rowCount() > 100, timeout=20_000)
    window.tabs.setCurrentWidget(window.layers_tab)
    assert window.layers_tab.document.placement is not None

    window.close()
    assert attempts == []
    assert dialogs.shown == []
    assert "PySide6.QtNetwork" not in sys.modules  # no Qt-side network stack either
