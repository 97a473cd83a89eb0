"""What would it take: the few smallest changes that buy the recommended plan a better
quantization or a faster path, each with its own cost.

Each candidate change is planned for real (the same engine, the recommendation only,
not every path's report), and kept when its recommendation is better: a quantization
of higher measured quality, or the same quality at least 25 % faster. Changes are tried
smallest first — K/V precision, a shorter context, fewer parallel sequences, then
hardware: a second GPU like the first, more RAM — and the first few that help are shown.

When the model reaches the minimum speed at no quantization, `smaller_models` names the
models that do: the same family first, then the others the catalog ranks best for the
rig (biggest first), each at the quantization and speed its own plan gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rigspark_gui.core.memory import LOAD_FLAG_BACKENDS, NO_MMAP_FLAG, NO_REPACK_FLAG, param_count
from rigspark_gui.core.model import KvCacheType, ModelSpec, QualityTable, QuantQuality
from rigspark_gui.core.plan.quant_search import above_floor
from rigspark_gui.core.plan.ranking import RankVerdict, rank_model
from rigspark_gui.core.rig import GIB, Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.core.units import tokens

FASTER = 1.25  # the same quality must be this much faster to be worth a change
MIN_CONTEXT = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestion:
    # what to change, in words
    change: str
    # what the change itself costs
    cost: str
    # PlanSettings fields to apply (empty: a rig change)
    settings: dict[str, object] = field(default_factory=dict)
    # 'add_gpu' or 'add_ram:<bytes>'
    rig_change: str = ""
    # another model to plan instead (a smaller one that reaches the minimum speed)
    model_id: str = ""
    quant: str
    path: str
    tok_s: float | None
    quality: QuantQuality | None


def _better(
    spec: ModelSpec,
    quant: str | None,
    tok_s: float | None,
    base_q: str | None,
    base_t: float | None,
) -> bool:
    if quant is None:
        return False
    if base_q is None:
        return True
    order = spec.available_quants
    rank = order.index(quant) if quant in order else len(order)
    base_rank = order.index(base_q) if base_q in order else len(order)
    if rank < base_rank:
        return True
    faster = tok_s is not None and (base_t is None or tok_s >= base_t * FASTER)
    return rank == base_rank and faster


def rig_after(rig: Rig, change: str) -> Rig:
    """The rig a suggestion's `rig_change` describes: "add_gpu" (one more like this
    machine's last) or "add_ram:<bytes>"; the same rig for anything else."""
    local = [g for g in rig.gpus if not g.host]
    if change == "add_gpu" and local:
        # one more in this machine, like its last (a rig of several hosts keeps theirs)
        twin = replace(local[-1], index=len(local))
        return replace(rig, gpus=(*rig.gpus, twin))
    if change.startswith("add_ram:"):
        extra = int(change.removeprefix("add_ram:"))
        avail = rig.ram_available_bytes
        return replace(
            rig,
            ram_total_bytes=rig.ram_total_bytes + extra,
            ram_available_bytes=avail + extra if avail is not None else None,
        )
    return rig


