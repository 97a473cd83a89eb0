"""Calibrating on this machine: llama.cpp timed on a synthetic model (here a stand-in
llama-bench), measured / predicted kept per device and family, plans scaled by it."""

from __future__ import annotations

import json
import stat
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from rigspark_gui.calibrate import (
    CalibrationCancelled,
    CalibrationError,
    apply,
    calibration_path,
    find_runner,
    load_calibration,
    run_calibration,
    save_calibration,
    synth,
)
from rigspark_gui.calibrate.runners import parse_bench_json
from rigspark_gui.cli import main
from rigspark_gui.core.memory import weights_layout
from rigspark_gui.core.placement import CPU, uniform_placement
from rigspark_gui.core.rig import Cpu, Gpu, Rig, Vendor
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import estimate_decode
from tests.calibrate import fake_llama
from tests.conftest import simple_speed_model

TINY = synth.Shape(n_layer=2, n_embd=256, n_head=4, n_head_kv=2, n_ff=512, n_vocab=512, head_dim=64)
QUANTS = ("Q8_0", "Q4_0")


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """llama-bench and llama-quantize on PATH, both the stand-in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    here = Path(fake_llama.__file__).parent
    for tool in ("llama-bench", "llama-quantize"):
        path = bin_dir / tool
        path.write_text(
            f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(here)!r})\n"
            "import fake_llama\nfake_llama.main()\n"
        )
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def this_machine(gpu: bool = False) -> Rig:
    gpus = (
        (
            Gpu(
                name="NVIDIA GeForce RTX 4090",
                vendor=Vendor.NVIDIA,
                memory_total_bytes=24 << 30,
                bandwidth_gbps=1008.0,
                fp16_tflops=165.0,
            ),
        )
        if gpu
        else ()
    )
    return Rig(
        name="This machine",
        gpus=gpus,
        ram_total_bytes=32 << 30,
        cpu=Cpu(name="Test CPU 9000", cores=4, memory_bandwidth_gbps=40.0, features=("avx2",)),
    )


def test_nothing_to_calibrate_with_says_how_to_get_it(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CalibrationError, match=r"llama-bench .* on PATH.*--llama-python"):
        find_runner()
    with pytest.raises(CalibrationError, match="no such Python"):
        find_runner(llama_python=tmp_path / "python-that-is-not-there")


def test_a_calibration_measures_every_device_and_family(fake_bin: Path) -> None:
    steps: list[tuple[int, int, str]] = []
    cal = run_calibration(
        this_machine(gpu=True),
        find_runner(),
        simple_speed_model(),
        quants=QUANTS,
        shape=TINY,
        progress=lambda *a: steps.append(a),
    )

    assert {(r.device, r.quant) for r in cal.runs} == {
        (d, q) for d in ("cpu", "gpu:0") for q in QUANTS
    }
    assert cal.llama_cpp == "llama.cpp fake123 (4242)"
    assert steps[-1][0] == steps[-1][1]  # progress reaches its end
    for r in cal.runs:
        assert r.predicted_tok_s and r.decode_ratio == pytest.approx(
            r.measured_tok_s / r.predicted_tok_s
        )
    scales = cal.scales()
    assert set(scales) == {"cpu:Test CPU 9000", "gpu:NVIDIA GeForce RTX 4090"}
    assert set(scales["cpu:Test CPU 9000"]) == {"q8", "legacy", "*"}


def test_a_calibrated_plan_lands_on_the_measured_speed(fake_bin: Path, tmp_path: Path) -> None:
    """After calibrating, the estimate for a model like the timed one is what llama.cpp
    measured: the prior's error on this machine is gone."""
    rig, prior = this_machine(), simple_speed_model()
    cal = run_calibration(rig, find_runner(), prior, quants=("Q4_0",), shape=TINY)
    model = apply(prior, cal)
    path = tmp_path / "m.gguf"
    f16 = synth.write_model(tmp_path / "f16.gguf", TINY)
    fake_llama.quantize(str(f16), str(path), "Q4_0")
    from rigspark_gui.catalog.gguf_import import import_gguf

    spec = import_gguf(path)
    s = PlanSettings(context=1024, prompt_tokens=80)
    placement = uniform_placement(spec.geometry, rig, s, CPU)
    layout = weights_layout(spec, spec.available_quants[0])
    before = estimate_decode(placement, spec.geometry, layout, rig, s, prior)
    after = estimate_decode(placement, spec.geometry, layout, rig, s, model)
    measured = fake_llama.TG_BYTES_PER_S / path.stat().st_size

    assert after.tok_s == pytest.approx(measured, rel=0.01)
    assert abs(before.tok_s / measured - 1) > 0.05  # the prior alone was off
    assert "calibrated on this machine" in after.basis and "fake123" in after.basis
    # another CPU (a rig file for some other machine) keeps the published prior
    other = replace(rig, cpu=replace(rig.cpu, name="Other CPU"))
    assert (
        "calibrated on this machine"
        not in estimate_decode(placement, spec.geometry, layout, other, s, model).basis
    )


