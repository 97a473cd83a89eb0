"""Run slow work off the GUI thread: `run_in_background(parent, op, on_success, on_error)`.

`op` runs on a QThreadPool worker and never touches widgets. Its result or exception is
emitted by a relay QObject that lives on the GUI thread, so the callbacks run there
(queued connection). Tests may set `POOL = SyncPool()` to run tasks inline.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot


class _Relay(QObject):
    done = Signal(object)
    failed = Signal(object, str)

    def __init__(
        self,
        parent: QObject,
        on_success: Callable[[Any], None],
        on_error: Callable[[Exception, str], None],
    ) -> None:
        super().__init__(parent)
        self._on_success, self._on_error = on_success, on_error
        self.done.connect(self._deliver_done)
        self.failed.connect(self._deliver_failed)

    @Slot(object)
    def _deliver_done(self, result: Any) -> None:
        _live.discard(self)
        self.deleteLater()
        self._on_success(result)

    @Slot(object, str)
    def _deliver_failed(self, err: Exception, details: str) -> None:
        _live.discard(self)
        self.deleteLater()
        self._on_error(err, details)


class _Task(QRunnable):
    def __init__(self, op: Callable[[], Any], relay: _Relay) -> None:
        super().__init__()
        self._op, self._relay = op, relay

    def run(self) -> None:
        try:
            result = self._op()
        except Exception as err:  # handed to on_error on the GUI thread
            self._deliver(self._relay.failed, err, traceback.format_exc())
        else:
            self._deliver(self._relay.done, result)

    @staticmethod
    def _deliver(signal: Any, *args: object) -> None:
        # the window that asked may have closed while this ran: nobody to tell then
        with contextlib.suppress(RuntimeError):
            signal.emit(*args)


class SyncPool:
    """Runs tasks at once on the calling thread (tests)."""

    def start(self, task: QRunnable) -> None:
        task.run()


POOL: Any = None
_live: set[_Relay] = set()  # keeps relays alive until they deliver


def run_in_background(
    parent: QObject,
    op: Callable[[], Any],
    on_success: Callable[[Any], None],
    on_error: Callable[[Exception, str], None],
) -> None:
    relay = _Relay(parent, on_success, on_error)
    _live.add(relay)
    pool = POOL if POOL is not None else QThreadPool.globalInstance()
    pool.start(_Task(op, relay))
