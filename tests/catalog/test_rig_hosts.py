"""Rig files as people write them: every machine under `hosts` (the first is this one),
host entries with the top level's fields, and GPUs named with their vendor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rigspark_gui.catalog.gpu_database import GpuDatabase, load_gpu_database, vendor_named
from rigspark_gui.catalog.rig_file import load_rig, validate_rig
from rigspark_gui.cli import main
from rigspark_gui.core.errors import InvalidRigError
from rigspark_gui.core.rig import GIB, Basis, Gpu, Vendor
from rigspark_gui.formats.rig import read_rig, rig_json
from rigspark_gui.resources import data_file

ROOT = Path(__file__).resolve().parents[2]
TWO_HOSTS = ROOT / "examples" / "rig-two-hosts-3090.json"
HOSTS_FORM = ROOT / "examples" / "rig-hosts-form.json"


def raw(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def write(tmp_path: Path, data: dict[str, Any], name: str = "rig.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def plan_json(capsys: pytest.CaptureFixture[str], rig: str, *args: str) -> dict[str, Any]:
    code = main(["plan", "--rig", rig, "--json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def error_of(data: dict[str, Any]) -> str:
    with pytest.raises(InvalidRigError) as err:
        validate_rig(data, "rig.json")
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.fixture(scope="module")
def database() -> GpuDatabase:
    return load_gpu_database(data_file("gpus.json"), lenient=True)


# ---------------------------------------------------------------- the all-hosts form


def test_the_hosts_form_example_is_the_two_hosts_example(database: GpuDatabase) -> None:
    assert validate_rig(raw(HOSTS_FORM)) == validate_rig(raw(TWO_HOSTS))
    rig = load_rig(HOSTS_FORM, database)
    assert rig == load_rig(TWO_HOSTS, database)
    assert [g.host for g in rig.gpus] == ["", "box2"]
    assert [h.name for h in rig.hosts] == ["box2"] and rig.address == "192.168.1.10"


@pytest.mark.parametrize(
    "args",
    [
        ("--model", "llama-3.1-70b-instruct"),
        ("--model", "qwen3-30b-a3b", "--context", "32768"),
        ("--model", "llama-3.1-8b-instruct", "--backend", "vllm"),
    ],
    ids=["70b", "moe-32k", "vllm"],
)
def test_a_rig_listing_every_machine_under_hosts_plans_the_same(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    written = plan_json(capsys, str(HOSTS_FORM), *args)
    today = plan_json(capsys, str(TWO_HOSTS), *args)
    assert written == today
    if "--backend" not in args:
        assert "multi-host" in [p["path"] for p in written["paths"]]


def test_the_first_host_names_the_rig_when_the_file_does_not() -> None:
    data = raw(HOSTS_FORM)
    del data["name"]
    assert validate_rig(data).name == "box1"
    assert validate_rig(raw(HOSTS_FORM)).name == "Two RTX 3090 boxes over 10 GbE"


def test_one_machine_under_hosts_is_a_rig_of_one() -> None:
    rig = validate_rig({"hosts": [{"name": "me", "ram_total_bytes": 64 * GIB}]})
    assert rig.hosts == () and rig.ram_total_bytes == 64 * GIB and rig.name == "me"


def test_this_machines_gpus_stay_its_own_whatever_host_they_name() -> None:
    data = raw(HOSTS_FORM)
    data["hosts"][0]["gpus"] = [{"name": "NVIDIA GeForce RTX 3090", "host": "box1"}] * 2
    rig = validate_rig(data)
    assert [(g.host, g.index) for g in rig.gpus] == [("", 0), ("", 1), ("box2", 0)]


# ---------------------------------------------------------------- host entries' fields


def test_a_host_entry_takes_the_top_levels_fields(capsys, tmp_path: Path) -> None:
    data = raw(HOSTS_FORM)
    data["hosts"][0].update(ram_available_bytes=20 * GIB, disk_free_bytes=500 * GIB)
    data["hosts"][1].update(
        ram_available_bytes=12 * GIB,
        ram_reserve_bytes=4 * GIB,
        unified_memory=False,
        disk_free_bytes=100 * GIB,
        provenance={"ram_total_bytes": {"basis": "measured", "source": "psutil"}},
        cpu={"name": "Intel Core i9-12900K", "cores": 16, "features": ["avx2"]},
    )
    rig = validate_rig(data)
    # the first host is this machine: its available RAM is what the plan's CPU may use
    assert rig.ram_available_bytes == 20 * GIB and rig.ram_usable_bytes == 20 * GIB
    assert rig.disk_free_bytes == 500 * GIB
    box2 = rig.hosts[0]
    assert box2.ram_available_bytes == 12 * GIB and box2.ram_usable_bytes == 12 * GIB
    assert box2.cpu.features == ("avx2",) and box2.disk_free_bytes == 100 * GIB
    assert box2.provenance["ram_total_bytes"].basis is Basis.MEASURED
    # written back in today's form, read back the same
    assert read_rig(json.loads(rig_json(rig))) == rig
    cpu = next(
        p
        for p in plan_json(capsys, write(tmp_path, data), "--model", "qwen2.5-0.5b-instruct")[
            "paths"
        ]
        if p["path"] == "cpu"
    )
    assert cpu["usable_bytes"] == 20 * GIB


def test_a_host_without_available_ram_keeps_its_reserve() -> None:
    rig = validate_rig(raw(TWO_HOSTS))
    box2 = rig.hosts[0]
    assert box2.ram_available_bytes is None
    assert box2.ram_usable_bytes == box2.ram_total_bytes - box2.ram_reserve_bytes


def test_todays_form_hosts_take_the_new_fields_too() -> None:
    data = raw(TWO_HOSTS)
    data["hosts"][0].update(ram_available_bytes=30 * GIB, unified_memory=True)
    box2 = validate_rig(data).hosts[0]
    assert box2.ram_usable_bytes == 30 * GIB and box2.unified_memory


def test_unified_memory_on_the_first_host_is_this_machines(capsys, tmp_path: Path) -> None:
    mac = {
        "name": "mac",
        "ram_total_bytes": 128 * GIB,
        "unified_memory": True,
        "gpus": [{"name": "Apple M4 Max"}],
    }
    data = {"hosts": [mac, {"name": "box2", "ram_total_bytes": 64 * GIB}]}
    rig = validate_rig(data)
    assert rig.unified_memory and rig.gpus[0].host == ""
    paths = plan_json(capsys, write(tmp_path, data), "--model", "llama-3.1-8b-instruct")["paths"]
    assert paths[0]["path"] == "unified"


# ---------------------------------------------------------------- errors, one line each


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("ram_total_bytes", "lots", "rig.json: hosts.1.ram_total_bytes: Input should be a valid"),
        ("ram_available_bytes", -1, "rig.json: hosts.1.ram_available_bytes: Input should be"),
        ("ram_available_bytes", 64 * GIB, "rig.json: hosts.1.ram_available_bytes: exceeds"),
        ("unified_memory", "maybe", "rig.json: hosts.1.unified_memory: Input should be"),
        ("network", {}, "rig.json: hosts.1.network: Extra inputs are not permitted"),
        ("cpu", {"cores": 0}, "rig.json: hosts.1.cpu.cores: Input should be greater than 0"),
    ],
)
def test_a_bad_field_in_the_second_host_is_named(field: str, value: Any, expected: str) -> None:
    data = raw(HOSTS_FORM)
    data["hosts"][1][field] = value
    assert error_of(data).startswith(expected)


def test_errors_in_the_first_host_and_in_gpus_are_named_where_they_are_written() -> None:
    data = raw(HOSTS_FORM)
    del data["hosts"][0]["ram_total_bytes"]
    assert error_of(data) == "rig.json: hosts.0.ram_total_bytes: Field required"
    data = raw(HOSTS_FORM)
    data["hosts"][0]["ram_available_bytes"] = 100 * GIB
    assert error_of(data) == "rig.json: hosts.0.ram_available_bytes: exceeds ram_total_bytes"
    data = raw(HOSTS_FORM)
    data["hosts"][1]["gpus"][0]["memory_total_bytes"] = -1
    assert error_of(data).startswith("rig.json: hosts.1.gpus.0.memory_total_bytes: ")
    data = raw(TWO_HOSTS)
    data["hosts"][0]["gpus"][0]["reserve_bytes"] = -1
    assert error_of(data).startswith("rig.json: hosts.0.gpus.0.reserve_bytes: ")


def test_a_machine_field_beside_the_all_hosts_form_is_refused() -> None:
    data = raw(HOSTS_FORM)
    data["cpu"] = {"cores": 8}
    assert error_of(data).startswith("rig.json: cpu: the rig lists every machine under hosts")
    data = raw(HOSTS_FORM)
    data["gpus"] = [{"name": "NVIDIA GeForce RTX 3090"}]
    assert error_of(data).startswith("rig.json: gpus: the rig lists every machine under hosts")


def test_the_first_host_shares_no_name() -> None:
    data = raw(HOSTS_FORM)
    data["hosts"][1]["name"] = "box1"
    assert error_of(data) == "rig.json: hosts.1.name: two hosts share a name"


def test_no_hosts_and_no_ram_is_still_a_missing_field() -> None:
    assert error_of({"hosts": []}) == "rig.json: ram_total_bytes: Field required"


# ---------------------------------------------------------------- GPUs named with their vendor


# a data-centre card the database does not list (the L20 it once stood for is listed now)
L20 = {"name": "NVIDIA L10", "memory_total_bytes": 48 * GIB}


def test_an_nvidia_l20_with_its_memory_is_an_nvidia_gpu(
    capsys, tmp_path: Path, database: GpuDatabase
) -> None:
    assert database.match("NVIDIA L10") is None  # the point: not in the database
    data = {"ram_total_bytes": 128 * GIB, "gpus": [L20]}
    path = Path(write(tmp_path, data))
    gpu = load_rig(path, database).gpus[0]
    assert gpu.vendor is Vendor.NVIDIA and gpu.memory_total_bytes == 48 * GIB
    assert gpu.basis_of("vendor").basis is Basis.USER
    assert gpu.basis_of("bandwidth_gbps").basis is Basis.UNKNOWN
    out = plan_json(capsys, str(path), "--model", "llama-3.1-8b-instruct")
    by_path = {p["path"]: p for p in out["paths"]}
    assert by_path["gpu"]["fits"] and "gpu:0" in by_path["gpu"]["devices"]
    assert out["recommended"] == "gpu"
    assert any("NVIDIA L10" in n and "an NVIDIA GPU by its name" in n for n in out["notes"])


def test_the_hosts_form_with_l20s_plans_them_across_hosts(capsys, tmp_path: Path) -> None:
    data = raw(HOSTS_FORM)
    for host in data["hosts"]:
        host["gpus"] = [L20]
    out = plan_json(capsys, write(tmp_path, data), "--model", "llama-3.1-70b-instruct")
    assert {"gpu", "multi-host"} <= {p["path"] for p in out["paths"]}


def test_an_unknown_vendor_stays_other(capsys, tmp_path: Path, database: GpuDatabase) -> None:
    data = {
        "ram_total_bytes": 64 * GIB,
        "gpus": [{"name": "MTT S4000", "memory_total_bytes": 48 * GIB}],
    }
    path = write(tmp_path, data)
    assert load_rig(Path(path), database).gpus[0].vendor is Vendor.OTHER
    paths = plan_json(capsys, path, "--model", "llama-3.1-8b-instruct")["paths"]
    assert [p["path"] for p in paths] == ["cpu"]


def test_a_vendor_given_or_measured_is_kept(database: GpuDatabase) -> None:
    given = Gpu(name="NVIDIA Mystery", vendor=Vendor.AMD, memory_total_bytes=GIB)
    assert database.fill(given).vendor is Vendor.AMD
    empty = GpuDatabase()  # the window's fallback when the database cannot be read
    assert (
        empty.fill(Gpu(name="AMD Radeon AI PRO R9999", memory_total_bytes=GIB)).vendor is Vendor.AMD
    )


def test_an_apple_gpu_by_name_shares_memory(database: GpuDatabase) -> None:
    gpu = database.fill(Gpu(name="Apple M9 Ultra", memory_total_bytes=96 * GIB))
    assert gpu.vendor is Vendor.APPLE and gpu.unified


@pytest.mark.parametrize(
    ("name", "vendor"),
    [
        ("NVIDIA L20", Vendor.NVIDIA),
        ("GeForce RTX 5090 D v2", Vendor.NVIDIA),
        ("Quadro RTX 8000", Vendor.NVIDIA),
        ("Tesla T10", Vendor.NVIDIA),
        ("nvidia-h20", Vendor.NVIDIA),
        ("AMD Instinct MI308X", Vendor.AMD),
        ("Radeon PRO W7800 48GB", Vendor.AMD),
        ("Intel Arc Pro B60", Vendor.INTEL),
        ("Arc B770", Vendor.INTEL),
        ("Apple M5 Max", Vendor.APPLE),
        ("MTT S4000", None),
        ("Ascend 910B", None),
        ("Archer 9000", None),  # a whole word, not a prefix
        ("AMD and NVIDIA", None),  # two vendors: neither
    ],
)
def test_the_vendor_a_name_gives(name: str, vendor: Vendor | None) -> None:
    assert vendor_named(name) is vendor


def test_a_cores_worth_above_the_cores_is_refused_in_one_line() -> None:
    cpu = {"name": "VM", "cores": 2, "features": ["hypervisor"], "compute_cores": 3.0}
    data: dict[str, Any] = {"schema_version": 1, "ram_total_bytes": 24 * GIB, "cpu": cpu}
    assert error_of(data) == "rig.json: cpu.compute_cores: exceeds the 2 cores"
    data["cpu"]["compute_cores"] = 1.0
    assert validate_rig(data, "rig.json").cpu.compute_cores == 1.0
