"""`rigspark-plan schema NAME`, and the output models it prints: each reads back exactly
the JSON the CLI writes (the CLI writes through `jsonable`, never through these models)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from rigspark_gui import cli
from rigspark_gui.cli import main
from rigspark_gui.cli_schema import SCHEMAS

ROOT = Path(__file__).resolve().parents[2]
RIG = str(ROOT / "examples" / "rig-2x3090.json")
TWO_HOSTS = str(ROOT / "examples" / "rig-two-hosts-3090.json")
RECONCILE_DATA = ROOT / "tests" / "reconcile" / "data"
KV_ALL = ["--kv-compare", "all", "--kv-k", "q8_0", "--kv-v", "q8_0", "--flash-attn", "on"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def schema_model(name: str) -> type[BaseModel]:
    """The pydantic model `schema NAME` prints."""
    model = SCHEMAS[name].load()
    assert issubclass(model, BaseModel)
    return model


def assert_round_trip(name: str, data: dict[str, Any]) -> None:
    """The output model reads the CLI's JSON and writes back exactly the same data."""
    back = schema_model(name).model_validate(data).model_dump(mode="json")
    assert back == data


# ---------------------------------------------------------------- the command


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_every_name_prints_a_json_schema(name: str, capsys) -> None:
    code, out, err = run(capsys, "schema", name)
    assert code == 0, err
    assert out.startswith("{\n  ")  # indented
    schema = json.loads(out)
    assert "properties" in schema or "$defs" in schema
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_rig_schema_has_its_ranges(capsys) -> None:
    code, out, _ = run(capsys, "schema", "rig")
    assert code == 0
    assert json.loads(out)["properties"]["ram_total_bytes"]["minimum"] == 0


def test_a_catalog_entry_schema_has_its_ranges(capsys) -> None:
    code, out, _ = run(capsys, "schema", "catalog-entry")
    assert code == 0
    props = json.loads(out)["properties"]
    assert props["id"]["pattern"] and props["name"]["minLength"] == 1


def test_outputs_list_every_key_they_write(capsys) -> None:
    code, out, _ = run(capsys, "schema", "plan")
    assert code == 0
    schema = json.loads(out)
    assert set(schema["required"]) == set(schema["properties"])
    assert {"paths", "recommended", "suggestions", "serving", "launch"} <= set(schema["required"])


@pytest.mark.parametrize("argv", [["schema"], ["schema", "--list"]])
def test_schema_alone_lists_the_names(argv: list[str], capsys) -> None:
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == list(SCHEMAS)
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0
    assert list(json.loads(out)) == list(SCHEMAS)


def test_the_names_are_the_promised_ones() -> None:
    assert {
        "rig", "settings", "model-spec", "catalog-entry", "gpu-database", "speed-model",
        "calibration", "report", "plan", "place", "rank", "models", "gpus", "reconcile",
    } <= set(SCHEMAS)  # fmt: skip


def test_an_unknown_name_is_one_line_exit_2(capsys) -> None:
    code, out, err = run(capsys, "schema", "rigg")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "invalid choice: 'rigg'" in err


