"""Word-based search: "qwen 32" finds the 32B Qwen models in the picker and the Catalog,
not every model with a 32K context; no match is said."""

from __future__ import annotations

from rigspark_gui.catalog.search import matches, search_terms


def test_words_begin_terms() -> None:
    qwen32 = search_terms("Qwen", "Qwen2.5 32B Instruct", "qwen2.5-32b-instruct", "32.8b")
    qwen30 = search_terms("Qwen", "Qwen3 30B-A3B", "qwen3-30b-a3b", "30.5b")
    assert matches("qwen 32", qwen32) and not matches("qwen 32", qwen30)
    assert matches("QWEN2.5 instr", qwen32) and matches("", qwen30)
    assert matches("a3b", qwen30) and not matches("ctx", qwen30)


def test_the_picker_finds_sizes_not_context_labels(qtbot, window) -> None:
    picker = window.controls.model_picker
    picker.lineEdit().clear()
    qtbot.keyClicks(picker.lineEdit(), "qwen 32")
    popup = picker.completer().completionModel()
    shown = [popup.index(i, 0).data() for i in range(popup.rowCount())]
    assert shown and all("32" in s.split("·")[0] for s in shown), shown
    assert all("Qwen" in s for s in shown)


def test_the_catalog_filter_is_word_based_and_says_no_match(qtbot, window) -> None:
    window.tabs.setCurrentWidget(window.catalog_tab)
    tab = window.catalog_tab
    qtbot.waitUntil(lambda: tab.model.rowCount() > 0, timeout=20000)
    qtbot.keyClicks(tab.filter, "qwen 32")
    names = [tab.proxy.index(i, 0).data() for i in range(tab.proxy.rowCount())]
    assert names and all("Qwen" in n and "32" in n for n in names), names
    assert not tab.no_match.isVisible()
    tab.filter.clear()
    qtbot.keyClicks(tab.filter, "zzzz")
    assert tab.proxy.rowCount() == 0 and tab.no_match.isVisible()
    assert "zzzz" in tab.no_match.text()
