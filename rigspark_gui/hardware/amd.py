"""AMD and Intel GPUs from Linux sysfs (`/sys/class/drm/card*/device/`).

amdgpu exposes `mem_info_vram_total` / `mem_info_vram_used`; Intel's discrete cards
(xe/i915 with local memory) expose the same files. NVIDIA cards are left to NVML.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rigspark_gui.core.rig import GIB, Basis, Gpu, Provenance, Vendor

AMD_VENDOR_ID = 0x1002
INTEL_VENDOR_ID = 0x8086
# Below this a "VRAM" figure is the BIOS carve-out of an integrated GPU (typically
# 64-512 MiB), which is system RAM, not extra memory a model could use.
INTEGRATED_VRAM_LIMIT_BYTES = 1 * GIB

# (vendor id, device id) -> marketing name, or None when unknown.
PciNameLookup = Callable[[int, int], str | None]

_CARD = re.compile(r"card\d+")
_VENDORS = {AMD_VENDOR_ID: Vendor.AMD, INTEL_VENDOR_ID: Vendor.INTEL}
# PCIe transfer rate per lane (GT/s) -> generation.
_PCIE_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


@dataclass(frozen=True, slots=True, kw_only=True)
class SysfsProbeResult:
    gpus: tuple[Gpu, ...] = ()
    notes: tuple[str, ...] = ()


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def _pcie(device: Path) -> tuple[int | None, int | None]:
    speed = _read(device / "max_link_speed")  # e.g. "16.0 GT/s PCIe"
    generation = None
    if speed:
        try:
            generation = _PCIE_GEN.get(float(speed.split()[0]))
        except ValueError:
            generation = None
    width = _read_int(device / "max_link_width")
    return generation, width or None


def probe_sysfs_gpus(
    sysfs_root: Path = Path("/sys"), *, name_for_pci: PciNameLookup | None = None
) -> SysfsProbeResult:
    """Every AMD or Intel GPU under `sysfs_root`; an absent tree means none."""
    drm = sysfs_root / "class" / "drm"
    if not drm.is_dir():
        return SysfsProbeResult()

    gpus: list[Gpu] = []
    notes: list[str] = []
    seen: set[Path] = set()
    next_index = {Vendor.AMD: 0, Vendor.INTEL: 0}
    cards = sorted(
        (p for p in drm.iterdir() if _CARD.fullmatch(p.name)), key=lambda p: int(p.name[4:])
    )
    for card in cards:
        device = card / "device"
        try:
            real = device.resolve()
        except OSError:
            continue
        if real in seen:  # the same PCI function reached through two card nodes
            continue
        seen.add(real)
        vendor_id = _read_int(device / "vendor")
        vendor = _VENDORS.get(vendor_id) if vendor_id is not None else None
        if vendor is None or vendor_id is None:
            continue
        device_id = _read_int(device / "device") or 0
        sysfs = f"sysfs {card.name}"
        measured = Provenance(basis=Basis.MEASURED, source=sysfs)
        prov: dict[str, Provenance] = {"vendor": measured}

        name = _read(device / "product_name")
        if name:
            prov["name"] = measured
        else:
            name = name_for_pci(vendor_id, device_id) if name_for_pci else None
            if name:
                prov["name"] = Provenance(
                    basis=Basis.SPEC, source=f"GPU database, PCI id {vendor_id:04x}:{device_id:04x}"
                )
            else:
                name = f"{vendor.value.upper()} GPU {vendor_id:04x}:{device_id:04x}"
                prov["name"] = Provenance(
                    basis=Basis.UNKNOWN, source="no product_name and PCI id not in the database"
                )

        total = _read_int(device / "mem_info_vram_total")
        used = _read_int(device / "mem_info_vram_used")
        free: int | None = None
        if total is not None:
            prov["memory_total_bytes"] = Provenance(
                basis=Basis.MEASURED, source=f"{sysfs} mem_info_vram_total"
            )
            if used is not None:
                free = max(total - min(used, total), 0)
                prov["memory_free_bytes"] = Provenance(
                    basis=Basis.MEASURED, source=f"{sysfs} mem_info_vram_total − mem_info_vram_used"
                )
        else:
            prov["memory_total_bytes"] = Provenance(
                basis=Basis.UNKNOWN, source=f"{sysfs}: no mem_info_vram_total"
            )

        if total is None:
            # No local memory at all: an integrated GPU (Intel iGPU, older APU drivers).
            unified = True
            why = "no dedicated VRAM reported: integrated GPU sharing system memory"
        elif total < INTEGRATED_VRAM_LIMIT_BYTES:
            unified = True
            why = "VRAM carve-out under 1 GiB: integrated GPU sharing system memory"
        else:
            unified = False
            why = "dedicated VRAM reported"
        prov["unified"] = Provenance(basis=Basis.MEASURED, source=f"{sysfs}: {why}")

        # An integrated GPU's "link" is internal and says nothing about transfers.
        generation, width = (None, None) if unified else _pcie(device)
        if generation is not None:
            prov["pcie_generation"] = measured
        if width is not None:
            prov["pcie_width"] = measured

        gpus.append(
            Gpu(
                name=name[:200],
                vendor=vendor,
                index=next_index[vendor],
                memory_total_bytes=total,
                memory_free_bytes=free,
                unified=unified,
                pcie_generation=generation,
                pcie_width=width,
                provenance=prov,
            )
        )
        next_index[vendor] += 1
        if unified:
            notes.append(f"{name} is integrated: it shares system RAM and adds no VRAM")
    return SysfsProbeResult(gpus=tuple(gpus), notes=tuple(notes))
