"""Word-based search over models, shared by the picker and the Catalog tab: every typed
word must begin a word of the model's name, family, id or size ("qwen 32" finds the
32B Qwen models, not every model with a 32K context)."""

from __future__ import annotations

import re
from collections.abc import Iterable

_SPLIT = re.compile(r"[^a-z0-9.]+")


def search_terms(*texts: str) -> tuple[str, ...]:
    """The words a model can be found by."""
    words: list[str] = []
    for text in texts:
        for w in _SPLIT.split(text.lower()):
            w = w.strip(".")
            if w:
                words.append(w)
                # "qwen2.5" is also "qwen" and "2.5"; "30b" also "30"
                words += [p for p in re.split(r"(?<=[a-z])(?=\d)|(?<=\d)(?=[a-z])", w) if p]
    return tuple(dict.fromkeys(words))


def matches(query: str, terms: Iterable[str]) -> bool:
    """Every word of `query` begins one of `terms`. The query is read as the resolver
    reads a name, so "llama3.1:8b" or "meta-llama/Llama-3.1-8B-Instruct" narrow the list
    as they are typed."""
    from rigspark_gui.catalog.resolve import query_words

    terms = tuple(terms)
    return all(any(t.startswith(w) for t in terms) for w in query_words(query))
