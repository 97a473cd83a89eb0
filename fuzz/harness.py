"""Drive each reader with mutated inputs; only RigSparkError may come out, promptly and small.

An input *passes* when the reader returns or raises a `RigSparkError` subclass, within
`time_limit_s` and without its traced allocations peaking above `memory_limit_bytes`.
Anything else (another exception, a hang cut short by SIGALRM, a slow or memory-hungry
input) is a *failure*, kept with the bytes that caused it so it can be replayed.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import time
import traceback
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzz import mutate, seeds
from rigspark_gui.catalog.gguf_import import import_gguf
from rigspark_gui.catalog.gpu_database import load_gpu_database, parse_gpu_database
from rigspark_gui.catalog.hf_import import import_hf
from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.rig import GIB, Gpu

TARGETS = ("gguf", "hf_config", "rig", "catalog", "gpu_database")
# Share of a campaign each target gets: the binary format has the most to get wrong.
WEIGHTS = {"gguf": 0.4, "hf_config": 0.2, "rig": 0.15, "catalog": 0.1, "gpu_database": 0.15}

TIME_LIMIT_S = 2.0
MEMORY_LIMIT_BYTES = 256 << 20
# A hang is cut off a little after the time limit so that it is reported, not waited out.
_ALARM_S = TIME_LIMIT_S + 3.0


class _Hang(BaseException):
    """Raised by SIGALRM inside a reader that ran far past the time limit."""


@dataclass
class Failure:
    target: str
    kind: str  # "exception", "hang", "slow", "memory"
    signature: str
    detail: str
    data: bytes
    name: str = "input"


@dataclass
class TargetStats:
    inputs: int = 0
    accepted: int = 0
    typed_errors: int = 0
    failures: int = 0
    seconds: float = 0.0
    slowest_s: float = 0.0
    peak_bytes: int = 0


@dataclass
class Report:
    stats: dict[str, TargetStats] = field(
        default_factory=lambda: {t: TargetStats() for t in TARGETS}
    )
    failures: dict[str, Failure] = field(default_factory=dict)  # by signature

    def merge(self, other: Report) -> None:
        for name, s in other.stats.items():
            mine = self.stats.setdefault(name, TargetStats())
            mine.inputs += s.inputs
            mine.accepted += s.accepted
            mine.typed_errors += s.typed_errors
            mine.failures += s.failures
            mine.seconds += s.seconds
            mine.slowest_s = max(mine.slowest_s, s.slowest_s)
            mine.peak_bytes = max(mine.peak_bytes, s.peak_bytes)
        for sig, f in other.failures.items():
            self.failures.setdefault(sig, f)


def _signature(target: str, exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "rigspark_gui" in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{target}: {type(exc).__name__} at {where}"


# --------------------------------------------------------------------------- inputs


class Corpus:
    """Seeds per target, built once per process."""

    def __init__(self, rng: random.Random) -> None:
        self.gguf = seeds.gguf_seeds()
        self.hf = seeds.hf_seeds()
        self.hf_keys = sorted(mutate.json_keys(self.hf))
        self.index = seeds.safetensors_index_seed()
        self.rigs = seeds.rig_seeds()
        self.rig_keys = sorted(
            mutate.json_keys(self.rigs) | {"basis", "source", "reserve_bytes", "uuid", "index"}
        )
        catalog = seeds.catalog_seed()
        self.catalogs = [catalog, *seeds.small_slices(catalog, "models", rng, 8)]
        self.catalog_keys = sorted(mutate.json_keys(catalog))
        database = seeds.gpu_database_seed()
        self.databases = [database, *seeds.small_slices(database, "gpus", rng, 8)]
        self.database_keys = sorted(mutate.json_keys(database))
        self.database = parse_gpu_database(
            {"schema_version": 1, "gpus": database["gpus"]}, Path("gpus.json")
        )


def scratch_dir() -> str | None:
    """tmpfs when there is one: every input is a file, and a disk-backed open costs ~2 ms."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _run_gguf(c: Corpus, rng: random.Random, work: Path) -> tuple[bytes, Callable[[], Any]]:
    data = mutate.mutate_gguf(rng.choice(c.gguf), rng, c.gguf)
    if rng.random() < 0.05:
        # One part of a split model: the importer must find (or miss) its siblings.
        first = _write(work / "split" / "m-00001-of-00002.gguf", data)
        other = mutate.mutate_gguf(rng.choice(c.gguf), rng, c.gguf)
        _write(work / "split" / "m-00002-of-00002.gguf", other)
        return data, lambda: import_gguf(first)
    path = _write(work / "model.gguf", data)
    return data, lambda: import_gguf(path)


def _run_hf(c: Corpus, rng: random.Random, work: Path) -> tuple[bytes, Callable[[], Any]]:
    data = mutate.mutate_json(rng.choice(c.hf), rng, c.hf_keys)
    folder = work / "hf"
    config = _write(folder / "config.json", data)
    index = folder / "model.safetensors.index.json"
    if rng.random() < 0.2:
        _write(index, mutate.mutate_json(c.index, rng, ["metadata", "total_size"]))
    elif index.exists():
        index.unlink()
    target = folder if rng.random() < 0.5 else config
    return data, lambda: import_hf(target)


