"""This machine's measured RAM bandwidth (and, on a VM, its vCPUs' cores' worth of
compute), kept between runs in the user cache.

Keyed by what would change the figure (CPU model, core count, RAM size), so a moved
home folder or a memory upgrade measures again. A busy measurement is never taken for a
calm one: it is kept apart, with the best of the busy runs, until a calm run replaces it."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from rigspark_gui.core.rig import Basis, Provenance
from rigspark_gui.user_dirs import cache_dir

CACHE_NAME = "ram-bandwidth.json"
MAX_CACHE_BYTES = 1 << 16
# a busy machine's best figure is kept under its key with this suffix
BUSY_SUFFIX = "|busy"
# the measured cores' worth of vector compute (a VM's vCPUs) under this suffix
CORES_SUFFIX = "|compute cores"


def machine_key(cpu_name: str, cores: int | None, ram_total_bytes: int | None) -> str:
    ram_gib = round((ram_total_bytes or 0) / (1 << 30))
    return f"{cpu_name}|{cores or '?'} cores|{ram_gib} GiB"


def _path() -> Path:
    return cache_dir() / CACHE_NAME


def _read() -> dict[str, dict[str, object]]:
    path = _path()
    try:
        if path.stat().st_size > MAX_CACHE_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # absent or damaged: measure again
    return data if isinstance(data, dict) else {}


def _entry(key: str, busy: bool) -> tuple[float, Provenance] | None:
    entry = _read().get(key + BUSY_SUFFIX if busy else key)
    if not isinstance(entry, dict):
        return None
    gbps, when, how = entry.get("gbps"), entry.get("measured_at"), entry.get("source")
    if not isinstance(gbps, (int, float)) or isinstance(gbps, bool) or not 0 < gbps < 100000:
        return None
    source = f"{how}; measured {when}, cached for this machine"
    return float(gbps), Provenance(basis=Basis.MEASURED, source=source)


def cached_bandwidth(key: str) -> tuple[float, Provenance] | None:
    """This machine's figure measured while it was calm (None: none yet)."""
    return _entry(key, busy=False)


def busy_bandwidth(key: str) -> tuple[float, Provenance] | None:
    """The best figure measured while the machine was busy, kept apart from the calm one:
    used until a calm run replaces it, and raised by a better busy run."""
    return _entry(key, busy=True)


def store_bandwidth(
    key: str, gbps: float, source: str, spread: float | None = None, *, busy: bool = False
) -> bool:
    """Keep a measurement with the spread of its rounds (a busy one apart, see
    `busy_bandwidth`; a calm one retires it); False when the cache folder cannot be
    written (not an error: the next start measures again)."""
    data = _read()
    if not busy:
        data.pop(key + BUSY_SUFFIX, None)
    key = key + BUSY_SUFFIX if busy else key
    data[key] = {
        "gbps": gbps,
        "source": source,
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    if spread is not None:
        data[key]["spread"] = spread
    return _write(data)


def cached_compute_cores(key: str) -> tuple[float, Provenance] | None:
    """This machine's measured cores' worth of vector compute (core_probe), if kept."""
    entry = _read().get(key + CORES_SUFFIX)
    if not isinstance(entry, dict):
        return None
    cores, when, how = entry.get("cores"), entry.get("measured_at"), entry.get("source")
    if not isinstance(cores, (int, float)) or isinstance(cores, bool) or not 0 < cores <= 4096:
        return None
    source = f"{how}; measured {when}, cached for this machine"
    return float(cores), Provenance(basis=Basis.MEASURED, source=source)


def store_compute_cores(key: str, cores: float, source: str) -> bool:
    """Keep a calm measurement of the cores' worth (False: the cache is not writable)."""
    data = _read()
    data[key + CORES_SUFFIX] = {
        "cores": cores,
        "source": source,
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    return _write(data)


def _write(data: dict[str, dict[str, object]]) -> bool:
    path = _path()
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".bw-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        return False
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return True
