"""Turn this machine into a `Rig`: every probe bounded in time and never fatal.

The probes run side by side in daemon threads. A probe that raises or outlives the
timeout becomes a note on the rig; a daemon thread is used because a call stuck inside
a driver cannot be cancelled and must not keep the application from exiting.

The GPU database lives in `catalog`, which this layer may not import (the import-linter
layers contract keeps hardware and catalog independent), so it is passed in and only
its shape is known here.
"""

from __future__ import annotations

import platform
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from rigspark_gui.core.device_overhead import DeviceOverheadTable
from rigspark_gui.core.rig import VM_FEATURE, Basis, Cpu, Gpu, Provenance, Rig
from rigspark_gui.hardware import (
    amd,
    apple,
    bandwidth_cache,
    bandwidth_probe,
    core_probe,
    cpu,
    nvidia,
)
from rigspark_gui.hardware.overhead import detected_with_overhead

T = TypeVar("T")


class GpuFiller(Protocol):
    """What detection needs from the GPU database (`catalog.gpu_database.GpuDatabase`)."""

    def fill_with_note(self, gpu: Gpu) -> tuple[Gpu, str | None]: ...

    def name_for_pci(self, vendor_id: int, device_id: int) -> str | None: ...


@dataclass
class _Outcome(Generic[T]):
    value: T | None = None
    error: BaseException | None = None
    done: bool = False


class _Probe(Generic[T]):
    def __init__(self, label: str, fn: Callable[[], T]) -> None:
        self.label = label
        self._fn = fn
        self._outcome: _Outcome[T] = _Outcome()
        self._thread = threading.Thread(
            target=self._run, name=f"rigspark-probe-{label}", daemon=True
        )

    def _run(self) -> None:
        try:
            self._outcome.value = self._fn()
        except BaseException as exc:  # a probe must never take detection down
            self._outcome.error = exc
        finally:
            self._outcome.done = True

    def start(self) -> _Probe[T]:
        self._thread.start()
        return self

    def result(self, deadline: float, timeout_s: float, notes: list[str]) -> T | None:
        self._thread.join(max(deadline - time.monotonic(), 0.0))
        if not self._outcome.done:
            notes.append(f"{self.label} probe timed out after {timeout_s:g} s")
            return None
        if self._outcome.error is not None:
            err = self._outcome.error
            notes.append(f"{self.label} probe failed: {str(err) or type(err).__name__}")
            return None
        return self._outcome.value


def _devices(label: str, read: Callable[[], tuple[Gpu, ...]], notes: list[str]) -> list[Gpu]:
    """A probe's GPUs; one the Rig model refuses costs that probe's GPUs, not detection."""
    try:
        return list(read())
    except Exception as exc:
        notes.append(f"{label} probe failed: {str(exc) or type(exc).__name__}")
        return []


