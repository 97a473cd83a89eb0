"""Each device's own overhead: the sourced table, the pure choice among its figures, and
detection and rig files applying it, so a plan subtracts what the rig panel shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rigspark_gui.catalog.device_overhead import load_device_overhead, rig_with_overhead
from rigspark_gui.catalog.gpu_database import load_gpu_database
from rigspark_gui.catalog.rig_file import parse_rig
from rigspark_gui.core.device_overhead import (
    WORKING_SET_MARK,
    DeviceOverheadTable,
    gpu_overhead,
    with_device_overhead,
)
from rigspark_gui.core.errors import CatalogError
from rigspark_gui.core.placement.devices import device_capacity
from rigspark_gui.core.rig import (
    DEFAULT_GPU_RESERVE_BYTES,
    GIB,
    MIB,
    Basis,
    Gpu,
    Provenance,
    Rig,
    Vendor,
)
from rigspark_gui.formats.device_overhead import read_device_overhead
from rigspark_gui.hardware.detect import detect
from rigspark_gui.resources import data_file

from .fakes import FakeNvml, rtx_3090, rtx_4060

# an issue or pull request of a public repository, or a vendor page: every figure has one
_CITED = re.compile(r"[\w.-]+/[\w.-]+#\d+|nvidia\.custhelp\.com|ggml-metal|ggml-cuda")


@pytest.fixture(scope="module")
def table() -> DeviceOverheadTable:
    return load_device_overhead(data_file("device_overhead.json"))


def test_every_figure_in_the_data_file_is_cited() -> None:
    raw = json.loads(data_file("device_overhead.json").read_text(encoding="utf-8"))
    for context in raw["contexts"]:
        assert _CITED.search(context["source"]), context
    for reading in raw["apple_working_set"]["measured"]:
        assert _CITED.search(reading["source"]), reading
    assert _CITED.search(raw["windows"]["sources"])
    assert _CITED.search(raw["apple_working_set"]["wired_limit_source"])


def test_a_bad_table_is_one_line(tmp_path: Path) -> None:
    raw = json.loads(data_file("device_overhead.json").read_text(encoding="utf-8"))
    raw["contexts"][0]["bytes"] = -1
    bad = tmp_path / "device_overhead.json"
    bad.write_text(json.dumps(raw), encoding="utf-8")

    with pytest.raises(CatalogError) as err:
        load_device_overhead(bad)

    assert "\n" not in str(err.value) and "contexts" in str(err.value)
    raw["apple_working_set"]["measured"][0]["working_set_bytes"] = 64 * GIB  # > RAM
    with pytest.raises(ValueError):
        read_device_overhead(raw)


def test_a_measured_gpu_gets_its_own_figure(table: DeviceOverheadTable) -> None:
    overhead = gpu_overhead(table, Gpu(name="NVIDIA GeForce RTX 3090", vendor=Vendor.NVIDIA))

    assert overhead.bytes == 256 * MIB and overhead.basis is Basis.SPEC
    assert "measured on this GPU" in overhead.sentence and "InvokeAI#9413" in overhead.sentence
    assert overhead.warning == ""


def test_an_unmeasured_gpu_gets_its_backends_upper_figure(table: DeviceOverheadTable) -> None:
    overhead = gpu_overhead(table, Gpu(name="NVIDIA GeForce RTX 4060", vendor=Vendor.NVIDIA))

    assert overhead.bytes == 555 * MIB
    assert "not measured on this GPU" in overhead.sentence and "#20595" in overhead.sentence


def test_rocm_vulkan_and_metal(table: DeviceOverheadTable) -> None:
    amd = gpu_overhead(table, Gpu(name="AMD Radeon RX 7900 XTX", vendor=Vendor.AMD))
    intel = gpu_overhead(table, Gpu(name="Intel Arc A770", vendor=Vendor.INTEL))
    apple = gpu_overhead(table, Gpu(name="Apple M2 Max", vendor=Vendor.APPLE, unified=True))

    assert amd.bytes == 783 * MIB and "ROCm" in amd.sentence and "#23999" in amd.sentence
    # nobody measured a Vulkan device's footprint: the assumed default, said to be unknown
    assert intel.bytes == DEFAULT_GPU_RESERVE_BYTES and intel.basis is Basis.UNKNOWN
    assert "unknown" in intel.sentence
    assert apple.bytes == 0 and "recommendedMaxWorkingSetSize" not in apple.sentence
    assert "working set" in apple.sentence


def test_windows_adds_the_silent_overflow_warning(table: DeviceOverheadTable) -> None:
    gpu = Gpu(name="NVIDIA GeForce RTX 3090", vendor=Vendor.NVIDIA)

    overhead = gpu_overhead(table, gpu, "Windows")

    assert "shared system memory" in overhead.warning and "ten times slower" in overhead.warning
    assert "a_id/5490" in overhead.warning and "#4498" in overhead.warning
    assert overhead.warning in overhead.provenance.source
    assert gpu_overhead(table, gpu, "Linux").warning == ""


def test_a_users_reserve_is_kept(table: DeviceOverheadTable) -> None:
    user = Provenance(basis=Basis.USER, source="entered in the rig panel")
    rig = Rig(
        ram_total_bytes=64 * GIB,
        gpus=(
            Gpu(name="NVIDIA GeForce RTX 3090", vendor=Vendor.NVIDIA, reserve_bytes=GIB),
            Gpu(
                name="NVIDIA GeForce RTX 3090",
                vendor=Vendor.NVIDIA,
                reserve_bytes=300 * MIB,
                provenance={"reserve_bytes": user},
            ),
            Gpu(name="NVIDIA GeForce RTX 3090", vendor=Vendor.NVIDIA),
        ),
    )

    a, b, c = with_device_overhead(rig, table).gpus

    assert a.reserve_bytes == GIB  # given in a rig file
    assert b.reserve_bytes == 300 * MIB and b.provenance["reserve_bytes"] == user
    assert c.reserve_bytes == 256 * MIB
    assert c.provenance["reserve_bytes"].basis is Basis.SPEC


def test_applying_twice_changes_nothing(table: DeviceOverheadTable) -> None:
    rig = Rig(
        ram_total_bytes=64 * GIB,
        gpus=(
            Gpu(name="NVIDIA GeForce RTX 4060", vendor=Vendor.NVIDIA, memory_total_bytes=8 * GIB),
            Gpu(
                name="Apple M2 Max",
                vendor=Vendor.APPLE,
                unified=True,
                memory_total_bytes=64 * GIB,
                provenance={"memory_total_bytes": Provenance(basis=Basis.SPEC, source="db")},
            ),
        ),
    )

    once = with_device_overhead(rig, table)

    assert with_device_overhead(once, table) == once
    apple = once.gpus[1]
    assert apple.memory_total_bytes == 48 * GIB  # llama.cpp#1870, not the 64 GiB of RAM
    assert apple.provenance["memory_total_bytes"].source.startswith(WORKING_SET_MARK)
    assert apple.reserve_bytes == 0


def test_detection_sets_each_gpus_context_as_its_reserve(
    monkeypatch: pytest.MonkeyPatch, gpu_db_path: Path, tmp_path: Path, table: DeviceOverheadTable
) -> None:
    FakeNvml([rtx_3090(0), rtx_4060()]).install(monkeypatch)

    rig = detect(
        database=load_gpu_database(gpu_db_path),
        models_dir=tmp_path,
        sysfs_root=tmp_path / "no-sysfs",
        system="Linux",
        overhead=table,
    )

    r3090, r4060 = rig.gpus
    assert r3090.reserve_bytes == 256 * MIB and r4060.reserve_bytes == 555 * MIB
    # the plan's capacity is the detected free memory less that figure
    assert device_capacity(rig, "gpu:1") == (7 * GIB, 555 * MIB)
    assert r4060.capacity_bytes == 7 * GIB - 555 * MIB
    assert not any("shared system memory" in n for n in rig.notes)


def test_detection_on_windows_warns_once(
    monkeypatch: pytest.MonkeyPatch, gpu_db_path: Path, tmp_path: Path, table: DeviceOverheadTable
) -> None:
    FakeNvml([rtx_3090(0), rtx_3090(1)]).install(monkeypatch)

    rig = detect(
        database=load_gpu_database(gpu_db_path),
        models_dir=tmp_path,
        system="Windows",
        overhead=table,
    )

    assert sum("shared system memory" in n for n in rig.notes) == 1
    assert all("ten times slower" in g.provenance["reserve_bytes"].source for g in rig.gpus)


def test_a_rig_file_gets_the_overhead_and_the_working_set(gpu_db_path: Path) -> None:
    raw = {
        "ram_total_bytes": 64 * GIB,
        "gpus": [{"name": "RTX 3090"}, {"name": "RTX 3090", "reserve_bytes": GIB}],
    }

    rig = parse_rig(raw, load_gpu_database(gpu_db_path))

    assert [g.reserve_bytes for g in rig.gpus] == [256 * MIB, GIB]
    mac = parse_rig(
        {
            "ram_total_bytes": 64 * GIB,
            "unified_memory": True,
            "gpus": [{"name": "Apple M2 Ultra", "memory_total_bytes": 64 * GIB}],
        },
        load_gpu_database(gpu_db_path),
    )
    (gpu,) = mac.gpus
    # the board's RAM size in the file becomes its working set (llama.cpp#1870)
    assert gpu.memory_total_bytes == 48 * GIB and gpu.reserve_bytes == 0
    assert rig_with_overhead(mac) == mac


def test_the_shipped_table_fits_its_published_schema() -> None:
    from rigspark_gui.cli_schema import SCHEMAS

    model = SCHEMAS["device-overhead"].load()
    raw = json.loads(data_file("device_overhead.json").read_text(encoding="utf-8"))
    model.model_validate(raw)
