"""Each detected device's own overhead (core/device_overhead.py) from the program's
data/device_overhead.json. Detection may not import the catalog (the layers contract),
so it reads the table through its format directly, once per process."""

from __future__ import annotations

from functools import cache

from rigspark_gui.core.device_overhead import DeviceOverheadTable, with_device_overhead
from rigspark_gui.core.rig import Rig


@cache
def shipped_table() -> DeviceOverheadTable:
    """The program's table (ValueError or OSError when the file cannot be used)."""
    from rigspark_gui.formats.device_overhead import load_device_overhead_file
    from rigspark_gui.resources import data_file

    return load_device_overhead_file(data_file("device_overhead.json"))


def table_or_note(notes: list[str]) -> DeviceOverheadTable | None:
    """The shipped table, or None with a note saying why it is missing."""
    try:
        return shipped_table()
    except (OSError, ValueError) as exc:
        notes.append(f"device overhead table unavailable ({str(exc)[:160]}): reserves assumed")
        return None


def detected_with_overhead(
    rig: Rig, system: str, table: DeviceOverheadTable | None, notes: list[str]
) -> Rig:
    """`rig` with each GPU's backend context as its reserve; on Windows, one note on the
    silent overflow into shared memory."""
    if not rig.gpus:
        return rig
    table = table if table is not None else table_or_note(notes)
    if table is None:
        return rig
    if system == "Windows" and any(not g.unified for g in rig.gpus) and table.windows_warning:
        notes.append(table.windows_warning)
    return with_device_overhead(rig, table, system)