def detect(
    *,
    database: GpuFiller | None = None,
    timeout_s: float = 5.0,
    models_dir: Path | None = None,
    probe_bandwidth: bool = False,
    cached_bandwidth: bool = True,
    system: str | None = None,
    sysfs_root: Path = Path("/sys"),
    overhead: DeviceOverheadTable | None = None,
) -> Rig:
    """Detect GPUs, CPU, RAM and disk; fill GPU figures from `database` when given.

    RAM bandwidth: measured when `probe_bandwidth` (and then kept for this machine), else
    taken from this machine's earlier measurement when `cached_bandwidth`.
    `system` (as `platform.system()` names it) and `sysfs_root` exist for tests.
    Each GPU's reserve is its backend's context from `overhead` (default: the program's
    data/device_overhead.json), the figure every plan then subtracts.
    """
    system = system or platform.system()
    notes: list[str] = []
    name_for_pci = database.name_for_pci if database is not None else None

    nvidia_probe = _Probe("NVIDIA", nvidia.probe_nvidia).start()
    cpu_probe = _Probe("CPU", lambda: cpu.probe_cpu(models_dir, system=system)).start()
    sysfs_probe = (
        _Probe(
            "AMD/Intel", lambda: amd.probe_sysfs_gpus(sysfs_root, name_for_pci=name_for_pci)
        ).start()
        if system == "Linux"
        else None
    )
    apple_probe = (
        _Probe("Apple", lambda: apple.probe_apple(table=overhead)).start()
        if system == "Darwin"
        else None
    )
    bandwidth = (
        _Probe("RAM bandwidth", bandwidth_probe.measure_ram_bandwidth).start()
        if probe_bandwidth
        else None
    )

    deadline = time.monotonic() + timeout_s
    gpus: list[Gpu] = []
    nv = nvidia_probe.result(deadline, timeout_s, notes)
    if nv is not None:
        gpus.extend(_devices("NVIDIA", lambda: nv.gpus, notes))
        notes.extend(nv.notes)
    if sysfs_probe is not None:
        sysfs = sysfs_probe.result(deadline, timeout_s, notes)
        if sysfs is not None:
            gpus.extend(_devices("AMD/Intel", lambda: sysfs.gpus, notes))
            notes.extend(sysfs.notes)
    unified_memory = False
    if apple_probe is not None:
        mac = apple_probe.result(deadline, timeout_s, notes)
        if mac is not None:
            notes.extend(mac.notes)
            if mac.gpu is not None:
                gpus.append(mac.gpu)
                unified_memory = True

    if database is not None:
        filled: list[Gpu] = []
        for gpu in gpus:
            try:
                gpu, note = database.fill_with_note(gpu)
            except Exception as exc:  # a figure the database contradicts: keep the GPU as read
                note = f"{gpu.name}: GPU database figures not applied ({exc})"
            filled.append(gpu)
            if note and note not in notes:
                notes.append(note)
        gpus = filled

    host = cpu_probe.result(deadline, timeout_s, notes)
    bw = bandwidth.result(deadline, timeout_s, notes) if bandwidth is not None else None

    rig_prov: dict[str, Provenance] = {}
    if host is not None:
        cpu_model = host.cpu
        key = bandwidth_cache.machine_key(cpu_model.name, cpu_model.cores, host.ram_total_bytes)
        if bw is not None:
            bw = keep_bandwidth(key, bw)
        if bw is None and cached_bandwidth:
            hit = bandwidth_cache.cached_bandwidth(key)
            if hit is not None:
                cpu_model = replace(
                    cpu_model,
                    memory_bandwidth_gbps=hit[0],
                    provenance={**cpu_model.provenance, "memory_bandwidth_gbps": hit[1]},
                )
        if cached_bandwidth and VM_FEATURE in cpu_model.features:
            cores_hit = bandwidth_cache.cached_compute_cores(key)
            if cores_hit is not None:
                cpu_model = with_compute_cores(cpu_model, *cores_hit)
        if bw is not None:
            cpu_model = replace(
                cpu_model,
                memory_bandwidth_gbps=bw.bandwidth_gbps,
                provenance={**cpu_model.provenance, "memory_bandwidth_gbps": bw.provenance},
            )
            if VM_FEATURE in cpu_model.features:  # measured with it: the vCPUs timed too
                cpu_model = _measured_compute_cores(key, cpu_model)
        rig_prov.update(host.provenance)
        notes.extend(host.notes)
        ram_total = host.ram_total_bytes
        ram_available = host.ram_available_bytes
        disk_free = host.disk_free_bytes
    else:
        cpu_model = Cpu()
        ram_total = ram_available = disk_free = None
    if ram_total is None:
        # Rig requires a number; 0 with an unknown basis tells the planner not to trust it.
        rig_prov["ram_total_bytes"] = Provenance(basis=Basis.UNKNOWN, source="not detected")
        notes.append("RAM size could not be detected")
    if unified_memory:
        rig_prov["unified_memory"] = Provenance(basis=Basis.MEASURED, source="Apple silicon")

    rig = Rig(
        name="This machine",
        gpus=tuple(gpus),
        ram_total_bytes=ram_total or 0,
        ram_available_bytes=ram_available if ram_total else None,
        cpu=cpu_model,
        disk_free_bytes=disk_free,
        unified_memory=unified_memory,
        provenance=rig_prov,
    )
    rig = detected_with_overhead(rig, system, overhead, notes)
    return replace(rig, notes=tuple(notes))


