"""Models from files and the web, for the main window's File menu and its start-up.

`ModelImports` reads a .gguf file or a Hugging Face config.json (`import_model_file`),
a remote GGUF's header (a Hugging Face repository or a URL), and the GGUF files found
on this computer (Ollama, LM Studio, the Hugging Face and llama.cpp caches, the user's
folders), each on a worker, and adds them to the window's session. The files the user
imported, and their models folders, are remembered in the window's settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QFileDialog

from rigspark_gui.core.model import ModelSpec
from rigspark_gui.ui import dialogs
from rigspark_gui.ui.background import run_in_background

if TYPE_CHECKING:
    from rigspark_gui.ui.main_window import MainWindow


def import_model_file(path: Path) -> ModelSpec:
    """The model in a .gguf file (read from its header) or a Hugging Face config.json."""
    if path.suffix.lower() == ".gguf":
        from rigspark_gui.catalog.gguf_import import import_gguf

        return import_gguf(path)
    from rigspark_gui.catalog.hf_import import import_hf_config

    result = import_hf_config(path)
    return getattr(result, "spec", result)  # type: ignore[no-any-return]


class ModelImports:
    """The window's ways to add models to its session: import, open remote, scan."""

    def __init__(self, window: MainWindow) -> None:
        self.window = window

    def on_import(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.window,
            "Import model",
            str(Path.home()),
            "Models (*.gguf config.json *.json);;GGUF (*.gguf);;HF config (config.json)",
        )
        if path:
            self.import_model(Path(path))

    def on_open_remote(self) -> None:
        from PySide6.QtWidgets import QInputDialog

        text, ok = QInputDialog.getText(
            self.window,
            "Open from Hugging Face or a URL",
            "A Hugging Face repository with its quantization (owner/name:Q4_K_M),\n"
            "or the URL of a .gguf file. Only the file's header is read.",
        )
        if ok and text.strip():
            self.open_remote(text.strip())

    def open_remote(self, text: str) -> None:
        """Read a remote model's header on a worker, with a busy dialog that can cancel
        (the answer is then dropped); the header is cached for later plans."""
        from PySide6.QtWidgets import QProgressDialog

        from rigspark_gui.catalog.remote import model_from_hf, model_from_url
        from rigspark_gui.user_dirs import cache_dir

        is_url = text.startswith(("http://", "https://")) and not text.startswith(
            ("https://huggingface.co/", "https://www.huggingface.co/")
        )
        ref = text if is_url else "hf:" + text.removeprefix("hf:").split("huggingface.co/")[-1]
        busy = QProgressDialog(f"Reading the header of {text}…", "Cancel", 0, 0, self.window)
        busy.setWindowTitle("Open from the web")
        busy.setMinimumDuration(300)
        self.window.remote_progress = busy
        cache = cache_dir()

        def fetch() -> ModelSpec:
            return model_from_url(ref, cache) if is_url else model_from_hf(ref, cache)

        def done(spec: ModelSpec) -> None:
            cancelled = busy.wasCanceled()
            busy.reset()
            if cancelled:
                return
            self.window.session.add_model(spec)
            self.window.session.set_model(spec.id)
            self.window.statusBar().showMessage(f"Planned {spec.name} from its header", 8000)

        def failed(err: Exception, _details: str) -> None:
            cancelled = busy.wasCanceled()
            busy.reset()
            if not cancelled:
                dialogs.show_error(self.window, "Open from the web", str(err))

        run_in_background(self.window, fetch, done, failed)

    def import_model(self, path: Path, *, remember: bool = True, select: bool = True) -> None:
        self.window.statusBar().showMessage(f"Reading {path.name}…")

        def done(spec: ModelSpec) -> None:
            self.window.session.add_model(spec)
            if remember:
                self._remember_import(path)
            if select:
                self.window.session.set_model(spec.id)
            self.window.statusBar().showMessage(f"Imported {spec.name}", 6000)

        def failed(err: Exception, _details: str) -> None:
            self.window.statusBar().clearMessage()
            if select:
                dialogs.show_error(self.window, "Import model", str(err))
            else:
                self.window.statusBar().showMessage(f"Could not reopen {path.name}: {err}", 10000)

        run_in_background(self.window, lambda: import_model_file(path), done, failed)

    def _remember_import(self, path: Path) -> None:
        paths = [p for p in self._imported_paths() if p != str(path)]
        self.window.qsettings.setValue("models/imported", [str(path), *paths][:50])

    def _imported_paths(self) -> list[str]:
        value = self.window.qsettings.value("models/imported", [])
        if isinstance(value, str):
            return [value]
        return [str(v) for v in value or []]

    def restore_imported(self) -> None:
        for p in self._imported_paths():
            if Path(p).exists():
                self.import_model(Path(p), remember=False, select=False)

    def model_folders(self) -> list[Path]:
        raw = self.window.qsettings.value("local/folders", []) or []
        folders = [raw] if isinstance(raw, str) else list(raw)
        return [Path(str(f)) for f in folders if str(f)]

    def on_add_models_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(
            self.window, "Add a models folder", str(Path.home())
        )
        if not folder:
            return
        folders = [str(f) for f in self.model_folders()]
        if folder not in folders:
            self.window.qsettings.setValue("local/folders", [*folders, folder])
        self.scan_local_models()

    def scan_local_models(self) -> None:
        """Ollama's store, LM Studio, the Hugging Face and llama.cpp caches and the user's
        folders, read header by header on a worker; the picker lists them first."""
        from rigspark_gui.catalog.local_models import find_local_models, read_all

        folders = self.model_folders()
        self.window.statusBar().showMessage("Looking for models on this computer…", 10000)

        def scan() -> tuple[list[ModelSpec], list[str]]:
            return read_all(find_local_models(folders=folders))

        def done(result: tuple[list[ModelSpec], list[str]]) -> None:
            specs, skipped = result
            self.window.local_skipped = skipped
            if specs:
                self.window.session.add_models(specs)
            extra = f" ({len(skipped)} unreadable, skipped)" if skipped else ""
            self.window.statusBar().showMessage(
                f"{len(specs)} model{'s' if len(specs) != 1 else ''} on this computer{extra}",
                10000,
            )

        def failed(err: Exception, _details: str) -> None:
            self.window.statusBar().showMessage(f"Looking for models failed: {err}", 15000)

        run_in_background(self.window, scan, done, failed)
