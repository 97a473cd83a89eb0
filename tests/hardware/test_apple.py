from __future__ import annotations

import subprocess
from collections.abc import Sequence

import pytest

from rigspark_gui.core.device_overhead import WORKING_SET_MARK
from rigspark_gui.core.rig import GIB, MIB, Basis, Vendor
from rigspark_gui.hardware.apple import gpu_working_set_bytes, probe_apple
from rigspark_gui.hardware.command import CommandRunner

BRAND = ["sysctl", "-n", "machdep.cpu.brand_string", "hw.memsize"]
WIRED = ["sysctl", "-n", "iogpu.wired_limit_mb"]


def _sysctl(
    output: str, wired: str | Exception = "0\n"
) -> tuple[list[tuple[list[str], float]], CommandRunner]:
    """A fake sysctl: the chip and memory for the first call, the wired limit for the
    second (or the error a macOS without the key raises)."""
    calls: list[tuple[list[str], float]] = []

    def runner(args: Sequence[str], timeout_s: float) -> str:
        calls.append((list(args), timeout_s))
        if list(args) == WIRED:
            if isinstance(wired, Exception):
                raise wired
            return wired
        return output

    return calls, runner


def test_m2_ultra_192_gb_gets_three_quarters_as_gpu_memory() -> None:
    calls, runner = _sysctl("Apple M2 Ultra\n206158430208\n")

    result = probe_apple(runner)

    assert calls == [(BRAND, 2.0), (WIRED, 2.0)]
    gpu = result.gpu
    assert gpu is not None
    assert gpu.name == "Apple M2 Ultra" and gpu.vendor is Vendor.APPLE and gpu.unified
    assert gpu.memory_total_bytes == 144 * GIB
    prov = gpu.basis_of("memory_total_bytes")
    assert prov.basis is Basis.SPEC
    assert prov.source.startswith(WORKING_SET_MARK) and "3/4" in prov.source
    assert "iogpu.wired_limit_mb" in prov.source
    assert result.memory_bytes == 192 * GIB and result.wired_limit_mb == 0
    assert "144.0 GiB" in result.notes[0] and "macOS default" in result.notes[0]


def test_wired_limit_override_is_the_gpu_memory() -> None:
    # antirez/ds4#893: iogpu.wired_limit_mb = 114688 makes a 128 GiB Mac report 112 GiB.
    _, runner = _sysctl("Apple M5 Max\n137438953472\n", wired="114688\n")

    result = probe_apple(runner)

    assert result.gpu is not None
    assert result.gpu.memory_total_bytes == 114688 * MIB == 112 * GIB
    prov = result.gpu.basis_of("memory_total_bytes")
    assert prov.basis is Basis.MEASURED and "iogpu.wired_limit_mb = 114688" in prov.source
    assert result.wired_limit_mb == 114688
    assert "set by sysctl iogpu.wired_limit_mb = 114688" in result.notes[0]


def test_128_gib_mac_uses_the_macos_26_reading() -> None:
    # antirez/ds4#893: 107.52 GiB stock on a 128 GiB Mac, not 3/4 (96 GiB).
    _, runner = _sysctl("Apple M5 Max\n137438953472\n")

    gpu = probe_apple(runner).gpu

    assert gpu is not None
    assert gpu.memory_total_bytes == pytest.approx(107.52 * GIB, abs=1)
    assert "antirez/ds4#893" in gpu.basis_of("memory_total_bytes").source


def test_macos_without_the_wired_limit_key_keeps_the_default() -> None:
    error = subprocess.CalledProcessError(1, WIRED)
    _, runner = _sysctl("Apple M1\n17179869184\n", wired=error)

    result = probe_apple(runner)

    assert result.gpu is not None and result.wired_limit_mb is None
    assert result.gpu.memory_total_bytes == pytest.approx(10922.67 * MIB, abs=1)
    assert any("iogpu.wired_limit_mb not read" in n for n in result.notes)


@pytest.mark.parametrize(
    ("memory_gib", "limit_bytes"),
    [
        (16, 10922.67 * 1024 * 1024),  # llama-cpp-python#687 on a 16 GB Mac: 10922.67 MB
        (32, 21845.34 * 1024 * 1024),  # llama.cpp#2011 on a 32 GB M1 Max: 21845.34 MB
        (36, 24 * GIB),
        (64, 48 * GIB),  # llama.cpp#1870: 49152.00 MiB
        (96, 72 * GIB),  # llama.cpp#3213: 73728 MB
    ],
)
def test_working_set_rule(memory_gib: int, limit_bytes: float) -> None:
    assert gpu_working_set_bytes(memory_gib * GIB) == pytest.approx(limit_bytes, rel=1e-5)


def test_intel_mac_has_no_unified_gpu() -> None:
    calls, runner = _sysctl("Intel(R) Core(TM) i9-9980HK CPU @ 2.40GHz\n34359738368\n")

    result = probe_apple(runner)

    assert result.gpu is None and result.memory_bytes == 32 * GIB
    assert calls == [(BRAND, 2.0)]  # no GPU to size: the wired limit is not read


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


@pytest.mark.parametrize("garbage", ["-5\n", "lots\n", "999999999999\n"])
def test_garbled_wired_limit_is_ignored(garbage: str) -> None:
    _, runner = _sysctl("Apple M2 Max\n68719476736\n", wired=garbage)

    result = probe_apple(runner)

    assert result.gpu is not None and result.gpu.memory_total_bytes == 48 * GIB
    assert any("unexpected output" in n for n in result.notes)