def test_cancel_stops_the_run_and_keeps_nothing(fake_bin: Path, tmp_path: Path) -> None:
    cancel = threading.Event()
    work = tmp_path / "work"
    work.mkdir()

    def progress(step: int, _steps: int, _what: str) -> None:
        if step == 3:
            cancel.set()

    with pytest.raises(CalibrationCancelled):
        run_calibration(
            this_machine(), find_runner(), simple_speed_model(), quants=QUANTS, shape=TINY,
            progress=progress, cancel=cancel, workdir=work,
        )  # fmt: skip
    assert list(work.iterdir()) == []  # the synthetic models are gone with it


def test_a_failing_llama_cpp_is_one_clear_error(fake_bin: Path, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_LLAMA_FAIL", "1")
    with pytest.raises(CalibrationError, match=r"llama-bench failed: .*tensor data out of bounds"):
        run_calibration(
            this_machine(), find_runner(), simple_speed_model(), quants=("Q8_0",), shape=TINY
        )


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '[{"avg_ts": "fast"}]'])
def test_unreadable_bench_output_is_an_error(text: str) -> None:
    with pytest.raises(CalibrationError):
        parse_bench_json(text)


@pytest.mark.parametrize("content", ["{", '{"schema_version": 1}', "[]", '{"runs": 5}'])
def test_a_damaged_calibration_file_is_ignored(content: str) -> None:
    path = calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    assert load_calibration() is None


def test_cli_calibrate_end_to_end(fake_bin: Path, monkeypatch, capsys) -> None:
    import importlib

    detect_module = importlib.import_module("rigspark_gui.hardware.detect")
    rig = this_machine()
    monkeypatch.setattr(detect_module, "detect", lambda **_k: rig)
    monkeypatch.setattr(synth, "DEFAULT_SHAPE", TINY)

    code = main(["calibrate", "--quants", "Q8_0,Q4_0", "--json"])
    out, err = capsys.readouterr()

    assert code == 0, err
    data = json.loads(out)
    assert Path(data["path"]) == calibration_path()
    assert [r["quant"] for r in data["runs"]] == ["Q8_0", "Q4_0"]
    assert "[1/" in err  # progress on stderr, JSON alone on stdout
    saved = load_calibration()
    assert saved is not None and len(saved.runs) == 2

    # plans on this machine now say where their CPU speed comes from
    code = main(["plan", "--model", "llama-3.2-1b-instruct", "--json", "--kv-compare", "none"])
    out, err = capsys.readouterr()
    assert code == 0, err
    cpu = next(p for p in json.loads(out)["paths"] if p["path"] == "cpu")
    assert "calibrated on this machine" in cpu["throughput"]["basis"]