def suggest(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    speed: SpeedModel,
    quality: QualityTable,
    limit: int = 3,
) -> tuple[Suggestion, ...]:
    """Up to `limit` changes that improve on the recommendation for (`spec`, `rig`, `s`),
    smallest first. A fixed quantization (`s.quant`) has nothing to improve."""
    if s.quant is not None or s.backend.serving:
        # a serving engine's own levers (utilization, max_model_len, TP) are its tab's
        return ()
    base = rank_model(spec, rig, s, speed)
    base_q, base_t = base.quant if base.path is not None else None, base.tok_s
    out: list[Suggestion] = []

    def attempt(
        change: str, cost: str, settings: dict[str, Any], rig2: Rig, rig_change: str = ""
    ) -> None:
        s2 = replace(s, **settings) if settings else s
        try:
            r = rank_model(spec, rig2, s2, speed)
        except ValueError:  # settings the engine refuses for this model: not a suggestion
            return
        if r.path is None or not _better(spec, r.quant, r.tok_s, base_q, base_t):
            return
        assert r.quant is not None
        out.append(
            Suggestion(
                change=change,
                cost=cost,
                settings=settings,
                rig_change=rig_change,
                quant=r.quant,
                path=r.path.value,
                tok_s=r.tok_s,
                quality=spec.quality.get(r.quant),
            )
        )

    steps: list[Callable[[], None]] = []
    if s.backend in LOAD_FLAG_BACKENDS and s.mmap is not False and s.repack:
        # the weights the CPU repacks, held once instead of beside their mapped pages
        steps.append(
            lambda: attempt(
                f"load without mmap ({NO_MMAP_FLAG})",
                "the same speed; repacked weights held once, not beside the mapped file",
                {"mmap": False},
                rig,
            )
        )
        steps.append(
            lambda: attempt(
                f"no repacked CPU copies ({NO_REPACK_FLAG})",
                "slower CPU kernels; the file stays mapped",
                {"repack": False},
                rig,
            )
        )
    f16, q8 = KvCacheType.F16, KvCacheType.Q8_0
    if s.backend.ggml_based and (s.kv_k is f16 or s.kv_v is f16):
        cost = quality.kv_words("q8_0", "q8_0") + "; about half the KV cache memory"
        change = {"kv_k": q8, "kv_v": q8, "flash_attn": True}
        steps.append(lambda: attempt("K/V cache at q8_0", cost, change, rig))
    ctx = min(s.context, spec.geometry.context_length)
    shorter = ctx // 2
    while shorter >= MIN_CONTEXT and shorter >= s.prompt_tokens:
        n = shorter

        def shorter_context(n: int = n) -> None:
            attempt(
                f"a {tokens(n)} context",
                f"{tokens(ctx)} → {tokens(n)} tokens of context",
                {"context": n},
                rig,
            )

        steps.append(shorter_context)
        shorter //= 2
    if s.parallel > 1:
        steps.append(
            lambda: attempt(
                "one sequence at a time",
                f"{s.parallel} parallel sequences → 1",
                {"parallel": 1},
                rig,
            )
        )
    local = [g for g in rig.gpus if not g.host]
    if local:
        twin = local[-1].name
        steps.append(
            lambda: attempt(
                f"another {twin}", "a GPU more", {}, rig_after(rig, "add_gpu"), "add_gpu"
            )
        )
    extra = max(rig.ram_total_bytes, 16 * GIB)
    more_ram = f"add_ram:{extra}"
    steps.append(
        lambda: attempt(
            f"{extra // GIB} GiB more RAM",
            "more system memory",
            {},
            rig_after(rig, more_ram),
            more_ram,
        )
    )
    context_found = False
    for step in steps:
        if len(out) >= limit:
            break
        if context_found and step.__name__ == "shorter_context":
            continue  # one context is enough: the longest that helps
        before = len(out)
        step()
        context_found = context_found or (len(out) > before and "context" in out[-1].settings)
    return tuple(out[:limit])


# how many smaller models are planned at most, and how many are shown
SMALLER_TRIES = 12
SMALLER_SHOWN = 3
# a cheap bound before planning a smaller model: decode time scales with the parameters
# read per token, and a quantization above the floor decodes at most this much faster
# than the one the model was planned at
_QUANT_HEADROOM = 1.5


def lineage(family: str) -> str:
    """A family's line without its version: 'Llama 3.1' and 'Llama 3.2' are both llama."""
    return family.split()[0].lower() if family.strip() else ""


def smaller_models(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    speed: SpeedModel,
    catalog: Sequence[ModelSpec],
    limit: int = SMALLER_SHOWN,
) -> tuple[Suggestion, ...]:
    """Smaller models that reach the minimum speed on this rig when `spec` does not, at a
    quantization no worse than Auto's quality floor: same family first, then the rest,
    biggest first (as the catalog ranks those that fit). Empty when `spec` reaches it."""
    if s.quant is not None or s.min_tok_s <= 0:
        return ()
    base = rank_model(spec, rig, s, speed)
    if base.verdict is RankVerdict.FITS:
        return ()
    count = param_count(spec)
    size, line = count.total, lineage(spec.family)
    pool = []
    for m in catalog:
        c = param_count(m)
        if m.id == spec.id or c.total >= size:
            continue
        if base.tok_s and base.tok_s * count.active / c.active * _QUANT_HEADROOM < s.min_tok_s:
            continue  # too slow however it is quantized
        pool.append((lineage(m.family) != line or not line, -c.total, m.id, m))
    pool.sort(key=lambda x: x[:3])
    out: list[Suggestion] = []
    for _, params, _, m in pool[:SMALLER_TRIES]:
        try:
            r = rank_model(m, rig, s, speed)
        except ValueError:
            continue
        if r.verdict is not RankVerdict.FITS or r.quant is None or r.path is None:
            continue
        if not above_floor(m, r.quant):
            continue
        out.append(
            Suggestion(
                change=m.name,
                cost=f"a smaller model: {-params / 1e9:.1f} B parameters, not {size / 1e9:.1f} B",
                model_id=m.id,
                quant=r.quant,
                path=r.path.value,
                tok_s=r.tok_s,
                quality=m.quality.get(r.quant),
            )
        )
        if len(out) >= limit:
            break
    return tuple(out)
