"""Memory that loads beside the model (a vision projector, a draft model): set aside on
its devices before any layer is placed, then shown as its own line.

Planning on a rig whose devices have that memory set aside (`claim`: a GPU's reserve
grows, system memory shrinks) makes every path, quantization search, KV comparison and
fit reproduction see it without each of them knowing about it. The records that come
out are then told against the real rig (`loads_beside`, `paths_beside`, `fit_beside`):
capacity and reserve back to the device's own, the memory in its own field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from rigspark_gui.core.fit import FitOutcome
from rigspark_gui.core.placement import DeviceLoad, device_capacity, load_verdict
from rigspark_gui.core.plan.paths import PathName, PathPlan
from rigspark_gui.core.rig import Rig, gpu_index

CPU = "cpu"
BytesOn = Mapping[str, int]


def claim(rig: Rig, bytes_on: BytesOn) -> Rig:
    """`rig` with `bytes_on` set aside: each GPU's reserve grows by its share, system
    memory (available, else total less the OS reserve) shrinks by the CPU's."""
    gpus = list(rig.gpus)
    for device, n in bytes_on.items():
        i = gpu_index(device)
        if i is not None and n:
            gpus[i] = replace(gpus[i], reserve_bytes=gpus[i].reserve_bytes + n)
    if gpus != list(rig.gpus):
        rig = replace(rig, gpus=tuple(gpus))
    host = bytes_on.get(CPU, 0)
    if host:
        if rig.ram_available_bytes is not None:
            rig = replace(rig, ram_available_bytes=max(rig.ram_available_bytes - host, 0))
        else:
            rig = replace(rig, ram_reserve_bytes=rig.ram_reserve_bytes + host)
    return rig


def loads_beside(
    loads: tuple[DeviceLoad, ...], bytes_on: BytesOn, rig: Rig, field: str
) -> tuple[DeviceLoad, ...]:
    """Loads tallied on a claimed rig, told against the real `rig` with `bytes_on` in
    `field` (projector_bytes, draft_bytes). A GPU that holds only this memory still has
    its backend context (its reserve)."""
    if not any(bytes_on.values()):
        return loads
    out = []
    for x in loads:
        add = bytes_on.get(x.device, 0)
        if not add:
            out.append(x)
            continue
        x = replace(x, **{field: getattr(x, field) + add})
        capacity, reserve = device_capacity(rig, x.device)
        total = x.required_bytes + reserve
        out.append(
            replace(
                x,
                reserve_bytes=reserve,
                capacity_bytes=capacity,
                total_bytes=total,
                verdict=load_verdict(total - reserve, max(capacity - reserve, 0)),
            )
        )
    return tuple(out)


def paths_beside(
    paths: tuple[PathPlan, ...], bytes_on: BytesOn, field: str
) -> tuple[PathPlan, ...]:
    """Each path's required and usable memory with `bytes_on` counted on its devices
    (planned with it set aside, so whether a path fits does not change), and its
    breakdown's `field` (a GPU's share was in the path's reserve)."""
    if not any(bytes_on.values()):
        return paths
    out = []
    for p in paths:
        # system memory counts on the paths that plan it (cpu, cpu-offload)
        ram = p.path in (PathName.CPU, PathName.CPU_OFFLOAD)
        on = {d: b for d, b in bytes_on.items() if d in p.devices and (d != CPU or ram)}
        add = sum(on.values())
        if not add:
            out.append(p)
            continue
        b = p.breakdown
        gpu_share = sum(v for d, v in on.items() if d != CPU)
        breakdown = replace(
            b,
            reserve_bytes=max(b.reserve_bytes - gpu_share, 0),
            **{field: getattr(b, field) + add},
        )
        out.append(
            replace(
                p,
                required_bytes=p.required_bytes + add,
                usable_bytes=p.usable_bytes + add,
                breakdown=breakdown,
            )
        )
    return tuple(out)


def fit_beside(fit: FitOutcome | None, bytes_on: BytesOn, *, margin: bool) -> FitOutcome | None:
    """Fit's device rows with the free memory as llama.cpp reads it and `bytes_on` where
    llama.cpp counts it: in the margin (`margin`: llama-server's projector,
    `fit_params_target[i] += size`) or in the projection (a draft model, measured with
    the target by `common_fit_extra_model`)."""
    if fit is None or not any(bytes_on.values()):
        return fit
    rows = []
    for d in fit.devices:
        add = bytes_on.get(d.device, 0) if d.device != CPU else 0
        if add and margin:
            d = replace(d, free_bytes=d.free_bytes + add, margin_bytes=d.margin_bytes + add)
        elif add:
            d = replace(d, free_bytes=d.free_bytes + add, projected_bytes=d.projected_bytes + add)
        rows.append(d)
    return replace(fit, devices=tuple(rows))
