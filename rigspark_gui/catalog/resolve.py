"""Every name a user types for a model, resolved to a catalog entry.

Catalog ids and names, Ollama tags (`llama3.1:8b`, `qwen3:30b-a3b`,
`gpt-oss:20b`, `llama3.1:8b-instruct-q4_K_M`), Hugging Face ids (`meta-llama/Llama-3.1-8B-
Instruct`, GGUF repos with llama.cpp's `-hf repo:QUANT` form), LM Studio keys and GGUF
file names all reduce to the same words; case, spaces and punctuation do not count. A
quantization named anywhere in the text becomes the plan's fixed quantization. An Ollama
tag a catalog entry lists (what Ollama's library serves under it today) is taken as it is,
before any word matching.

Matching is by words, not by edit distance: every word the user typed must be a word of
the model (its id, name, repository or parameter count), and among the models that
pass, the one with the fewest words the user did not type wins ("llama 3.1 8b" is the
Instruct model, not a distil of it). When the user named no size and the models left
differ in size, the answer is ambiguous unless Ollama's own default tag settles it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from rigspark_gui.core.errors import CatalogError
from rigspark_gui.core.memory import param_count
from rigspark_gui.core.model import ModelSpec

# llama-quantize's type names (and unsloth's dynamic UD- mixes), as they appear in tags
# and file names: ...-Q4_K_M.gguf, :8b-instruct-q4_K_M, repo:IQ4_XS, UD-Q4_K_XL
_QUANT = re.compile(
    r"(?<![a-z0-9])((?:ud-)?(?:"
    r"iq[1-4]_(?:xxs|xs|s|m|nl)|tq[12]_0|q[2-6]_k(?:_(?:xl|s|m|l))?|q[4-5]_[01]|q8_0|"
    r"bf16|fp16|f16|f32|mxfp4"
    r"))(?![a-z0-9])",
    re.IGNORECASE,
)
_SPLIT = re.compile(r"[^a-z0-9.]+")
# "llama3.1" is "llama 3.1" and "qwen2.5" is "qwen 2.5": a run of two or more letters
# followed by a version; single letters stay on ("r1", "a3b", "v0.3", "k2", "8x7b")
_WORD_THEN_VERSION = re.compile(r"^([a-z]{2,})(\d+(?:\.\d+)?)$")
_SIZE = re.compile(r"^\d+(?:\.\d+)?[bm]$|^\d+x\d+(?:\.\d+)?b$")
# words that say nothing about which model: publishers, packaging, Ollama's tag
_NEUTRAL = frozenset(
    {"meta", "instruct", "it", "chat", "gguf", "latest", "hf", "model", "ud", "ggml"}
)  # fmt: skip
# tuned for chat: what Ollama's and LM Studio's plain names mean
_TUNED = frozenset({"instruct", "it", "chat"})
# Ollama's default tag where a library name has several sizes (ollama.com/library)
OLLAMA_DEFAULT_SIZE = {
    "llama 3": "8b", "llama 3.1": "8b", "llama 3.2": "3b", "llama 3.3": "70b",
    "llama 2": "7b", "qwen 3": "8b", "qwen 2.5": "7b", "qwen 2": "7b",
    "qwen 2.5 coder": "7b", "gemma 3": "4b", "gemma 2": "9b", "gemma": "7b",
    "mistral": "7b", "mixtral": "8x7b", "phi 3": "3.8b", "phi 4": "14b", "gpt oss": "20b",
    "codellama": "7b", "smollm 2": "1.7b", "tinyllama": "1.1b", "qwq": "32b",
    "deepseek r1": "8b", "falcon 3": "7b", "granite 3.3": "8b", "olmo 2": "7b",
}  # fmt: skip


# Ollama library tags the catalog's entries list (`models.json` "ollama"), tag -> id: what
# `ollama pull TAG` serves today, ahead of any word match ("deepseek-r1:8b" is the
# Qwen3-8B distill of R1-0528 now, not the Llama one the words would pick).
_CATALOG_TAGS: dict[str, str] = {}


def set_catalog_tags(tags: dict[str, str]) -> None:
    _CATALOG_TAGS.clear()
    _CATALOG_TAGS.update(tags)


def _tagged(specs: Sequence[ModelSpec], body: str) -> ModelSpec | None:
    """The entry an Ollama tag names: exactly, as `name` (its `latest`), or with the
    variant and quantization after the size left off (`qwen3:8b-q4_K_M` is `qwen3:8b`)."""
    if "/" in body or not _CATALOG_TAGS:
        return None
    text = body.strip().lower()
    name, _, tag = text.partition(":")
    tries = [text] if tag else [text, f"{text}:latest"]
    if tag and "-" in tag:
        tries.append(f"{name}:{tag.split('-', 1)[0]}")
    by_id = {s.id: s for s in specs}
    for t in tries:
        model_id = _CATALOG_TAGS.get(t)
        if model_id in by_id:
            return by_id[model_id]
    return None


class Resolved(NamedTuple):
    spec: ModelSpec
    quant: str | None  # named in the text: the plan's fixed quantization
    how: str  # what matched, for messages


def quant_in(text: str) -> str | None:
    """The quantization a name carries, in llama.cpp's spelling (Q4_K_M, IQ4_XS, F16)."""
    found = _QUANT.findall(text)
    if not found:
        return None
    q = found[-1].upper()
    return "F16" if q == "FP16" else q


