"""The llama.cpp a calibration times: `llama-bench` (with `llama-quantize`) from a
llama.cpp build, or a Python that has llama-cpp-python. RigSpark never installs either.

Every call runs a child process with a time limit and can be cancelled from another
thread; a failure is a CalibrationError with the tool's own last words."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple, Protocol

from rigspark_gui.core.errors import RigSparkError

PROBE_SCRIPT = Path(__file__).with_name("probe_script.py")
# Short runs, the best of three: shared and virtual machines vary by 5-10 % run to run.
N_PROMPT, N_GEN, REPEATS = 64, 48, 3
STEP_TIMEOUT_S = 300.0


class CalibrationError(RigSparkError):
    """llama.cpp could not be found or run."""


class ToolCrashed(CalibrationError):
    """The tool died on a signal (a crash inside llama.cpp, not a usage error)."""


class CalibrationCancelled(CalibrationError):
    def __init__(self) -> None:
        super().__init__("calibration cancelled")


class BenchResult(NamedTuple):
    tg_tok_s: float
    pp_tok_s: float
    build: str


class GpuTarget(NamedTuple):
    """A GPU to time on: the variable that shows llama.cpp only it, and its value."""

    visible_env: str  # CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES ...
    value: str  # the vendor's device index as that variable takes it


class Runner(Protocol):
    name: str

    def version(self, cancel: threading.Event) -> str: ...
    def quantize(self, src: Path, dst: Path, quant: str, cancel: threading.Event) -> None: ...
    def bench(
        self, model: Path, gpu: GpuTarget | None, cancel: threading.Event
    ) -> BenchResult | None: ...


def run_tool(cmd: list[str], cancel: threading.Event, env: dict[str, str] | None = None) -> str:
    """stdout of `cmd`; CalibrationError with its stderr's tail when it fails."""
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
    except OSError as err:
        raise CalibrationError(f"cannot run {Path(cmd[0]).name}: {err.strerror or err}") from None
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True),  # type: ignore[union-attr]
    ]
    for r in readers:
        r.start()
    deadline = time.monotonic() + STEP_TIMEOUT_S
    try:
        while proc.poll() is None:
            if cancel.is_set():
                raise CalibrationCancelled()
            if time.monotonic() > deadline:
                raise CalibrationError(
                    f"{Path(cmd[0]).name} took longer than {STEP_TIMEOUT_S:.0f} s"
                )
            time.sleep(0.05)
    finally:
        if proc.poll() is None:  # cancelled, timed out or interrupted: no orphan left
            proc.kill()
            proc.wait()
        for r in readers:
            r.join(30)
    if proc.returncode < 0 or proc.returncode in (132, 134, 136, 139):
        raise ToolCrashed(f"{Path(cmd[0]).name} crashed (exit status {proc.returncode})")
    if proc.returncode != 0:
        tail = "".join(err).strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        raise CalibrationError(f"{Path(cmd[0]).name} failed: {tail[0][:300]}")
    return "".join(out)


class LlamaBenchRunner:
    """A llama.cpp build: llama-bench times, llama-quantize writes the quantized files."""

    def __init__(self, bench: Path, quantize: Path) -> None:
        self.bench_path, self.quantize_path = bench, quantize
        self.name = f"llama-bench ({bench})"

    def version(self, cancel: threading.Event) -> str:
        # llama-bench has no --version; its JSON rows carry the build (build_commit)
        return "llama-bench"

    def quantize(self, src: Path, dst: Path, quant: str, cancel: threading.Event) -> None:
        run_tool([str(self.quantize_path), str(src), str(dst), quant], cancel)

    def bench(
        self, model: Path, gpu: GpuTarget | None, cancel: threading.Event
    ) -> BenchResult | None:
        cmd = [
            str(self.bench_path), "-m", str(model), "-p", str(N_PROMPT), "-n", str(N_GEN),
            "-r", str(REPEATS), "-ngl", "0" if gpu is None else "99", "-o", "json",
            "-t", str(physical_cores()),
        ]  # fmt: skip
        rows = parse_bench_json(run_tool(cmd, cancel, target_env(gpu)))
        if gpu is not None and not any(r.get("gpu_info") for r in rows):
            return None  # a CPU-only build: nothing to learn about the GPU
        pp = next((r for r in rows if int(r.get("n_prompt", 0)) > 0 and not r.get("n_gen")), None)
        tg = next((r for r in rows if int(r.get("n_gen", 0)) > 0), None)
        if pp is None or tg is None:
            raise CalibrationError("llama-bench printed no prompt and generation results")
        build = f"llama.cpp {tg.get('build_commit', '?')} ({tg.get('build_number', '?')})"
        return BenchResult(float(tg["avg_ts"]), float(pp["avg_ts"]), build)  # type: ignore[arg-type]


