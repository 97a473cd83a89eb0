"""The host: RAM, cores, CPU model name and free disk where models are kept (psutil)."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from rigspark_gui.core.rig import VM_FEATURE, Basis, Cpu, Provenance
from rigspark_gui.hardware.command import CommandRunner, run_command

_PSUTIL = Provenance(basis=Basis.MEASURED, source="psutil")
_SYSCTL_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuProbeResult:
    cpu: Cpu
    ram_total_bytes: int | None = None
    ram_available_bytes: int | None = None
    disk_free_bytes: int | None = None
    disk_path: str | None = None
    # Provenance of the Rig-level figures (ram_*, disk_free_bytes).
    provenance: dict[str, Provenance] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _unknown(reason: str) -> Provenance:
    return Provenance(basis=Basis.UNKNOWN, source=reason)


# Beyond these a figure is a broken platform layer, not a machine; it becomes unknown
# rather than a plan built on it (and a negative size would fail the Rig's validation).
_MAX_BYTES = 1 << 52  # 4 PiB
_MAX_CPUS = 1 << 16


def _count(value: object, hi: int, what: str) -> int:
    """A positive integer no larger than `hi`, or ValueError saying what was wrong."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} is not a number ({value!r:.40})")
    if not 0 < value <= hi:
        raise ValueError(f"{what} {value} is out of range")
    return value


def cpu_features(cpuinfo_path: Path = Path("/proc/cpuinfo")) -> tuple[str, ...]:
    """The instruction sets llama.cpp's CPU backend repacks weights for (Linux flags line).

    avx512 means AVX-512F; elsewhere (macOS, Windows) nothing is reported and the
    planner counts no CPU_REPACK buffer. The speed model also reads the dot-product
    extensions its per-ISA costs are fitted for: avx512_vnni (VNNI or BF16), amx (AMX-INT8)
    and, on Arm (the "Features" line), sve; and hypervisor, a virtual machine's vCPUs."""
    try:
        text = cpuinfo_path.read_text(encoding="utf-8", errors="replace")[: 1 << 20]
    except OSError:
        return ()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            flags = set(value.split())
            found = [f for f in ("avx2",) if f in flags]
            if "avx512f" in flags:
                found.append("avx512")
                if flags & {"avx512_vnni", "avx512_bf16"}:
                    found.append("avx512_vnni")
            if "amx_int8" in flags:
                found.append("amx")
            if "hypervisor" in flags:
                found.append(VM_FEATURE)  # vCPUs: host threads, not physical cores
            return tuple(found)
        if sep and key.strip() == "Features":
            return ("sve",) if "sve" in value.split() else ()
    return ()


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
        ram_total = _count(vm.total, _MAX_BYTES, "total RAM")
        rig_prov["ram_total_bytes"] = _PSUTIL
    except Exception as exc:
        reason = f"psutil: {exc}"
        rig_prov["ram_total_bytes"] = rig_prov["ram_available_bytes"] = _unknown(reason)
        notes.append(f"RAM size unknown ({reason})")
    else:
        try:
            available = vm.available
            if isinstance(available, int) and not isinstance(available, bool) and available == 0:
                ram_available = 0  # a machine out of memory says so; that is not nonsense
            else:
                ram_available = _count(available, _MAX_BYTES, "available RAM")
            # psutil can report available a little above total on some kernels.
            ram_available = min(ram_available, ram_total)
            rig_prov["ram_available_bytes"] = _PSUTIL
        except Exception as exc:
            rig_prov["ram_available_bytes"] = _unknown(f"psutil: {exc}")
            notes.append(f"available RAM unknown (psutil: {exc})")

    cores: int | None = None
    threads: int | None = None
    for logical, count_name in ((False, "cores"), (True, "threads")):
        try:
            raw = psutil.cpu_count(logical=logical)
            if raw is None:
                cpu_prov[count_name] = _unknown("psutil: not reported")
                continue
            value = _count(raw, _MAX_CPUS, f"CPU {count_name}")
            cpu_prov[count_name] = _PSUTIL
        except Exception as exc:
            cpu_prov[count_name] = _unknown(f"psutil: {exc}")
            continue
        if logical:
            threads = value
        else:
            cores = value

    name = cpu_model_name(system, cpuinfo_path=cpuinfo_path, runner=runner)
    cpu_prov["name"] = (
        Provenance(basis=Basis.MEASURED, source="operating system")
        if name
        else _unknown("the operating system does not name the CPU")
    )

    disk_free: int | None = None
    target = _existing_dir(models_dir if models_dir is not None else Path.home())
    try:
        free = psutil.disk_usage(str(target)).free
        disk_free = 0 if free == 0 else _count(free, _MAX_BYTES, "free disk")
        rig_prov["disk_free_bytes"] = Provenance(basis=Basis.MEASURED, source=f"psutil: {target}")
    except Exception as exc:
        rig_prov["disk_free_bytes"] = _unknown(f"psutil: {exc}")
        notes.append(f"free disk of {target} unknown ({exc})")

    return CpuProbeResult(
        cpu=Cpu(
            name=name or "CPU",
            cores=cores,
            threads=threads,
            features=cpu_features(cpuinfo_path) if (system or platform.system()) == "Linux" else (),
            provenance=cpu_prov,
        ),
        ram_total_bytes=ram_total,
        ram_available_bytes=ram_available,
        disk_free_bytes=disk_free,
        disk_path=str(target),
        provenance=rig_prov,
        notes=tuple(notes),
    )
