"""How a report names its rig and which of the rig's detection notes it shows.

A detected machine keeps its name ("This machine") and its detection notes when the
user edits it into a what-if: the report names such a rig by what it holds, and shows
only the notes that still describe the rig reported, in words a newcomer reads.
"""

from __future__ import annotations

import re
from collections import Counter

from rigspark_gui.core.rig import GIB, Basis, Rig

# what detection names the machine it runs on (hardware/detect.py)
DETECTED_NAME = "this machine"
# words drivers put before the board's name ("NVIDIA GeForce RTX 3090" -> "RTX 3090")
_GPU_PREFIXES = ("NVIDIA ", "GeForce ", "AMD ", "Radeon ", "Intel(R) ", "Intel ")
_NO_GPUS = re.compile(r"^no (\w+) GPUs \((.+)\)$")
_PROBE = re.compile(r"^(.+) probe (timed out after .+|failed: .+)$")


def short_gpu_name(name: str) -> str:
    short = name.replace("(TM)", "").replace("(R)", "").strip()
    changed = True
    while changed:
        changed = False
        for prefix in _GPU_PREFIXES:
            if short.startswith(prefix) and len(short) > len(prefix):
                short = short[len(prefix) :]
                changed = True
    return " ".join(short.split()) or name


def _gib(n: int) -> str:
    return f"{n // GIB} GiB" if n % GIB == 0 else f"{n / GIB:.1f} GiB"


def rig_summary(rig: Rig) -> str:
    """What the rig holds, in a few words: "2× RTX 3090, 64 GiB RAM", "CPU only, 32 GiB
    RAM", "M2 Max, 64 GiB unified memory"."""
    counts = Counter(short_gpu_name(g.name) for g in rig.gpus)
    gpus = ", ".join(f"{n}× {name}" if n > 1 else name for name, n in counts.items())
    memory = "unified memory" if rig.unified_memory else "RAM"
    ram = f"{_gib(rig.ram_total_bytes)} {memory}" if rig.ram_total_bytes else ""
    parts = [gpus or "CPU only", ram]
    if rig.hosts:
        parts.append(f"over {len(rig.host_names)} hosts")
    return ", ".join(p for p in parts if p)


def rig_title(rig: Rig) -> str:
    """The rig as a title names it after "on": a what-if by what it holds, this machine
    as such, a rig file by its name."""
    if rig.edited:
        return f"a what-if rig: {rig_summary(rig)}"
    if not rig.name or rig.name.casefold() == DETECTED_NAME:
        return f"this machine ({rig_summary(rig)})"
    return rig.name


def _unknown(rig: Rig, field: str) -> bool:
    prov = rig.provenance.get(field)
    return getattr(rig, field) in (None, 0) or (prov is not None and prov.basis is Basis.UNKNOWN)


def _plain(note: str) -> str:
    """A detection note in a newcomer's words."""
    m = _NO_GPUS.match(note)
    if m is not None:
        vendor, why = m.groups()
        if why == "NVML not found":  # the window's words for it too (ui/rig_rows.py)
            return f"No {vendor} driver found on this computer, so no {vendor} GPU is used"
        if why == "NVML found no devices":
            return f"The {vendor} driver on this computer reports no GPU"
        return f"No {vendor} GPU found on this computer ({why})"
    m = _PROBE.match(note)
    if m is not None:
        return f"Looking for {m.group(1)} hardware {m.group(2)}: some of it may be missing here"
    return note[:1].upper() + note[1:]


def _concerns(rig: Rig, note: str) -> bool:
    """Whether a detection note still describes `rig` (a what-if may have changed what
    it was about)."""
    if _NO_GPUS.match(note) is not None:
        return not rig.gpus  # "no NVIDIA GPUs" beside GPUs only confuses
    low = note.lower()
    if "ram size" in low:
        return _unknown(rig, "ram_total_bytes")
    if "available ram" in low:
        return rig.ram_available_bytes is None
    if low.startswith("free disk"):
        return rig.disk_free_bytes is None
    if not rig.edited:
        return True
    # a what-if: only a note about a device it still holds
    return any(g.name and g.name in note for g in rig.gpus)


def report_notes(rig: Rig, notes: tuple[str, ...]) -> tuple[str, ...]:
    """The plan's notes for the report: the planner's as they are, the rig's detection
    notes only where they concern the rig reported, in plain words."""
    detected = set(rig.notes)
    return tuple(
        _plain(n) if n in detected else n for n in notes if n not in detected or _concerns(rig, n)
    )