def parse_bench_json(text: str) -> list[dict[str, object]]:
    start = text.find("[")
    try:
        rows = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        rows = None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise CalibrationError("llama-bench's JSON output could not be read")
    for r in rows:
        ts = r.get("avg_ts")
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts <= 0:
            raise CalibrationError("llama-bench's JSON output has no avg_ts figure")
        for key in ("n_prompt", "n_gen"):
            if not isinstance(r.get(key, 0), int):
                raise CalibrationError(f"llama-bench's JSON output has a bad {key}")
    return rows


def physical_cores() -> int:
    """Threads to time with: llama.cpp's default is the physical core count."""
    try:
        import psutil

        return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)
    except Exception:  # psutil missing or failing: the logical count is what is known
        return max(1, os.cpu_count() or 1)


def target_env(gpu: GpuTarget | None) -> dict[str, str]:
    """Variables that show llama.cpp only the device being timed. For the CPU, every GPU
    is hidden: with one visible, llama.cpp hands prompt batches to it even at -ngl 0."""
    if gpu is None:
        return {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": ""}
    env = {gpu.visible_env: gpu.value}
    if gpu.visible_env == "CUDA_VISIBLE_DEVICES":
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # NVML's order, not CUDA's fastest-first
    return env


class PythonRunner:
    """A Python interpreter that has llama-cpp-python; runs probe_script.py by its path."""

    def __init__(self, python: Path) -> None:
        self.python = python
        self.name = f"llama-cpp-python ({python})"
        self.no_extra_bufts = False

    def version(self, cancel: threading.Event) -> str:
        text = run_tool([str(self.python), str(PROBE_SCRIPT), "version"], cancel)
        try:
            return f"llama-cpp-python {json.loads(text)['llama_cpp_python']}"
        except (ValueError, KeyError, TypeError):
            raise CalibrationError(f"{self.python} has no usable llama-cpp-python") from None

    def quantize(self, src: Path, dst: Path, quant: str, cancel: threading.Event) -> None:
        run_tool(
            [str(self.python), str(PROBE_SCRIPT), "quantize", str(src), str(dst), quant], cancel
        )

    def bench(
        self, model: Path, gpu: GpuTarget | None, cancel: threading.Event
    ) -> BenchResult | None:
        job = {"path": str(model), "n_gpu_layers": 0 if gpu is None else 999,
               "n_prompt": N_PROMPT, "n_gen": N_GEN, "repeats": REPEATS,
               "no_extra_bufts": self.no_extra_bufts,
               "threads": physical_cores()}  # fmt: skip
        env = target_env(gpu)
        cmd = [str(self.python), str(PROBE_SCRIPT), "bench"]
        try:
            text = run_tool([*cmd, json.dumps(job)], cancel, env)
        except ToolCrashed:
            if self.no_extra_bufts:
                raise
            # llama.cpp's AMX buffers crash on some Xeons and VMs (ggml-org/llama.cpp#20824):
            # time it as `--no-repack` runs it, and say so in the calibration's provenance
            self.no_extra_bufts = True
            self.name += ", repacked CPU buffers off after a crash (llama.cpp #20824)"
            text = run_tool([*cmd, json.dumps({**job, "no_extra_bufts": True})], cancel, env)
        try:
            data = json.loads(text.strip().splitlines()[-1])
            if data.get("no_gpu"):
                return None  # a CPU-only build: nothing to learn about the GPU
            return BenchResult(float(data["tg_tok_s"]), float(data["pp_tok_s"]), "")
        except (ValueError, KeyError, TypeError, IndexError):
            raise CalibrationError("the llama-cpp-python benchmark printed no result") from None


def find_runner(llama_bench: Path | None = None, llama_python: Path | None = None) -> Runner:
    """The llama.cpp to time: given paths first, then llama-bench on PATH, then this
    interpreter if it has llama-cpp-python. CalibrationError says how to get one."""
    if llama_python is not None:
        if not llama_python.exists():
            raise CalibrationError(f"no such Python: {llama_python}")
        return PythonRunner(llama_python)
    bench = str(llama_bench) if llama_bench is not None else shutil.which("llama-bench")
    if bench is not None:
        bench_path = Path(bench)
        if not bench_path.exists():
            raise CalibrationError(f"no such program: {bench_path}")
        beside = bench_path.with_name("llama-quantize")
        quantize = beside if beside.exists() else shutil.which("llama-quantize")
        if quantize is None:
            raise CalibrationError(f"llama-quantize was not found beside {bench_path} or on PATH")
        return LlamaBenchRunner(bench_path, Path(quantize))
    if importlib.util.find_spec("llama_cpp") is not None:
        return PythonRunner(Path(sys.executable))
    raise CalibrationError(
        "llama.cpp was not found: put llama-bench (and llama-quantize) on PATH, or pass "
        "--llama-python with a Python that has llama-cpp-python. RigSpark does not install it."
    )
