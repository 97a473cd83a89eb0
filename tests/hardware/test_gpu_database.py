from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rigspark_gui.catalog.gpu_database import (
    GpuDatabase,
    load_gpu_database,
    normalize_gpu_name,
)
from rigspark_gui.core.errors import CatalogError
from rigspark_gui.core.rig import GIB, Basis, Gpu, Provenance, Vendor

from .conftest import GPU_ENTRIES, write_database


@pytest.fixture
def db(gpu_db_path: Path) -> GpuDatabase:
    return load_gpu_database(gpu_db_path)


def test_loads_every_entry(db: GpuDatabase) -> None:
    assert len(db.gpus) == len(GPU_ENTRIES) and db.errors == ()
    xtx = db.match("Radeon RX 7900 XTX")
    assert xtx is not None and xtx.vendor is Vendor.AMD  # "AMD" in the file
    assert xtx.pci_ids == ("1002:744c",)


@pytest.mark.parametrize(
    ("reported", "entry"),
    [
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
        ("GeForce RTX 4090", "GeForce RTX 4090"),
        ("rtx 4090", "GeForce RTX 4090"),
        ("  NVIDIA  GeForce   RTX 3090 ", "GeForce RTX 3090"),
        ("NVIDIA GeForce RTX 4090 D", "GeForce RTX 4090 D"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", "GeForce RTX 4090 Laptop GPU"),
        ("GeForce RTX 4090 Mobile", "GeForce RTX 4090 Laptop GPU"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB"),
        ("AMD Radeon RX 7900 XTX", "Radeon RX 7900 XTX"),
        ("Navi 31 XTX", "Radeon RX 7900 XTX"),
        ("Apple M2 Ultra", "Apple M2 Ultra"),
    ],
)
def test_matches_driver_names_and_aliases(db: GpuDatabase, reported: str, entry: str) -> None:
    spec = db.match(reported)
    assert spec is not None and spec.name == entry


@pytest.mark.parametrize(
    "reported",
    [
        "RTX 409",
        "RTX 40900",
        "NVIDIA GeForce RTX 4070",
        "RTX 4090 Ti",
        "NVIDIA H100 PCIe",
        "Radeon RX 7900 XT",
        "Apple M2 Max",
        "NVIDIA",
        "",
    ],
)
def test_no_false_matches(db: GpuDatabase, reported: str) -> None:
    assert db.match(reported) is None


def test_near_names_stay_apart(db: GpuDatabase) -> None:
    rtx_4090 = db.match("RTX 4090")
    assert rtx_4090 is not None and rtx_4090.name == "GeForce RTX 4090"
    for other in ("RTX 4090 D", "RTX 4060", "RTX 4090 Laptop GPU"):
        spec = db.match(other)
        assert spec is not None and spec is not rtx_4090


def test_normalisation_only_strips_leading_vendor_words() -> None:
    assert normalize_gpu_name("NVIDIA GeForce RTX 3090") == "rtx 3090"
    assert normalize_gpu_name("Intel(R) Arc(TM) A770 Graphics") == "arc a770 graphics"
    assert normalize_gpu_name("Quadro RTX 6000 NVIDIA") == "quadro rtx 6000 nvidia"


def _db_file(tmp_path: Path, entries: list[Any]) -> Path:
    return write_database(tmp_path / "bad.json", entries)


def test_bad_entry_names_the_entry_and_field(tmp_path: Path) -> None:
    broken = [dict(GPU_ENTRIES[0]), {**GPU_ENTRIES[1], "memory_bandwidth_gbps": -5}]

    with pytest.raises(CatalogError) as caught:
        load_gpu_database(_db_file(tmp_path, broken))

    message = str(caught.value)
    assert "gpus[1]" in message and "GeForce RTX 4090" in message
    assert "memory_bandwidth_gbps" in message


def test_missing_field_and_unknown_field_are_errors(tmp_path: Path) -> None:
    no_source = {k: v for k, v in GPU_ENTRIES[0].items() if k != "source"}
    with pytest.raises(CatalogError, match=r"gpus\[0\].*'source'"):
        load_gpu_database(_db_file(tmp_path, [no_source]))
    typo = {**GPU_ENTRIES[0], "memory_bandwith_gbps": 1.0}
    with pytest.raises(CatalogError, match="memory_bandwith_gbps"):
        load_gpu_database(_db_file(tmp_path, [typo]))


def test_lenient_load_skips_bad_entries(tmp_path: Path) -> None:
    entries: list[Any] = [
        GPU_ENTRIES[0],
        {**GPU_ENTRIES[1], "vendor": "matrox"},
        "not an entry",
        {**GPU_ENTRIES[4], "name": "RTX 3090"},  # a second name for the 3090
        GPU_ENTRIES[4],
    ]

    db = load_gpu_database(_db_file(tmp_path, entries), lenient=True)

    assert [g.name for g in db.gpus] == ["GeForce RTX 3090", "GeForce RTX 4060"]
    assert len(db.errors) == 3
    assert "gpus[1] ('GeForce RTX 4090')" in db.errors[0] and "vendor" in db.errors[0]
    assert "gpus[2]" in db.errors[1]
    assert "already names 'GeForce RTX 3090'" in db.errors[2]


def test_duplicate_names_are_errors_in_strict_mode(tmp_path: Path) -> None:
    entries = [GPU_ENTRIES[0], {**GPU_ENTRIES[1], "aliases": ["NVIDIA GeForce RTX 3090"]}]

    with pytest.raises(CatalogError, match=r"gpus\[1\].*'aliases'.*already names"):
        load_gpu_database(_db_file(tmp_path, entries))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"schema_version": 2, "gpus": []}), "schema_version"),
        (json.dumps({"schema_version": 1, "gpus": {}}), "'gpus' must be a list"),
        (json.dumps([]), "expected an object"),
    ],
)
def test_malformed_files(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "gpus.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogError, match=expected):
        load_gpu_database(path)
    with pytest.raises(CatalogError, match="cannot read"):
        load_gpu_database(tmp_path / "absent.json")


def test_fill_keeps_measured_and_adds_spec_figures(db: GpuDatabase) -> None:
    nvml = Provenance(basis=Basis.MEASURED, source="NVML")
    gpu = Gpu(
        name="NVIDIA GeForce RTX 3090",
        vendor=Vendor.NVIDIA,
        memory_total_bytes=24 * GIB,
        memory_free_bytes=23 * GIB,
        bandwidth_gbps=936.0,
        provenance={"memory_total_bytes": nvml, "bandwidth_gbps": nvml, "vendor": nvml},
    )

    filled, note = db.fill_with_note(gpu)

    assert note is None
    assert filled.bandwidth_gbps == 936.0 and filled.basis_of("bandwidth_gbps") == nvml
    assert filled.memory_total_bytes == 24 * GIB
    assert filled.fp16_tflops == 71.0
    spec = filled.basis_of("fp16_tflops")
    assert spec.basis is Basis.SPEC and spec.source == "GeForce RTX 3090 vendor spec sheet"
    assert db.fill(gpu) == filled


def test_fill_a_name_only_gpu(db: GpuDatabase) -> None:
    filled = db.fill(Gpu(name="Radeon RX 7900 XTX"))

    assert filled.vendor is Vendor.AMD
    assert filled.memory_total_bytes == 24 * GIB
    assert filled.bandwidth_gbps == 960.0
    for field in ("vendor", "memory_total_bytes", "bandwidth_gbps", "fp16_tflops"):
        assert filled.basis_of(field).basis is Basis.SPEC


def test_fill_marks_unified_and_leaves_missing_spec_figures_unknown(db: GpuDatabase) -> None:
    filled = db.fill(Gpu(name="Apple M2 Ultra"))

    assert filled.unified and filled.vendor is Vendor.APPLE
    assert filled.fp16_tflops is None
    assert filled.basis_of("fp16_tflops").basis is Basis.UNKNOWN


def test_fill_picks_the_memory_variant_that_holds_free_memory(db: GpuDatabase) -> None:
    filled, note = db.fill_with_note(
        Gpu(name="NVIDIA GeForce RTX 4060 Ti", memory_free_bytes=15 * GIB)
    )

    assert filled.memory_total_bytes == 16 * GIB
    assert note is not None and "assumed 16 GiB" in note


def test_fill_unknown_name_keeps_the_gpu_and_says_so(db: GpuDatabase) -> None:
    gpu = Gpu(name="NVIDIA GeForce RTX 5090", vendor=Vendor.NVIDIA, memory_total_bytes=32 * GIB)

    filled, note = db.fill_with_note(gpu)

    assert filled.name == gpu.name and filled.memory_total_bytes == 32 * GIB
    assert filled.bandwidth_gbps is None
    assert filled.basis_of("bandwidth_gbps").basis is Basis.UNKNOWN
    assert note is not None and "not in the GPU database" in note


def test_name_for_pci(db: GpuDatabase) -> None:
    assert db.name_for_pci(0x1002, 0x744C) == "Radeon RX 7900 XTX"
    assert db.name_for_pci(0x1002, 0x0001) is None


def test_versions_sharing_a_driver_name_are_told_apart_by_memory(db: GpuDatabase) -> None:
    mib = 1 << 20
    ten = db.fill(Gpu(name="NVIDIA GeForce RTX 3080", memory_total_bytes=10240 * mib))
    twelve = db.fill(Gpu(name="NVIDIA GeForce RTX 3080", memory_total_bytes=12288 * mib))

    assert ten.bandwidth_gbps == 760.3 and twelve.bandwidth_gbps == 912.4
    assert len(db.variants("NVIDIA GeForce RTX 3080")) == 2
    assert db.match("RTX 3080 (12GB)") is db.match("RTX 3080", 12 * GIB)


def test_an_undecidable_version_is_noted(db: GpuDatabase) -> None:
    filled, note = db.fill_with_note(Gpu(name="NVIDIA GeForce RTX 3080"))

    assert filled.bandwidth_gbps == 760.3
    assert note is not None and "several versions" in note


def test_the_shipped_database_loads_strictly() -> None:
    path = Path(__file__).resolve().parents[2] / "data" / "gpus.json"
    if not path.exists():
        pytest.skip("data/gpus.json not present")

    db = load_gpu_database(path)

    assert db.gpus and db.errors == ()
    rtx_3090 = db.match("NVIDIA GeForce RTX 3090")
    assert rtx_3090 is not None and rtx_3090.vendor is Vendor.NVIDIA
    assert db.match("NVIDIA GeForce RTX 3090 Ti") is not rtx_3090
