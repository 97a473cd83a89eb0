"""How many parameters a model has, in all and read per token (a MoE model reads only
its active experts; the token table is a lookup, not a read): from a GGUF file's real
tensors, or from a catalog model's shapes with each kind of block shaped once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple

from rigspark_gui.core.memo import ByIdentity
from rigspark_gui.core.memory.tensors import block_tensors, global_tensors, layer_keys
from rigspark_gui.core.model import Geometry, ModelSpec, TensorGroup

_LOOKUPS = frozenset({"token_embd.weight", "per_layer_token_embd.weight"})


class ParamCount(NamedTuple):
    total: int
    active: int  # read per token: MoE counts its active experts, the embedding is a lookup


def count_params(
    g: Geometry, rows: Iterable[tuple[str, int, TensorGroup, int | None, bool]]
) -> ParamCount:
    """Parameters from (name, elements, group, layer, expert) of every tensor."""
    total = expert_params = 0
    embd: int | None = None
    for name, n, group, layer, expert in rows:
        total += n
        if expert and group is TensorGroup.BLOCK and layer is not None:
            expert_params += n
        if name in _LOOKUPS:
            embd = (embd or 0) + n
    frac = g.n_expert_used / g.n_expert if g.n_expert else 1.0
    active = total - expert_params + round(expert_params * frac) - (embd or 0)
    return ParamCount(total, max(active, 0))


@lru_cache(maxsize=512)
def synth_param_count(g: Geometry) -> ParamCount:
    """The same count as tensor by tensor, but each kind of block is shaped once: layers
    differ only by recurrence, KV heads and MoE, so a catalog of 129 models is counted
    in milliseconds (the model picker sorts by size at start-up)."""
    # token tables (token_embd, Gemma's per-layer table) are lookups, not reads
    shapes = [(n, math.prod(shape)) for n, shape, _, _ in global_tensors(g)]
    embd = sum(k for n, k in shapes if n.endswith("token_embd.weight"))
    kinds: dict[tuple[bool, int, bool, int], tuple[int, int]] = {}
    total = sum(k for _, k in shapes)
    experts = 0
    for il, kind in enumerate(layer_keys(g)):
        counted = kinds.get(kind)
        if counted is None:
            sizes = [(math.prod(shape), "_exps" in n) for n, shape in block_tensors(g, il)]
            counted = (sum(n for n, _ in sizes), sum(n for n, e in sizes if e))
            kinds[kind] = counted
        total += counted[0]
        experts += counted[1]
    frac = g.n_expert_used / g.n_expert if g.n_expert else 1.0
    active = total - experts + round(experts * frac) - embd
    return ParamCount(total, max(active, 0))


def _count_of(spec: ModelSpec) -> ParamCount:
    if spec.tensors is None:
        return synth_param_count(spec.geometry)
    rows = ((t.name, t.n_elements, t.group, t.layer, t.expert) for t in spec.tensors)
    return count_params(spec.geometry, rows)


# Parameters do not depend on the quantization: counted from shapes alone, without
# choosing a type per tensor (the model picker sorts every model by size at start-up).
param_count: ByIdentity[ModelSpec, ParamCount] = ByIdentity(_count_of)
