"""llama.cpp's `--fit` decision procedure, step for step (`common_params_fit_impl` in
common/fit.cpp of build b11434), over an abstract dry-run measurement.

llama.cpp measures each candidate setting with a dry-run load through its allocator;
here the caller hands in `measure`, which answers the same question from RigSpark's
byte model. Integer arithmetic follows the C++ (int64 / uint32, truncating division),
so given the same bytes the same context, layer counts and overrides come out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import NamedTuple

MIB = 1 << 20
UINT32_MAX = (1 << 32) - 1
# common/common.h fit_params_target and fit_params_min_ctx
DEFAULT_MARGIN = 1024 * MIB
DEFAULT_FIT_CTX = 4096


class LayerFraction(IntEnum):
    """What part of a layer stays on its device when the layer overflows (fit.cpp's
    common_layer_fraction_t): the rest goes to system memory or the next device."""

    NONE = 0
    ATTN = 1  # attention only
    UP = 2  # attention + up
    GATE = 3  # attention + up + gate
    MOE = 4  # everything but the routed experts


_OVERFLOW_PATTERN = {
    LayerFraction.ATTN: "blk\\.{il}\\.ffn_(gate|up|gate_up|down).*",
    LayerFraction.UP: "blk\\.{il}\\.ffn_(gate|gate_up|down).*",
    LayerFraction.GATE: "blk\\.{il}\\.ffn_down.*",
    LayerFraction.MOE: "blk\\.{il}\\.ffn_(up|down|gate_up|gate)_(ch|)exps",
}
ALL_EXPERTS_PATTERN = "blk\\.\\d+\\.ffn_(up|down|gate_up|gate)_(ch|)exps"


def overflow_pattern(il: int, fraction: LayerFraction) -> str:
    """The -ot pattern fit writes for layer `il` keeping `fraction` on its device."""
    return _OVERFLOW_PATTERN[fraction].format(il=il)


@dataclass(frozen=True, slots=True)
class DeviceLayers:
    """fit.cpp's ngl_t: layers on one device, of which the last `n_part` overflow."""

    n_layer: int = 0
    n_part: int = 0
    # the first partial layer's kept part; later partial layers keep MOE
    overflow: LayerFraction = LayerFraction.MOE

    @property
    def n_full(self) -> int:
        return self.n_layer - self.n_part


class Override(NamedTuple):
    """One tensor override: layer, the part kept on the layer's device, and where the
    rest goes (None: system memory; else a device index)."""

    layer: int
    keep: LayerFraction
    to_device: int | None


class Probe(NamedTuple):
    """One dry-run load: the context and the model's placement. `layers` None means the
    user's own -ngl / --tensor-split (the initial measurement)."""

    context: int
    layers: tuple[DeviceLayers, ...] | None = None
    overrides: tuple[Override, ...] = ()
    all_experts_on_cpu: bool = False


class Use(NamedTuple):
    """What a dry run allocates on one device (or the host): llama_memory_breakdown's
    model, context and compute parts."""

    model: int
    context: int
    compute: int

    @property
    def total(self) -> int:
        return self.model + self.context + self.compute


class Measurement(NamedTuple):
    devices: tuple[Use, ...]
    host: Use


Measure = Callable[[Probe], Measurement]


@dataclass(frozen=True, slots=True, kw_only=True)
class FitProblem:
    """Everything fit reads besides the measurements."""

    free: tuple[int, ...]  # per device, llama.cpp's order (empty: no GPU)
    host_total: int
    margins: tuple[int, ...]  # one per device (one for the host when there is none)
    n_layer: int  # hparams' layers (+ next-n layers when loaded): -ngl counts + 1
    n_ctx_train: int
    n_expert: int
    # 0 = automatic (trained context x streams)
    context: int
    # smallest context fit may choose; None: `-c 0` given (full context requested)
    min_context: int | None
    streams: int
    user_ngl: int | None = None  # -ngl given
    user_split: bool = False  # -ts given
    user_overrides: bool = False  # -ot, --cpu-moe, --n-cpu-moe given
    split_mode: str = "layer"


@dataclass(frozen=True, slots=True, kw_only=True)
class FitDecision:
    """What fit leaves in the parameters, and why."""

    status: str  # unchanged | fitted | failed
    reason: str
    context: int
    initial_context: int
    ngl: int | None  # None: left as the user had it
    split: tuple[int, ...]
    overrides: tuple[Override, ...]
    layers: tuple[DeviceLayers, ...]
    projected: tuple[int, ...]  # per device, at the final settings (host when no GPU)
    log: tuple[str, ...]


