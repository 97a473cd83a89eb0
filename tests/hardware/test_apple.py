from __future__ import annotations

import subprocess
from collections.abc import Sequence

import pytest

from rigspark_gui.core.rig import GIB, Basis, Vendor
from rigspark_gui.hardware.apple import gpu_working_set_bytes, probe_apple
from rigspark_gui.hardware.command import CommandRunner


def _sysctl(output: str) -> tuple[list[tuple[list[str], float]], CommandRunner]:
    calls: list[tuple[list[str], float]] = []

    def runner(args: Sequence[str], timeout_s: float) -> str:
        calls.append((list(args), timeout_s))
        return output

    return calls, runner


def test_m2_ultra_192_gb_gets_three_quarters_as_gpu_memory() -> None:
    calls, runner = _sysctl("Apple M2 Ultra\n206158430208\n")

    result = probe_apple(runner)

    assert calls == [(["sysctl", "-n", "machdep.cpu.brand_string", "hw.memsize"], 2.0)]
    gpu = result.gpu
    assert gpu is not None
    assert gpu.name == "Apple M2 Ultra" and gpu.vendor is Vendor.APPLE and gpu.unified
    assert gpu.memory_total_bytes == 144 * GIB
    prov = gpu.basis_of("memory_total_bytes")
    assert prov.basis is Basis.SPEC
    assert "recommendedMaxWorkingSetSize" in prov.source and "75 %" in prov.source
    assert result.memory_bytes == 192 * GIB
    assert "144.0 GiB" in result.notes[0]


@pytest.mark.parametrize(
    ("memory_gib", "limit_bytes"),
    [
        (16, 10922.67 * 1024 * 1024),  # llama.cpp log on a 16 GB Mac: 10922.67 MB
        (32, 21845.34 * 1024 * 1024),  # on a 32 GB M1 Max: 21845.34 MB
        (36, 24 * GIB),
        (64, 48 * GIB),
    ],
)
def test_working_set_rule(memory_gib: int, limit_bytes: float) -> None:
    assert gpu_working_set_bytes(memory_gib * GIB) == pytest.approx(limit_bytes, rel=1e-5)


def test_intel_mac_has_no_unified_gpu() -> None:
    _, runner = _sysctl("Intel(R) Core(TM) i9-9980HK CPU @ 2.40GHz\n34359738368\n")

    result = probe_apple(runner)

    assert result.gpu is None and result.memory_bytes == 32 * GIB


@pytest.mark.parametrize(
    "error", [subprocess.TimeoutExpired(["sysctl"], 2.0), FileNotFoundError("sysctl")]
)
def test_sysctl_failure_is_a_note(error: Exception) -> None:
    def runner(args: Sequence[str], timeout_s: float) -> str:
        raise error

    result = probe_apple(runner)

    assert result.gpu is None
    assert result.notes[0].startswith("Apple probe failed")


def test_garbled_output_is_a_note() -> None:
    _, runner = _sysctl("Apple M2 Ultra\n")

    assert probe_apple(runner).notes[0].startswith("Apple probe failed")
