"""Apple silicon: one unified memory pool, of which the GPU may wire only a part.

Metal reports `recommendedMaxWorkingSetSize`, the default limit on what the GPU keeps
resident. llama.cpp's Metal backend logs it at start-up, and those logs show the rule:
two thirds of unified memory up to 36 GiB (a 32 GB M1 Max logs 21845.34 MB, a 16 GB
Mac 10922.67 MB; ggml-org/llama.cpp#2011, abetlen/llama-cpp-python#687) and three
quarters above (64 GB M2 Max machines stop near 48 GB; ggml-org/llama.cpp#1870).
The limit can be raised with `sysctl iogpu.wired_limit_mb`, which we do not read.
"""

from __future__ import annotations

from dataclasses import dataclass

from rigspark_gui.core.rig import GIB, Basis, Gpu, Provenance, Vendor
from rigspark_gui.hardware.command import CommandRunner, run_command

LARGE_MACHINE_BYTES = 36 * GIB
LARGE_FRACTION = 0.75
SMALL_FRACTION = 2 / 3


@dataclass(frozen=True, slots=True, kw_only=True)
class AppleProbeResult:
    gpu: Gpu | None = None
    chip: str | None = None
    memory_bytes: int | None = None
    notes: tuple[str, ...] = ()


def gpu_working_set_bytes(memory_bytes: int) -> int:
    """macOS's default GPU working-set limit for a machine with `memory_bytes`."""
    fraction = LARGE_FRACTION if memory_bytes > LARGE_MACHINE_BYTES else SMALL_FRACTION
    return int(memory_bytes * fraction)


def probe_apple(runner: CommandRunner | None = None, timeout_s: float = 2.0) -> AppleProbeResult:
    """Ask sysctl for the chip and memory size; Apple silicon becomes one unified GPU."""
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

    limit = gpu_working_set_bytes(memory_bytes)
    share = "75 %" if memory_bytes > LARGE_MACHINE_BYTES else "2/3"
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
            "memory_total_bytes": Provenance(
                basis=Basis.SPEC,
                source=(
                    f"macOS default GPU working-set limit: {share} of hw.memsize "
                    f"({memory_bytes / GIB:.0f} GiB), Metal recommendedMaxWorkingSetSize "
                    "as logged by llama.cpp"
                ),
            ),
        },
    )
    return AppleProbeResult(
        gpu=gpu,
        chip=chip,
        memory_bytes=memory_bytes,
        notes=(
            f"{chip}: GPU may use about {limit / GIB:.1f} GiB of {memory_bytes / GIB:.0f} GiB "
            "unified memory (macOS default; raise with sysctl iogpu.wired_limit_mb)",
        ),
    )
