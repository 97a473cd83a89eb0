"""Apple silicon: one unified memory pool, of which the GPU may wire only a part.

Metal reports `recommendedMaxWorkingSetSize`, the limit on what the GPU keeps resident,
and llama.cpp's Metal backend takes it as the device's memory (ggml-metal-device.m,
ggml_metal_device_get_memory). macOS's default depends on the RAM size; `sysctl
iogpu.wired_limit_mb` (0 = default) replaces it, and recommendedMaxWorkingSetSize then
reports the new limit. The readings and the rule, each with its source, are in
data/device_overhead.json (core/device_overhead.py, `apple_working_set`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rigspark_gui.core.device_overhead import DeviceOverheadTable, apple_working_set
from rigspark_gui.core.rig import GIB, Basis, Gpu, Provenance, Vendor
from rigspark_gui.hardware.command import CommandRunner, run_command

WIRED_LIMIT_KEY = "iogpu.wired_limit_mb"
# no Mac has more: a larger figure is a misread, not a limit
_MAX_WIRED_LIMIT_MB = 1 << 24


@dataclass(frozen=True, slots=True, kw_only=True)
class AppleProbeResult:
    gpu: Gpu | None = None
    chip: str | None = None
    memory_bytes: int | None = None
    # sysctl iogpu.wired_limit_mb: 0 = macOS's default, None = not read
    wired_limit_mb: int | None = None
    notes: tuple[str, ...] = ()


def _table(table: DeviceOverheadTable | None) -> DeviceOverheadTable:
    if table is not None:
        return table
    from rigspark_gui.hardware.overhead import shipped_table

    return shipped_table()


def gpu_working_set_bytes(
    memory_bytes: int, wired_limit_mb: int = 0, table: DeviceOverheadTable | None = None
) -> int:
    """The Metal device's memory on a Mac with `memory_bytes` of RAM."""
    return apple_working_set(_table(table), memory_bytes, wired_limit_mb)[0]


def read_wired_limit_mb(run: CommandRunner, timeout_s: float) -> tuple[int | None, str | None]:
    """`sysctl -n iogpu.wired_limit_mb` (macOS 14 and later), or None and why not."""
    try:
        out = run(["sysctl", "-n", WIRED_LIMIT_KEY], timeout_s).strip()
    except Exception as exc:  # older macOS has no such key: the default applies
        return None, f"{WIRED_LIMIT_KEY} not read ({str(exc) or type(exc).__name__})"
    if not out.isdigit() or int(out) > _MAX_WIRED_LIMIT_MB:
        return None, f"{WIRED_LIMIT_KEY} not read (unexpected output {out[:40]!r})"
    return int(out), None


def probe_apple(
    runner: CommandRunner | None = None,
    timeout_s: float = 2.0,
    table: DeviceOverheadTable | None = None,
) -> AppleProbeResult:
    """Ask sysctl for the chip, memory size and wired limit; Apple silicon becomes one
    unified GPU whose memory is its Metal working set."""
    run = runner or run_command
    try:
        out = run(["sysctl", "-n", "machdep.cpu.brand_string", "hw.memsize"], timeout_s)
    except Exception as exc:
        return AppleProbeResult(
            notes=(f"Apple probe failed: sysctl ({str(exc) or type(exc).__name__})",)
        )
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if len(lines) < 2 or not lines[1].isdigit():
        return AppleProbeResult(notes=(f"Apple probe failed: unexpected sysctl output {out!r}",))
    chip, memory_bytes = lines[0][:200], int(lines[1])
    if not chip.startswith("Apple"):
        # An Intel Mac: its GPU (if any) has its own VRAM, which sysctl does not show.
        return AppleProbeResult(
            chip=chip,
            memory_bytes=memory_bytes,
            notes=(f"{chip}: not Apple silicon, no unified-memory GPU",),
        )

    wired, wired_note = read_wired_limit_mb(run, timeout_s)
    limit, basis = apple_working_set(_table(table), memory_bytes, wired or 0)
    # the override is read from this machine; the default is a sourced rule or reading
    limit_basis = Basis.MEASURED if wired else Basis.SPEC
    gpu = Gpu(
        name=chip,
        vendor=Vendor.APPLE,
        index=0,
        memory_total_bytes=limit,
        unified=True,
        provenance={
            "name": Provenance(basis=Basis.MEASURED, source="sysctl machdep.cpu.brand_string"),
            "vendor": Provenance(basis=Basis.MEASURED, source="sysctl machdep.cpu.brand_string"),
            "unified": Provenance(basis=Basis.MEASURED, source="Apple silicon"),
            "memory_total_bytes": Provenance(basis=limit_basis, source=basis),
        },
    )
    how = (
        f"set by sysctl {WIRED_LIMIT_KEY} = {wired}"
        if wired
        else f"macOS default; raise with sysctl {WIRED_LIMIT_KEY}"
    )
    notes = [
        f"{chip}: GPU may use about {limit / GIB:.1f} GiB of {memory_bytes / GIB:.0f} GiB "
        f"unified memory ({how})"
    ]
    if wired_note:
        notes.append(wired_note)
    return AppleProbeResult(
        gpu=gpu,
        chip=chip,
        memory_bytes=memory_bytes,
        wired_limit_mb=wired,
        notes=tuple(notes),
    )