def to_json(rig: Rig) -> str:
    from rigspark_gui.formats.rig import rig_json

    return rig_json(rig)


def machine_key_of(rig: Rig) -> str:
    return bandwidth_cache.machine_key(rig.cpu.name, rig.cpu.cores, rig.ram_total_bytes)


def keep_bandwidth(
    key: str, result: bandwidth_probe.BandwidthResult
) -> bandwidth_probe.BandwidthResult:
    """Keep a measurement for this machine: a calm one as its figure; a busy one apart,
    the figure to use being the best of the busy runs so far (a busy machine only ever
    lowers it)."""
    if not result.busy:
        bandwidth_cache.store_bandwidth(
            key, result.bandwidth_gbps, result.provenance.source, result.spread
        )
        return result
    earlier = bandwidth_cache.busy_bandwidth(key)
    if earlier is None or earlier[0] <= result.bandwidth_gbps:
        bandwidth_cache.store_bandwidth(
            key, result.bandwidth_gbps, result.provenance.source, result.spread, busy=True
        )
        return result
    source = f"{earlier[1]}; the best of the busy runs so far (now: {result.reason})"
    return replace(
        result,
        bandwidth_gbps=earlier[0],
        provenance=replace(result.provenance, source=source),
    )


def with_measured_bandwidth(rig: Rig) -> tuple[Rig, bandwidth_probe.BandwidthResult]:
    """`rig` with this machine's RAM bandwidth measured now, kept for later runs. A busy
    machine's figure is marked unreliable and kept apart: the next run measures again, and
    the best figure of the busy runs so far is used (a busy machine only ever lowers it),
    so one burst of other work does not change the answer from run to run."""
    key = machine_key_of(rig)
    result = keep_bandwidth(key, bandwidth_probe.measure_ram_bandwidth())
    cpu_model = replace(
        rig.cpu,
        memory_bandwidth_gbps=result.bandwidth_gbps,
        provenance={**rig.cpu.provenance, "memory_bandwidth_gbps": result.provenance},
    )
    if VM_FEATURE in cpu_model.features:
        cpu_model = _measured_compute_cores(key, cpu_model)
    return replace(rig, cpu=cpu_model), result


def with_compute_cores(cpu_model: Cpu, cores: float, prov: Provenance) -> Cpu:
    return replace(
        cpu_model, compute_cores=cores, provenance={**cpu_model.provenance, "compute_cores": prov}
    )


def _measured_compute_cores(key: str, cpu_model: Cpu) -> Cpu:
    """A VM's vCPUs timed together (core_probe): whole cores, or hyperthread pairs that
    give about half their count. A figure measured while other work ran is used for now
    (the share of an unmeasured VM is a guess that is lower still) but not kept: the next
    run measures again."""
    cores = cpu_model.cores or cpu_model.threads or bandwidth_probe.physical_cores()
    scaling = core_probe.measure_core_scaling(cores)
    compute = scaling.compute_cores(cores)
    if not scaling.busy:
        bandwidth_cache.store_compute_cores(key, compute, scaling.provenance.source)
    return with_compute_cores(cpu_model, compute, scaling.provenance)


def needs_measuring(cpu_model: Cpu) -> bool:
    """Whether this machine still lacks a measurement CPU speed rests on: its RAM
    bandwidth, or on a VM the vCPUs' cores' worth (one measurement takes both)."""
    if cpu_model.memory_bandwidth_gbps is None:
        return True
    return VM_FEATURE in cpu_model.features and cpu_model.compute_cores is None