def test_cli_calibrate_without_llama_cpp_exits_2(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    code = main(["calibrate"])
    _out, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1 and "llama.cpp was not found" in err


def test_cli_rejects_an_unknown_quantization(capsys) -> None:
    assert main(["calibrate", "--quants", "Q9_9"]) == 2
    assert "--quants takes some of" in capsys.readouterr().err


def test_saved_calibration_round_trips(fake_bin: Path) -> None:
    cal = run_calibration(
        this_machine(), find_runner(), simple_speed_model(), quants=("Q8_0",), shape=TINY
    )
    save_calibration(cal)
    assert load_calibration() == cal


def test_a_crash_in_llamas_repacked_buffers_is_timed_without_them(tmp_path: Path) -> None:
    """llama.cpp's AMX buffers crash on some Xeons (ggml-org/llama.cpp#20824): the
    Python runner times again with them off and says so in the provenance."""
    from rigspark_gui.calibrate.runners import PythonRunner, ToolCrashed, run_tool

    fake = tmp_path / "python"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, signal, sys\n"
        "cmd = sys.argv[2]\n"
        "if cmd == 'version':\n"
        "    print(json.dumps({'llama_cpp_python': '9.9'}))\n"
        "elif cmd == 'bench':\n"
        "    job = json.loads(sys.argv[3])\n"
        "    if not job['no_extra_bufts']:\n"
        "        os.kill(os.getpid(), signal.SIGSEGV)\n"
        "    print(json.dumps({'tg_tok_s': 12.5, 'pp_tok_s': 300.0}))\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    runner = PythonRunner(fake)
    cancel = threading.Event()

    result = runner.bench(tmp_path / "m.gguf", None, cancel)

    assert result is not None and result.tg_tok_s == 12.5
    assert "#20824" in runner.name
    with pytest.raises(ToolCrashed, match="crashed"):
        run_tool([str(fake), "x", "bench", json.dumps({"no_extra_bufts": False})], cancel)


def test_a_calibrated_device_gets_the_narrow_band_of_the_check(fake_bin: Path) -> None:
    from rigspark_gui.calibrate.calibration import LOCAL_BAND

    rig, prior = this_machine(), simple_speed_model()
    cal = run_calibration(rig, find_runner(), prior, quants=("Q8_0",), shape=TINY)
    spec = spec_of_tiny()
    s = PlanSettings(context=1024)
    placement = uniform_placement(spec.geometry, rig, s, CPU)
    layout = weights_layout(spec, spec.available_quants[0])
    before = estimate_decode(placement, spec.geometry, layout, rig, s, prior)
    after = estimate_decode(placement, spec.geometry, layout, rig, s, apply(prior, cal))
    assert before.high_tok_s / before.tok_s == pytest.approx(1.5)  # the prior's CPU band
    assert after.high_tok_s / after.tok_s == pytest.approx(LOCAL_BAND.high)
    assert "narrows the band" in before.basis and "narrows" not in after.basis


def spec_of_tiny():
    from tests.conftest import LLAMA_31_8B, spec_of

    return spec_of(LLAMA_31_8B, "tiny-cal", ("Q8_0",))


def test_a_cpu_only_llama_cpp_python_is_not_timed_as_the_gpu(tmp_path: Path) -> None:
    from rigspark_gui.calibrate.runners import GpuTarget, PythonRunner

    fake = tmp_path / "python"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "job = json.loads(sys.argv[3])\n"
        "print(json.dumps({'no_gpu': True} if job['n_gpu_layers'] else\n"
        "                 {'tg_tok_s': 9.0, 'pp_tok_s': 90.0}))\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    runner, cancel = PythonRunner(fake), threading.Event()
    assert runner.bench(tmp_path / "m.gguf", GpuTarget("CUDA_VISIBLE_DEVICES", "0"), cancel) is None
    cpu = runner.bench(tmp_path / "m.gguf", None, cancel)
    assert cpu is not None and cpu.tg_tok_s == 9.0
