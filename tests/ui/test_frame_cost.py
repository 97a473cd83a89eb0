"""What a control change may touch: the Paths tab repaints its figures, and the window
is not re-laid out (that relayout once cost more than the plan). Counted, not timed."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication


class _LayoutRequests(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:
            self.seen.append(type(obj).__name__)
        return False


def test_a_context_change_does_not_re_lay_out_the_window(qtbot, window, monkeypatch) -> None:
    from rigspark_gui.ui import background

    # the suggestions' background plan (ladders, what would it take) runs inline here and
    # not while counting: it lands a moment after the controls settle, on its own clock,
    # and this test is about what a context change itself costs
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    window.resize(1500, 900)
    window.session.set_model("llama-3.3-70b-instruct")
    window.tabs.setCurrentWidget(window.paths_tab)
    assert window.paths_tab.fit_chart and window.paths_tab.speed_chart  # built, as on screen
    for context in (4096, 6144):  # the window settles after it is first shown
        window.controls.context_spin.setValue(context)
        QApplication.processEvents()
    window.what_if.suggest_now()
    window.what_if.timer.stop()
    monkeypatch.setattr(window.what_if, "schedule", lambda: None)
    window.what_if.timer.setInterval(60_000)
    spy = _LayoutRequests()
    app = QApplication.instance()
    app.installEventFilter(spy)
    try:
        # any layout that settling posted (a dock resized after the first show, on a busy
        # machine later than a fixed wait) runs out before counting starts
        for _ in range(20):
            spy.seen.clear()
            qtbot.wait(50)
            if not spy.seen:
                break
        before = window.paths_tab.summary.text()
        for i in range(6):
            window.controls.context_spin.setValue(8192 + 2048 * i)
            QApplication.processEvents()
    finally:
        app.removeEventFilter(spy)
    assert window.paths_tab.summary.text() != before  # the figures did change
    assert "MainWindow" not in spy.seen and "PathsTab" not in spy.seen


def test_the_summary_grows_when_it_needs_more_lines(qtbot, window, monkeypatch) -> None:
    from rigspark_gui.ui import background

    # the background ladder pass re-shows the plan (without these warnings): run it
    # inline, before the warnings are shown, so it cannot race the assertion
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    window.resize(1500, 900)
    window.session.set_model("llama-3.3-70b-instruct")
    window.what_if.suggest_now()
    window.what_if.timer.stop()
    QApplication.processEvents()
    summary = window.paths_tab.summary
    one = summary.height()
    plan = window.session.plan
    window.paths_tab.show_plan(plan, warnings=["first warning", "second warning"])
    qtbot.waitUntil(lambda: summary.height() > one)
    assert summary.label.height() >= summary.heightForWidth(summary.width())
    assert "second warning" in summary.text()
