"""The host: RAM, cores, CPU model name and free disk where models are kept (psutil)."""

from __future__ import annotations

import platform
from pathlib import Path

import psutil
from pydantic import BaseModel, ConfigDict, Field

from rigspark_gui.core.rig import Basis, Cpu, Provenance
from rigspark_gui.hardware.command import CommandRunner, run_command

_PSUTIL = Provenance(basis=Basis.MEASURED, source="psutil")
_SYSCTL_TIMEOUT_S = 2.0


class CpuProbeResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    cpu: Cpu
    ram_total_bytes: int | None = None
    ram_available_bytes: int | None = None
    disk_free_bytes: int | None = None
    disk_path: str | None = None
    # Provenance of the Rig-level figures (ram_*, disk_free_bytes).
    provenance: dict[str, Provenance] = Field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _unknown(reason: str) -> Provenance:
    return Provenance(basis=Basis.UNKNOWN, source=reason)


def _linux_model_name(cpuinfo_path: Path) -> str | None:
    try:
        text = cpuinfo_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "model name" and value.strip():
            return value.strip()
    return None


def cpu_model_name(
    system: str | None = None,
    *,
    cpuinfo_path: Path = Path("/proc/cpuinfo"),
    runner: CommandRunner | None = None,
) -> str | None:
    """The marketing name of the CPU, or None when the platform does not say."""
    system = system or platform.system()
    name: str | None = None
    if system == "Linux":
        # ARM boards often have no "model name" line; fall through to platform.
        name = _linux_model_name(cpuinfo_path)
    elif system == "Darwin":
        try:
            out = (runner or run_command)(
                ["sysctl", "-n", "machdep.cpu.brand_string"], _SYSCTL_TIMEOUT_S
            )
            name = out.strip() or None
        except Exception:
            name = None
    if not name:
        name = platform.processor().strip() or None
    return name[:200] if name else None


def _existing_dir(path: Path) -> Path:
    # A models folder that does not exist yet will be created on the same disk as its
    # nearest existing parent, so that is the disk to measure.
    path = path.expanduser()
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return path


def probe_cpu(
    models_dir: Path | None = None,
    *,
    system: str | None = None,
    cpuinfo_path: Path = Path("/proc/cpuinfo"),
    runner: CommandRunner | None = None,
) -> CpuProbeResult:
    """Read RAM, cores and disk; a figure psutil cannot give stays None with a reason."""
    rig_prov: dict[str, Provenance] = {}
    cpu_prov: dict[str, Provenance] = {}
    notes: list[str] = []

    ram_total: int | None = None
    ram_available: int | None = None
    try:
        vm = psutil.virtual_memory()
        ram_total, ram_available = int(vm.total), min(int(vm.available), int(vm.total))
        rig_prov["ram_total_bytes"] = rig_prov["ram_available_bytes"] = _PSUTIL
    except Exception as exc:
        reason = f"psutil: {exc}"
        rig_prov["ram_total_bytes"] = rig_prov["ram_available_bytes"] = _unknown(reason)
        notes.append(f"RAM size unknown ({reason})")

    cores: int | None = None
    threads: int | None = None
    try:
        cores = psutil.cpu_count(logical=False) or None
        cpu_prov["cores"] = _PSUTIL if cores else _unknown("psutil: not reported")
    except Exception as exc:
        cpu_prov["cores"] = _unknown(f"psutil: {exc}")
    try:
        threads = psutil.cpu_count(logical=True) or None
        cpu_prov["threads"] = _PSUTIL if threads else _unknown("psutil: not reported")
    except Exception as exc:
        cpu_prov["threads"] = _unknown(f"psutil: {exc}")

    name = cpu_model_name(system, cpuinfo_path=cpuinfo_path, runner=runner)
    cpu_prov["name"] = (
        Provenance(basis=Basis.MEASURED, source="operating system")
        if name
        else _unknown("the operating system does not name the CPU")
    )

    disk_free: int | None = None
    target = _existing_dir(models_dir if models_dir is not None else Path.home())
    try:
        disk_free = int(psutil.disk_usage(str(target)).free)
        rig_prov["disk_free_bytes"] = Provenance(basis=Basis.MEASURED, source=f"psutil: {target}")
    except Exception as exc:
        rig_prov["disk_free_bytes"] = _unknown(f"psutil: {exc}")
        notes.append(f"free disk of {target} unknown ({exc})")

    return CpuProbeResult(
        cpu=Cpu(name=name or "CPU", cores=cores, threads=threads, provenance=cpu_prov),
        ram_total_bytes=ram_total,
        ram_available_bytes=ram_available,
        disk_free_bytes=disk_free,
        disk_path=str(target),
        provenance=rig_prov,
        notes=tuple(notes),
    )