def _run_rig(c: Corpus, rng: random.Random, work: Path) -> tuple[bytes, Callable[[], Any]]:
    seed = rng.choice(c.rigs)
    data = mutate.mutate_json(seed, rng, c.rig_keys)
    path = _write(work / "rig.json", data)
    database = c.database if rng.random() < 0.8 else None
    return data, lambda: load_rig(path, database)


def _run_catalog(c: Corpus, rng: random.Random, work: Path) -> tuple[bytes, Callable[[], Any]]:
    data = mutate.mutate_json(rng.choice(c.catalogs), rng, c.catalog_keys)
    path = _write(work / "models.json", data)

    def run() -> Any:
        catalog = load_catalog(path)
        return catalog.specs()

    return data, run


def _run_database(c: Corpus, rng: random.Random, work: Path) -> tuple[bytes, Callable[[], Any]]:
    data = mutate.mutate_json(rng.choice(c.databases), rng, c.database_keys)
    path = _write(work / "gpus.json", data)
    lenient = rng.random() < 0.5
    memory = rng.choice((None, 0, 8 * GIB, 24 * GIB, 80 * GIB))

    def run() -> Any:
        database = load_gpu_database(path, lenient=lenient)
        # Matching and filling read every entry the loader let through.
        for spec in database.gpus[:3]:
            gpu = Gpu(name=spec.name, memory_total_bytes=memory)
            database.fill_with_note(gpu)
            database.fill_with_note(Gpu(name=spec.name, memory_free_bytes=memory))
        return database

    return data, run


_RUNNERS: dict[str, Callable[[Corpus, random.Random, Path], tuple[bytes, Callable[[], Any]]]] = {
    "gguf": _run_gguf,
    "hf_config": _run_hf,
    "rig": _run_rig,
    "catalog": _run_catalog,
    "gpu_database": _run_database,
}


# --------------------------------------------------------------------------- execution


def _on_alarm(_signum: int, _frame: Any) -> None:
    raise _Hang


def check_one(target: str, run: Callable[[], Any], data: bytes, report: Report) -> None:
    """Run one input under the time and memory bounds and record the outcome."""
    stats = report.stats[target]
    stats.inputs += 1
    failure: tuple[str, str, str] | None = None
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, _ALARM_S)
    start = time.perf_counter()
    try:
        run()
        stats.accepted += 1
    except RigSparkError:
        stats.typed_errors += 1
    except _Hang:
        failure = ("hang", f"{target}: hang", f"still running after {_ALARM_S:g} s")
    except Exception as exc:
        detail = "".join(traceback.format_exception(exc))[-3000:]
        failure = ("exception", _signature(target, exc), detail)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    elapsed = time.perf_counter() - start
    peak = max(tracemalloc.get_traced_memory()[1] - base, 0)
    stats.seconds += elapsed
    stats.slowest_s = max(stats.slowest_s, elapsed)
    stats.peak_bytes = max(stats.peak_bytes, peak)
    if failure is None and elapsed > TIME_LIMIT_S:
        failure = ("slow", f"{target}: slow", f"{elapsed:.2f} s > {TIME_LIMIT_S:g} s")
    if failure is None and peak > MEMORY_LIMIT_BYTES:
        failure = ("memory", f"{target}: memory", f"traced peak {peak >> 20} MiB")
    if failure is not None:
        stats.failures += 1
        kind, sig, detail = failure
        report.failures.setdefault(sig, Failure(target, kind, sig, detail, data))


def fuzz(target: str, n_inputs: int, seed: int, work: Path, corpus: Corpus | None = None) -> Report:
    """`n_inputs` mutated inputs for one target, reproducible from `seed`."""
    rng = random.Random(f"{target}:{seed}")
    corpus = corpus or Corpus(random.Random(seed))
    report = Report()
    started = tracemalloc.is_tracing()
    if not started:
        tracemalloc.start()
    try:
        for _ in range(n_inputs):
            data, run = _RUNNERS[target](corpus, rng, work)
            check_one(target, run, data, report)
    finally:
        if not started:
            tracemalloc.stop()
    return report


def replay(target: str, data: bytes, work: Path) -> Any:
    """Feed saved bytes to a target directly (for a failure's reproduction)."""
    names = {
        "gguf": "model.gguf",
        "hf_config": "hf/config.json",
        "rig": "rig.json",
        "catalog": "models.json",
        "gpu_database": "gpus.json",
    }
    path = _write(work / names[target], data)
    if target == "gguf":
        return import_gguf(path)
    if target == "hf_config":
        return import_hf(path)
    if target == "rig":
        return load_rig(path, None)
    if target == "catalog":
        return load_catalog(path).specs()
    return load_gpu_database(path)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


__all__ = [
    "MEMORY_LIMIT_BYTES",
    "TARGETS",
    "TIME_LIMIT_S",
    "WEIGHTS",
    "Corpus",
    "Failure",
    "Report",
    "check_one",
    "digest",
    "fuzz",
    "replay",
    "scratch_dir",
]