class _GiveUp(Exception):
    pass


class _Done(Exception):
    pass


def _overrides(
    layers: Sequence[DeviceLayers], overflow_next: Sequence[bool], n_layer: int
) -> tuple[Override, ...]:
    """set_ngl_tensor_split_tbo: the partial layers of each device, front to back."""
    ngl = sum(d.n_layer for d in layers)
    il0 = n_layer + 1 - ngl
    out: list[Override] = []
    for id_, d in enumerate(layers):
        il0 += d.n_full
        for il in range(il0, il0 + d.n_part):
            first = il == il0
            keep = d.overflow if first else LayerFraction.MOE
            to = id_ + 1 if first and overflow_next[id_] else None
            out.append(Override(il, keep, to))
        il0 += d.n_part
    return tuple(out)


def common_fit(p: FitProblem, measure: Measure) -> FitDecision:
    """Run fit's steps 1-4 and return what it decided."""
    nd = len(p.free)
    log: list[str] = []
    n_ctx_auto = p.context == 0
    n_ctx_max = min(p.n_ctx_train * p.streams, UINT32_MAX)
    min_ctx = UINT32_MAX if p.min_context is None else p.min_context
    n_ctx_min_total = min(min_ctx * p.streams, UINT32_MAX)
    n_ctx = n_ctx_max if n_ctx_auto else p.context
    initial_context = n_ctx
    margins = list(p.margins[:1] if nd == 0 else p.margins[:nd])
    # the context as fit leaves it in cparams (changed by step 2 on the way)
    state = [n_ctx]

    full = measure(Probe(n_ctx))
    projected_final: list[int] = []

    def result(
        status: str,
        reason: str,
        *,
        ngl: int | None = None,
        split: tuple[int, ...] = (),
        overrides: tuple[Override, ...] = (),
        layers: tuple[DeviceLayers, ...] = (),
    ) -> FitDecision:
        return FitDecision(
            status=status,
            reason=reason,
            context=state[0],
            initial_context=initial_context,
            ngl=ngl,
            split=split,
            overrides=overrides,
            layers=layers,
            projected=tuple(projected_final),
            log=tuple(log),
        )

    # step 1: does anything need to change?
    if nd == 0:
        used = full.host.total
        sum_free = p.host_total
        sum_projected_free = sum_free - used
        sum_projected_used = used
        sum_projected_model = full.host.model
        log.append(
            f"projected to use {used // MIB} MiB of host memory vs. "
            f"{sum_free // MIB} MiB of total host memory"
        )
        if sum_projected_free >= margins[0]:
            projected_final.append(used)
            log.append(
                f"will leave {sum_projected_free // MIB} >= {margins[0] // MIB} MiB of "
                "system memory, no changes needed"
            )
            return result("unchanged", "no changes needed")
    else:
        sum_free = sum(p.free)
        per_free = [p.free[i] - full.devices[i].total for i in range(nd)]
        sum_projected_used = sum(full.devices[i].total for i in range(nd))
        sum_projected_free = sum(per_free)
        sum_projected_model = sum(full.devices[i].model for i in range(nd))
        log.append(
            f"projected to use {sum_projected_used // MIB} MiB of device memory vs. "
            f"{sum_free // MIB} MiB of free device memory"
        )
        if all(per_free[i] >= margins[i] for i in range(nd)):
            projected_final.extend(full.devices[i].total for i in range(nd))
            return result("unchanged", "no changes needed")

    # step 2: reduce the context
    global_surplus = sum_projected_free - sum(margins)
    if global_surplus < 0:
        if n_ctx_auto:
            if n_ctx_max > n_ctx_min_total:
                sum_used_target = sum_free - sum(margins)
                if nd > 1:
                    ngl_user = p.user_ngl if p.user_ngl is not None else -1
                    ngl_u32 = ngl_user & UINT32_MAX
                    per_layer = _div(sum_projected_model, min(ngl_u32, p.n_layer))
                    sum_used_target -= _div((nd + 1) * per_layer, 2 if p.n_expert == 0 else 6)
                state[0] = n_ctx_min_total
                low = measure(Probe(n_ctx_min_total))
                used_min = low.host.total if nd == 0 else sum(u.total for u in low.devices)
                if sum_used_target > used_min:
                    step = _div(
                        (n_ctx_max - n_ctx_min_total) * (sum_used_target - used_min),
                        sum_projected_used - used_min,
                    )
                    ctx = (n_ctx_min_total + step) & UINT32_MAX
                    align = 256 * p.streams
                    ctx = max(ctx - ctx % align, n_ctx_min_total)
                    state[0] = ctx
                    log.append(f"context size reduced from {n_ctx_max} to {ctx}")
                    if nd <= 1:
                        final = measure(Probe(ctx))
                        projected_final.extend(
                            [final.host.total] if nd == 0 else [u.total for u in final.devices]
                        )
                        log.append("entire model can be fit by reducing context")
                        return result("fitted", "entire model can be fit by reducing context")
                else:
                    log.append(f"context size reduced from {n_ctx_max} to {n_ctx_min_total}")
            elif p.min_context is None:
                log.append(f"user has requested full context size of {n_ctx_max} -> no change")
            else:
                log.append(
                    f"default model context size is {n_ctx_max} which is <= the min. "
                    f"context size of {n_ctx_min_total} -> no change"
                )
        else:
            log.append(f"context size set by user to {n_ctx} -> no change")

    def give_up(reason: str) -> FitDecision:
        log.append(f"failed to fit params to free device memory: {reason}")
        return result("failed", reason)

    if nd == 0:
        return give_up("was unable to fit model into system memory by reducing context, abort")
    if p.user_ngl is not None and p.user_ngl != -1:
        return give_up(f"n_gpu_layers already set by user to {p.user_ngl}, abort")
    if nd > 1 and p.user_split:
        return give_up("model_params::tensor_split already set by user, abort")
    if nd > 1 and p.split_mode == "row":
        return give_up("changing weight allocation for LLAMA_SPLIT_MODE_ROW not implemented, abort")
    if p.split_mode == "tensor":
        return give_up("llama_params_fit is not implemented for SPLIT_MODE_TENSOR, abort")
    if p.user_overrides:
        return give_up("model_params::tensor_buft_overrides already set by user, abort")

    ctx = state[0]
    hp_ngl = p.n_layer
    moe = p.n_expert > 0
    overflow_next = [False] * nd

    def mem_for(layers: Sequence[DeviceLayers], nxt: Sequence[bool]) -> list[int]:
        ovr = _overrides(layers, nxt, hp_ngl)
        m = measure(Probe(ctx, tuple(layers), ovr))
        return [u.total for u in m.devices]

    surplus_cpu_moe = 0
    if moe:
        m = measure(Probe(ctx, None, (), all_experts_on_cpu=True))
        for i in range(nd):
            surplus_cpu_moe += p.free[i] - m.devices[i].total - margins[i]

    targets = [p.free[i] - margins[i] for i in range(nd)]
    ngl = [DeviceLayers() for _ in range(nd)]
    mem = mem_for(ngl, overflow_next)

    # step 3: fill "dense" layers back to front (MoE: experts in system memory)
    for id_ in range(nd - 1, -1, -1):
        unassigned = hp_ngl + 1 - sum(ngl[j].n_layer for j in range(id_ + 1, nd))
        high = list(ngl)
        n_part = 0
        if moe:
            n_part = unassigned if id_ < nd - 1 else unassigned - 1
        high[id_] = replace(high[id_], n_layer=unassigned, n_part=n_part)
        if high[id_].n_layer > 0:
            mem_high = mem_for(high, overflow_next)
            if mem_high[id_] > targets[id_]:
                delta = high[id_].n_layer - ngl[id_].n_layer
                while delta > 1:
                    step = _step(delta, targets[id_] - mem[id_], mem_high[id_] - mem[id_])
                    test = list(ngl)
                    add_part = 0
                    if moe:
                        first_out = id_ == nd - 1 and test[id_].n_part == 0
                        add_part = step - 1 if first_out else step
                    test[id_] = replace(
                        test[id_],
                        n_layer=test[id_].n_layer + step,
                        n_part=test[id_].n_part + add_part,
                    )
                    mem_test = mem_for(test, overflow_next)
                    if mem_test[id_] <= targets[id_]:
                        ngl, mem = test, mem_test
                    else:
                        high, mem_high = test, mem_test
                    delta = high[id_].n_layer - ngl[id_].n_layer
            else:
                ngl, mem = high, mem_high

    if not moe or surplus_cpu_moe <= 0:
        return _finish(result, ngl, overflow_next, hp_ngl, mem, projected_final)

    # step 4: MoE with every dense part placed: turn dense-only layers full, front to back
    id_dense_start = nd
    for id_ in range(nd - 1, -1, -1):
        if ngl[id_].n_layer > 0:
            id_dense_start = id_
            continue
        break
    id_ = 0
    while id_ <= id_dense_start and id_dense_start < nd:
        high = list(ngl)
        for jd in range(id_dense_start, nd):
            move = high[jd].n_layer if jd < nd - 1 else high[jd].n_layer - 1
            high[id_] = replace(high[id_], n_layer=high[id_].n_layer + move)
            high[jd] = replace(high[jd], n_layer=high[jd].n_layer - move, n_part=0)
        id_dense_start_high = nd - 1
        mem_high = mem_for(high, overflow_next)
        if mem_high[id_] > targets[id_]:
            delta = high[id_].n_full - ngl[id_].n_full
            while delta > 1:
                step = _step(delta, targets[id_] - mem[id_], mem_high[id_] - mem[id_])
                test = list(ngl)
                start_test = id_dense_start
                converted = 0
                while start_test < nd:
                    n_conv = min(step - converted, test[start_test].n_part)
                    test[start_test] = replace(
                        test[start_test],
                        n_layer=test[start_test].n_layer - n_conv,
                        n_part=test[start_test].n_part - n_conv,
                    )
                    test[id_] = replace(test[id_], n_layer=test[id_].n_layer + n_conv)
                    converted += n_conv
                    if test[start_test].n_part > 0:
                        break
                    start_test += 1
                mem_test = mem_for(test, overflow_next)
                if mem_test[id_] <= targets[id_]:
                    ngl, mem, id_dense_start = test, mem_test, start_test
                else:
                    high, mem_high, id_dense_start_high = test, mem_test, start_test
                delta = high[id_].n_full - ngl[id_].n_full
        else:
            ngl, mem, id_dense_start = high, mem_high, id_dense_start_high

        # try to fit at least part of one more layer
        if id_dense_start < nd and ngl[id_dense_start].n_layer > (0 if id_ < nd - 1 else 1):
            test = list(ngl)
            start_test = id_dense_start
            test[start_test] = replace(
                test[start_test],
                n_layer=test[start_test].n_layer - 1,
                n_part=test[start_test].n_part - 1,
            )
            test[id_] = replace(
                test[id_],
                n_layer=test[id_].n_layer + 1,
                n_part=test[id_].n_part + 1,
                overflow=LayerFraction.UP,
            )
            if test[start_test].n_part == 0:
                start_test += 1
            nxt = list(overflow_next)
            if id_ < nd - 1:
                nxt[id_] = True

            mem_test = mem_for(test, nxt)
            if _below(mem_test, targets, id_):
                ngl, overflow_next, mem, id_dense_start = test, nxt, mem_test, start_test
                test = list(test)
                test[id_] = replace(test[id_], overflow=LayerFraction.GATE)
                mem_test = mem_for(test, nxt)
                if _below(mem_test, targets, id_):
                    ngl, overflow_next, mem, id_dense_start = test, nxt, mem_test, start_test
            else:
                test[id_] = replace(test[id_], overflow=LayerFraction.ATTN)
                mem_test = mem_for(test, nxt)
                if _below(mem_test, targets, id_):
                    ngl, overflow_next, mem, id_dense_start = test, nxt, mem_test, start_test
        id_ += 1

    return _finish(result, ngl, overflow_next, hp_ngl, mem, projected_final)