def test_schema_gets_its_own_flags(capsys) -> None:
    from rigspark_gui.cli_args import SUBCOMMANDS, build_parser

    assert "schema" in SUBCOMMANDS
    with pytest.raises(SystemExit) as done:
        build_parser(["schema", "--help"]).parse_args(["schema", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "rigspark-plan schema" in out and "--list" in out and "NAME" in out


def test_listing_the_names_imports_no_pydantic() -> None:
    """The parser lists the names on every run; only printing a schema loads pydantic."""
    code = """
        import contextlib, io, json, sys
        from rigspark_gui.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            main(["schema", "--list"])
        print(json.dumps("pydantic" in sys.modules))
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) is False


@pytest.mark.parametrize(
    ("name", "path"),
    [
        *(("rig", f"examples/{p.name}") for p in sorted((ROOT / "examples").glob("rig-*.json"))),
        ("speed-model", "data/speed_model.json"),
        ("gpu-database", "data/gpus.json"),
        ("quality", "data/quant_quality.json"),
    ],
)
def test_shipped_files_fit_their_schema(name: str, path: str) -> None:
    schema_model(name).model_validate(json.loads((ROOT / path).read_text(encoding="utf-8")))


def test_every_catalog_entry_fits_its_schema() -> None:
    raw = json.loads((ROOT / "data" / "models.json").read_text(encoding="utf-8"))
    entry = schema_model("catalog-entry")
    for item in raw["models"]:
        entry.model_validate(item)


# ---------------------------------------------------------------- the outputs read back


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("plan", ["plan", "--model", "llama-3.1-8b-instruct", "--rig", RIG]),
        ("plan", ["plan", "--model", "llama-3.1-8b-instruct", "--rig", RIG, "--backend", "vllm"]),
        ("plan", ["plan", "--model", "qwen3-30b-a3b", "--rig", TWO_HOSTS, "--context", "32k"]),
        ("plan", ["plan", "--model", "llama-3.1-70b-instruct", "--rig", RIG, *KV_ALL]),
        ("place", ["place", "--model", "llama-3.1-8b-instruct", "--rig", RIG]),
        ("place", ["place", "--model", "llama-3.1-70b-instruct", "--rig", RIG, "--ngl", "40"]),
        ("rank", ["rank", "--rig", RIG]),
        ("models", ["models"]),
        ("gpus", ["gpus"]),
    ],
    ids=lambda v: v if isinstance(v, str) else "-".join(a for a in v if "/" not in a),
)
def test_an_output_reads_back_as_written(name: str, argv: list[str], capsys) -> None:
    code, out, err = run(capsys, *argv, "--json")
    assert code in (0, 1), err
    data = json.loads(out)
    assert_round_trip(name, data)
    if name == "plan" and "vllm" in argv:
        assert data["serving"] is not None  # the serving engine's figures are covered


def test_reconcile_output_reads_back(capsys, tmp_path: Path, monkeypatch) -> None:
    from rigspark_gui.formats.model_spec import read_model_spec

    spec = read_model_spec(json.loads((RECONCILE_DATA / "llama3-gqa-Q4_K_M.spec.json").read_text()))
    model_file = tmp_path / "llama3-gqa-Q4_K_M.gguf"
    model_file.write_bytes(b"GGUF")
    monkeypatch.setattr("rigspark_gui.cli_commands_plan.load_model", lambda args: spec)
    for log in ("llama_cpp_load.log", "llama_server_2gpu.log", "llama_bench.json"):
        argv = ["reconcile", str(RECONCILE_DATA / log), "--model-file", str(model_file)]
        code, out, err = run(capsys, *argv, "--rig", RIG, "--json")
        assert code == 0, err
        data = json.loads(out)
        assert data["rows"] or data["speeds"]
        assert_round_trip("reconcile", data)


def test_local_models_output_reads_back(capsys, tmp_path: Path, monkeypatch) -> None:
    from tests.importers.importer_helpers import Dims, decoder_kv, decoder_tensors, write_gguf

    for var in ("OLLAMA_MODELS", "HF_HOME", "HF_HUB_CACHE", "LLAMA_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = tmp_path / "models"
    folder.mkdir()
    d = Dims(n_layer=2, n_embd=64, n_head=2, n_head_kv=1, head_dim=32, n_ff=128, n_vocab=16)
    write_gguf(folder / "tiny-Q8_0.gguf", "llama", decoder_kv("llama", d), decoder_tensors(d))
    (folder / "garbage.gguf").write_bytes(b"not a gguf")
    code, out, err = run(capsys, "models", "--folder", str(folder), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["models"] and data["skipped"]
    assert_round_trip("local-models", data)


def test_calibrate_output_reads_back(capsys, tmp_path: Path, monkeypatch) -> None:
    import importlib

    from rigspark_gui import calibrate
    from rigspark_gui.calibrate import DeviceRun, LocalCalibration
    from rigspark_gui.catalog.rig_file import load_rig

    detect_module = importlib.import_module("rigspark_gui.hardware.detect")
    rig = load_rig(Path(RIG), cli.gpu_database)
    cal = LocalCalibration(
        created_at="2025-01-01T00:00:00Z",
        llama_cpp="llama.cpp b5000",
        runner="llama-bench",
        runs=(
            DeviceRun(device="cpu", device_name="CPU", quant="Q4_K_M", measured_tok_s=12.5,
                      predicted_tok_s=10.0, measured_prefill_tok_s=80.0,
                      predicted_prefill_tok_s=None),
            DeviceRun(device="gpu:0", device_name="RTX 3090", quant="Q8_0", measured_tok_s=90,
                      predicted_tok_s=None, measured_prefill_tok_s=2000.0,
                      predicted_prefill_tok_s=1800.5),
        ),
    )  # fmt: skip
    monkeypatch.setattr(detect_module, "detect", lambda **_k: rig)
    monkeypatch.setattr(calibrate, "find_runner", lambda *_a: object(), raising=False)
    monkeypatch.setattr(calibrate, "run_calibration", lambda *_a, **_k: cal)
    monkeypatch.setattr(calibrate, "save_calibration", lambda _cal: tmp_path / "cal.json")
    code, out, err = run(capsys, "calibrate", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["path"] == str(tmp_path / "cal.json") and len(data["runs"]) == 2
    assert_round_trip("calibrate", data)
