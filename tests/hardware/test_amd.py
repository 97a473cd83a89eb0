from __future__ import annotations

from pathlib import Path

from rigspark_gui.catalog.gpu_database import load_gpu_database
from rigspark_gui.core.rig import GIB, MIB, Basis, Vendor
from rigspark_gui.hardware.amd import probe_sysfs_gpus


def _card(root: Path, card: str, files: dict[str, str]) -> Path:
    device = root / "class" / "drm" / card / "device"
    device.mkdir(parents=True)
    for name, text in files.items():
        (device / name).write_text(text + "\n", encoding="utf-8")
    return device


def _rx_7900_xtx(root: Path, card: str = "card0", **extra: str) -> Path:
    return _card(
        root,
        card,
        {
            "vendor": "0x1002",
            "device": "0x744c",
            "mem_info_vram_total": str(24 * GIB),
            "mem_info_vram_used": str(1 * GIB),
            "max_link_speed": "16.0 GT/s PCIe",
            "max_link_width": "16",
            **extra,
        },
    )


def test_rx_7900_xtx_named_from_the_database(tmp_path: Path, gpu_db_path: Path) -> None:
    _rx_7900_xtx(tmp_path)
    db = load_gpu_database(gpu_db_path)

    (gpu,) = probe_sysfs_gpus(tmp_path, name_for_pci=db.name_for_pci).gpus

    assert gpu.name == "Radeon RX 7900 XTX"
    assert gpu.vendor is Vendor.AMD and not gpu.unified
    assert gpu.memory_total_bytes == 24 * GIB
    assert gpu.memory_free_bytes == 23 * GIB
    assert gpu.basis_of("memory_total_bytes").basis is Basis.MEASURED
    assert gpu.basis_of("name").basis is Basis.SPEC
    assert (gpu.pcie_generation, gpu.pcie_width) == (4, 16)


def test_product_name_wins_and_unknown_id_keeps_a_name(tmp_path: Path) -> None:
    _rx_7900_xtx(tmp_path, "card0", product_name="AMD Radeon RX 7900 XTX")
    _card(
        tmp_path,
        "card1",
        {"vendor": "0x1002", "device": "0x1234", "mem_info_vram_total": str(16 * GIB)},
    )

    first, second = probe_sysfs_gpus(tmp_path).gpus

    assert first.name == "AMD Radeon RX 7900 XTX"
    assert first.basis_of("name").basis is Basis.MEASURED
    assert second.name == "AMD GPU 1002:1234"
    assert second.basis_of("name").basis is Basis.UNKNOWN
    assert second.memory_free_bytes is None  # no mem_info_vram_used
    assert [first.index, second.index] == [0, 1]


def test_integrated_gpus_are_unified(tmp_path: Path) -> None:
    # An APU with a 512 MiB carve-out and an Intel iGPU without local memory.
    _card(
        tmp_path,
        "card0",
        {
            "vendor": "0x1002",
            "device": "0x1681",
            "mem_info_vram_total": str(512 * MIB),
            "mem_info_vram_used": str(100 * MIB),
        },
    )
    _card(tmp_path, "card1", {"vendor": "0x8086", "device": "0x46a6"})

    result = probe_sysfs_gpus(tmp_path)
    apu, igpu = result.gpus

    assert apu.unified and igpu.unified
    assert apu.vendor is Vendor.AMD and igpu.vendor is Vendor.INTEL
    assert igpu.memory_total_bytes is None
    assert apu.pcie_generation is None
    assert "1 GiB" in apu.basis_of("unified").source
    assert len(result.notes) == 2 and all("integrated" in n for n in result.notes)


def test_intel_discrete_with_local_memory(tmp_path: Path) -> None:
    _card(
        tmp_path,
        "card0",
        {
            "vendor": "0x8086",
            "device": "0x56a0",
            "mem_info_vram_total": str(16 * GIB),
            "mem_info_vram_used": str(GIB),
        },
    )

    (gpu,) = probe_sysfs_gpus(tmp_path).gpus

    assert gpu.vendor is Vendor.INTEL and not gpu.unified
    assert gpu.memory_free_bytes == 15 * GIB


def test_skips_nvidia_connectors_and_missing_tree(tmp_path: Path) -> None:
    _card(tmp_path, "card0", {"vendor": "0x10de", "device": "0x2684"})
    _rx_7900_xtx(tmp_path, "card1")
    (tmp_path / "class" / "drm" / "card1-DP-1").mkdir()
    (tmp_path / "class" / "drm" / "renderD128").mkdir()

    gpus = probe_sysfs_gpus(tmp_path).gpus

    assert len(gpus) == 1 and gpus[0].vendor is Vendor.AMD
    assert probe_sysfs_gpus(tmp_path / "nowhere").gpus == ()
