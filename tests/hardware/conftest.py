"""Shared fixtures: a small GPU database file written for each test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

GIB = 1 << 30


def _entry(name: str, vendor: str, memory_gib: int, gbps: float, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "aliases": extra.pop("aliases", []),
        "vendor": vendor,
        "memory_bytes": memory_gib * GIB,
        "memory_bandwidth_gbps": gbps,
        "fp16_tflops": extra.pop("fp16_tflops", None),
        "interconnect": extra.pop("interconnect", "PCIe 4.0 x16"),
        "unified": extra.pop("unified", False),
        "source": extra.pop("source", f"{name} vendor spec sheet"),
        **extra,
    }


GPU_ENTRIES: list[dict[str, Any]] = [
    _entry("GeForce RTX 3090", "nvidia", 24, 936.2, fp16_tflops=71.0),
    _entry("GeForce RTX 4090", "nvidia", 24, 1008.0, fp16_tflops=165.2),
    _entry("GeForce RTX 4090 D", "nvidia", 24, 1008.0, fp16_tflops=147.0),
    _entry("GeForce RTX 4090 Laptop GPU", "nvidia", 16, 576.0),
    _entry("GeForce RTX 4060", "nvidia", 8, 272.0, fp16_tflops=30.2),
    # Same driver name, different boards: told apart by the reported memory.
    _entry("GeForce RTX 3080", "nvidia", 10, 760.3),
    _entry("GeForce RTX 3080 (12GB)", "nvidia", 12, 912.4),
    _entry("GeForce RTX 4060 Ti", "nvidia", 8, 288.0, memory_options_bytes=[8 * GIB, 16 * GIB]),
    _entry(
        "H100 SXM5 80GB",
        "nvidia",
        80,
        3352.0,
        aliases=["NVIDIA H100 80GB HBM3"],
        fp16_tflops=989.4,
        interconnect="SXM5, NVLink 4",
    ),
    _entry(
        "Radeon RX 7900 XTX",
        "AMD",
        24,
        960.0,
        aliases=["Navi 31 XTX"],
        fp16_tflops=122.8,
        pci_ids=["1002:744c"],
    ),
    _entry(
        "Apple M2 Ultra",
        "apple",
        192,
        800.0,
        unified=True,
        interconnect="unified memory",
        memory_options_bytes=[64 * GIB, 128 * GIB, 192 * GIB],
    ),
]


def write_database(path: Path, entries: list[Any]) -> Path:
    path.write_text(json.dumps({"schema_version": 1, "gpus": entries}), encoding="utf-8")
    return path


@pytest.fixture
def gpu_db_path(tmp_path: Path) -> Path:
    return write_database(tmp_path / "gpus.json", GPU_ENTRIES)