def words(text: str) -> tuple[str, ...]:
    """The words of a name: lower case, punctuation gone, versions split from names."""
    out: list[str] = []
    for raw in _SPLIT.split(text.lower()):
        w = raw.strip(".")
        if not w:
            continue
        m = _WORD_THEN_VERSION.match(w)
        out += [m.group(1), m.group(2)] if m else [w]
    return tuple(out)


def _strip(text: str) -> tuple[str, str]:
    """(the text without hf:/URL prefix, the model's own name without its publisher)."""
    body = re.sub(r"^(?:hf:|https?://(?:www\.)?huggingface\.co/)", "", text.strip(), flags=re.I)
    repo_part = body.split(":")[0] if "/" in body else body
    return body, repo_part.split("/")[-1] if "/" in repo_part else body


def query_words(text: str) -> list[str]:
    """The words of a typed name that pick a model: no publisher, no quantization, none
    of the words every model has ("instruct", "gguf")."""
    name = _strip(text)[1]
    return [w for w in words(_QUANT.sub(" ", name)) if w not in _NEUTRAL]


def _size_words(spec: ModelSpec) -> set[str]:
    n = param_count(spec).total / 1e9
    sizes = {f"{int(n)}b", f"{round(n)}b", f"{n:.1f}b".replace(".0b", "b")}
    if n < 1:
        sizes.add(f"{round(n * 1000)}m")
    return sizes


class _Candidate(NamedTuple):
    spec: ModelSpec
    own: tuple[str, ...]  # words of the id: what an extra word costs
    all: frozenset[str]  # every word it can be found by

    @property
    def sizes(self) -> frozenset[str]:
        return frozenset(w for w in self.own if _SIZE.match(w)) or frozenset(
            w for w in self.all if _SIZE.match(w)
        )


def _candidates(specs: Sequence[ModelSpec]) -> list[_Candidate]:
    out = []
    for s in specs:
        own = words(s.id.removeprefix("file:"))
        every = {*own, *words(s.name), *words(s.hf_repo.split("/")[-1]), *_size_words(s)}
        out.append(_Candidate(s, own, frozenset(every)))
    return out


def describe(spec: ModelSpec) -> str:
    n = param_count(spec).total / 1e9
    return f"{spec.id} ({spec.name}, {n:.1f}B)"