def _finish(
    result: Callable[..., FitDecision],
    ngl: Sequence[DeviceLayers],
    overflow_next: Sequence[bool],
    hp_ngl: int,
    mem: Sequence[int],
    projected_final: list[int],
) -> FitDecision:
    projected_final.extend(mem)
    nd = len(ngl)
    total = sum(d.n_layer for d in ngl)
    return result(
        "fitted",
        "fit params to free device memory",
        ngl=total,
        split=tuple(d.n_layer for d in ngl) if nd > 1 else (),
        overrides=_overrides(ngl, overflow_next, hp_ngl),
        layers=tuple(ngl),
    )


def _below(mem: Sequence[int], targets: Sequence[int], id_: int) -> bool:
    """The extra-layer test: strictly under the target on this device and the next."""
    nxt = id_ + 1
    return mem[id_] < targets[id_] and (nxt == len(targets) or mem[nxt] < targets[nxt])


def _div(a: int, b: int) -> int:
    """C's truncating integer division."""
    if b == 0:
        raise ZeroDivisionError("fit: division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _step(delta: int, num: int, den: int) -> int:
    """fit.cpp's false-position step: uint32(int64(delta) * num / den), clamped to
    [1, delta - 1]."""
    step = _div(delta * num, den) & UINT32_MAX
    return min(max(step, 1), delta - 1)
