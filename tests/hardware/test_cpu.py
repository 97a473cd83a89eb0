from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rigspark_gui.core.rig import Basis
from rigspark_gui.hardware.cpu import cpu_model_name, probe_cpu


def test_reads_this_machine(tmp_path: Path) -> None:
    result = probe_cpu(tmp_path)

    assert result.ram_total_bytes is not None and result.ram_total_bytes > 0
    assert result.ram_available_bytes is not None
    assert 0 < result.ram_available_bytes <= result.ram_total_bytes
    assert result.cpu.threads is not None and result.cpu.threads >= 1
    assert result.disk_free_bytes is not None and result.disk_free_bytes > 0
    assert result.provenance["ram_total_bytes"].basis is Basis.MEASURED
    assert result.provenance["disk_free_bytes"].basis is Basis.MEASURED


def test_missing_models_folder_measures_its_nearest_parent(tmp_path: Path) -> None:
    result = probe_cpu(tmp_path / "not" / "yet" / "created")

    assert result.disk_path == str(tmp_path)
    assert result.disk_free_bytes is not None


def test_linux_model_name_from_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\n"
        "model name\t: AMD Ryzen 9 5950X 16-Core Processor\nflags\t\t: fpu\n",
        encoding="utf-8",
    )

    assert cpu_model_name("Linux", cpuinfo_path=cpuinfo) == "AMD Ryzen 9 5950X 16-Core Processor"


def test_linux_without_model_name_falls_back(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nBogoMIPS\t: 50.00\n", encoding="utf-8")

    name = cpu_model_name("Linux", cpuinfo_path=cpuinfo)

    assert name is None or name  # platform.processor() may be empty on ARM Linux


def test_macos_model_name_from_sysctl() -> None:
    calls: list[list[str]] = []

    def runner(args: Sequence[str], timeout_s: float) -> str:
        calls.append(list(args))
        assert timeout_s > 0
        return "Apple M2 Ultra\n"

    assert cpu_model_name("Darwin", runner=runner) == "Apple M2 Ultra"
    assert calls == [["sysctl", "-n", "machdep.cpu.brand_string"]]


def test_cpu_features_from_cpuinfo_flags(tmp_path) -> None:
    from rigspark_gui.hardware.cpu import cpu_features

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx avx2 fma avx512f avx512bw\n")
    assert cpu_features(info) == ("avx2", "avx512")
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx\n")
    assert cpu_features(info) == ()
    assert cpu_features(tmp_path / "missing") == ()
