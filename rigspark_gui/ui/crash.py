"""One dialog for every exception nothing else caught, on any thread; never a silent exit.

`install()` replaces `sys.excepthook` (PySide6 routes an exception escaping a slot, an
event handler or a `QRunnable.run` on a pool thread through it) and `threading.excepthook`
(Python threads). The traceback still goes to stderr; the dialog (ui/dialogs, headless
in tests) shows a short message with the traceback as details. Reports from other threads
are queued to the GUI thread through a relay QObject, since widgets live there only.
"""

from __future__ import annotations

import sys
import threading
import traceback
from types import TracebackType

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import QApplication

from rigspark_gui.identity import APP_NAME
from rigspark_gui.ui import dialogs

TITLE = f"{APP_NAME}: unexpected error"
_MAX_MESSAGE = 300


class _Relay(QObject):
    """Carries a report from any thread to a dialog on the GUI thread."""

    raised = Signal(str, str, str)  # signature, message, details

    def __init__(self) -> None:
        super().__init__()
        self.raised.connect(self._on_raised, Qt.ConnectionType.QueuedConnection)

    @Slot(str, str, str)
    def _on_raised(self, signature: str, message: str, details: str) -> None:
        _show(signature, message, details)


_relay: _Relay | None = None
_previous: tuple[object, object] | None = None
_seen: set[str] = set()  # one dialog per distinct failure: a repaint that raises must not loop
_showing = False


def _signature(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
    return f"{type(exc).__name__}@{where}"


def _message(exc: BaseException, thread_name: str | None) -> str:
    text = " ".join(str(exc).split()) or "no detail"
    if len(text) > _MAX_MESSAGE:
        text = text[: _MAX_MESSAGE - 3] + "..."
    where = f" in the background ({thread_name})" if thread_name else ""
    return (
        f"{APP_NAME} hit an unexpected error{where}: {type(exc).__name__}: {text}\n\n"
        "Your rig and settings are unchanged. The details below help a bug report."
    )


def _show(signature: str, message: str, details: str) -> None:
    global _showing
    if _showing or signature in _seen:
        return  # already on screen, or already reported: stderr still has it
    _seen.add(signature)
    _showing = True
    try:
        dialogs.show_exception(QApplication.activeWindow(), TITLE, message, details)
    except Exception:  # a failing dialog must not recurse into this hook
        traceback.print_exc()
    finally:
        _showing = False


def report(exc: BaseException, thread_name: str | None = None) -> None:
    """Show `exc` in the error dialog, from whichever thread it was caught on."""
    details = "".join(traceback.format_exception(exc))
    sys.stderr.write(details)
    signature = _signature(exc)
    message = _message(exc, thread_name)
    # QApplication lives on the main thread; Qt pool threads look like dummy threads here.
    if threading.current_thread() is threading.main_thread():
        _show(signature, message, details)
    elif _relay is not None:
        _relay.raised.emit(signature, message, details)


def _excepthook(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    if issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)
        return
    if exc.__traceback__ is None:
        exc = exc.with_traceback(tb)
    thread = threading.current_thread()
    report(exc, None if thread is threading.main_thread() else thread.name)


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or issubclass(args.exc_type, SystemExit):
        return  # SystemExit ends a thread quietly, as Python's own hook does
    name = args.thread.name if args.thread is not None else "a thread"
    report(args.exc_value, name)


def install() -> None:
    """Route uncaught exceptions to the dialog. Call on the GUI thread, after QApplication."""
    global _relay, _previous
    if _relay is None:
        _relay = _Relay()
    if _previous is None:
        _previous = (sys.excepthook, threading.excepthook)
    sys.excepthook = _excepthook
    threading.excepthook = _thread_excepthook


def uninstall() -> None:
    """Put the previous hooks back (tests)."""
    global _previous
    if _previous is not None:
        sys.excepthook, threading.excepthook = _previous  # type: ignore[assignment]
        _previous = None
    _seen.clear()