def resolve(specs: Sequence[ModelSpec], text: str) -> Resolved:
    """The model `text` names among `specs`, or a CatalogError that lists the closest
    three with what each is."""
    typed = text.strip()
    if not typed:
        raise CatalogError("no model named; `rigspark-plan models` lists them")
    body, _name = _strip(typed)
    quant = quant_in(body)
    # exact forms first: an id, a name, a Hugging Face repo (with or without :QUANT)
    repo_part = body.split(":")[0] if "/" in body else body
    for s in specs:
        if body == s.id or body.lower() == s.name.lower():
            return Resolved(s, None, "catalog id")
    tagged = _tagged(specs, body)
    if tagged is not None:
        return Resolved(tagged, quant, "Ollama library tag")
    for s in specs:
        if s.hf_repo and repo_part.lower() == s.hf_repo.lower():
            return Resolved(s, quant, f"Hugging Face repo {s.hf_repo}")
        if s.ollama_tag and body.lower() == s.ollama_tag.lower():
            return Resolved(s, None, "Ollama tag on this computer")
    query = query_words(typed)  # a repo's publisher says nothing about the model
    if not query:
        raise CatalogError(f"{typed!r} names no model; `rigspark-plan models` lists them")
    cands = _candidates(specs)
    # a word some model has as it is ("qwen 3": the version) is not read as a size
    literal = {w for w in query if any(w in c.all for c in cands)}
    passing = [c for c in cands if all(w in c.all if w in literal else _has(c, w) for w in query)]
    if not passing:
        raise _unknown(typed, query, cands)
    named_size = any(_SIZE.match(w) or (w.isdigit() and f"{w}b" in passing[0].all) for w in query)
    if not named_size:
        default = OLLAMA_DEFAULT_SIZE.get(" ".join(query))
        if default is not None:
            passing = [c for c in passing if default in c.all] or passing
        if len({c.sizes for c in passing}) > 1:
            raise _ambiguous(typed, passing)

    def cost(c: _Candidate) -> tuple[int, int, int]:
        said = {*query, *(f"{w}b" for w in query if w.isdigit())}
        extra = [w for w in c.own if w not in said and w not in _NEUTRAL]
        return (len(extra), 0 if _TUNED & set(c.own) else 1, len(c.spec.id))

    best = min(passing, key=cost)  # ties: the catalog's order (current releases first)
    return Resolved(best.spec, quant, "name")


def _size_value(size: str) -> float:
    m = re.match(r"^(\d+)x(\d+(?:\.\d+)?)b$", size)
    if m:
        return float(m.group(1)) * float(m.group(2))
    return float(size[:-1]) / (1000 if size.endswith("m") else 1)


def dynamic_quant_message(quant: str, model_id: str, repo: str = "") -> str:
    """Why an Unsloth dynamic mix (UD-Q4_K_XL...) cannot be planned from the catalog, and
    what can: its file's header, or a standard llama-quantize mix of the same bits."""
    core = quant.upper().removeprefix("UD-")
    root, _, suffix = core.rpartition("_")
    if suffix in ("XL", "L") and root:
        core = f"{root}_M" if root in ("Q3_K", "Q4_K", "Q5_K") else root
    return (
        f"{quant} is Unsloth's dynamic mix: its tensor types are known only from the file "
        f"(no published mix for {model_id} here). Plan the file itself with "
        f"hf:{repo or 'unsloth/REPO-GGUF'}:{quant} (read from its header), or a standard "
        f"mix of the same bits with --quant {core}"
    )


def _has(c: _Candidate, word: str) -> bool:
    # "qwen3 32": a bare number is also a size in billions
    return word in c.all or (word.isdigit() and f"{word}b" in c.all)


def _ambiguous(typed: str, passing: list[_Candidate]) -> CatalogError:
    top = "; ".join(describe(c.spec) for c in passing[:3])
    more = f" and {len(passing) - 3} more" if len(passing) > 3 else ""
    return CatalogError(f"{typed!r} could be several models: {top}{more}; add the size")


def _unknown(typed: str, query: list[str], cands: list[_Candidate]) -> CatalogError:
    wanted = " ".join(query)
    sizes = [w for w in query if _SIZE.match(w)]
    if sizes:
        # a size nobody has: never offer another size as if it were the one asked for
        # ("gemma3:270m" is not the 27B); the same family's sizes are what to say
        rest = [w for w in query if w not in sizes]
        family = [c for c in cands if rest and all(w in c.all for w in rest)]
        if family:
            have = sorted({sz for c in family for sz in c.sizes}, key=_size_value)
            return CatalogError(
                f"unknown model {typed!r}: the catalog has no {' '.join(rest)} model of "
                f"{', '.join(sizes)} (sizes it has: {', '.join(have)}); "
                "`rigspark-plan models` lists them"
            )
        cands = [c for c in cands if not c.sizes or any(sz in c.sizes for sz in sizes)] or cands

    import difflib  # only for a name that matched nothing

    def closeness(c: _Candidate) -> float:
        shared = sum(1 for w in query if w in c.all)
        ratio = difflib.SequenceMatcher(None, wanted, " ".join(c.own)).ratio()
        return shared + ratio

    best = sorted(cands, key=closeness, reverse=True)[:3]
    hint = "; ".join(describe(c.spec) for c in best)
    return CatalogError(
        f"unknown model {typed!r} (closest: {hint}); `rigspark-plan models` lists them"
    )
