"""Reading llama.cpp's `--fit` lines (common/fit.cpp, and libllama's before it) from real
published logs, and setting them against RigSpark's FitOutcome."""

from __future__ import annotations

import json
import time
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from rigspark_gui.catalog.perf import load_perf
from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.fit import FitDevice, FitOutcome, FitStatus
from rigspark_gui.core.model.model_spec import ModelSpec
from rigspark_gui.core.rig import Cpu, Rig
from rigspark_gui.formats.model_spec import read_model_spec
from rigspark_gui.reconcile import (
    MAX_LOG_BYTES,
    FitLog,
    LogReadError,
    compare_fit,
    format_reconciliation,
    parse_fit_log,
    parse_llama_log,
    reconcile,
    reconcile_log,
)

DATA = Path(__file__).with_name("data")
MIB = 1 << 20
GIB = 1 << 30


def _fit(name: str) -> FitLog:
    fit = parse_llama_log((DATA / name).read_text()).fit
    assert fit is not None
    return fit


# ------------------------------------------------------------------ the real logs


def test_two_gpus_that_need_no_change() -> None:
    """ggml-org/llama.cpp#23679: common_params_fit_impl, llama-server's timestamps."""
    fit = _fit("fit_2gpu_unchanged.log")
    assert fit.function == "common_params_fit_impl"
    assert fit.status is FitStatus.UNCHANGED and not fit.changed and fit.reason == ""
    assert (fit.projected_mib, fit.free_mib, fit.host_only) == (43726, 47216, False)
    got = [
        (d.name, d.description, d.device, d.total_mib, d.projected_mib, d.projected_free_mib)
        for d in fit.devices
    ]
    assert got == [
        ("CUDA0", "NVIDIA GeForce RTX 4090", "gpu:0", 24080, 22450, 1157),
        ("CUDA1", "NVIDIA GeForce RTX 4090", "gpu:1", 24080, 21275, 2332),
    ]
    assert [d.target_mib for d in fit.devices] == [1024, 1024]
    assert all(d.layers is None and d.used_mib is None for d in fit.devices)
    assert fit.seconds == 0.35
    assert (fit.first_line, fit.last_line) == (6, 12)
    # the context is not printed when nothing changes
    assert fit.initial_context is None and fit.context is None


def test_one_gpu_that_needs_no_change() -> None:
    """ggml-org/llama.cpp#21489: llama_params_fit_impl / llama_params_fit."""
    fit = _fit("fit_1gpu_unchanged.log")
    assert fit.function == "llama_params_fit_impl"
    assert fit.status is FitStatus.UNCHANGED
    assert (fit.projected_mib, fit.free_mib, fit.margin_mib) == (3287, 110100, 3471)
    assert fit.devices == () and fit.seconds is None


def test_five_gpus_after_a_moe_fit_and_the_load_it_set_up() -> None:
    """ggml-org/llama.cpp#18181: the MoE form '35 layers ( 0 overflowing)', then the load."""
    log = parse_llama_log((DATA / "fit_5gpu_moe_tail.log").read_text())
    fit = log.fit
    assert fit is not None and fit.status is FitStatus.FITTED and fit.changed
    (d,) = fit.devices
    assert (d.name, d.device, d.layers, d.overflowing, d.used_mib, d.free_mib) == (
        "CUDA4",
        "gpu:4",
        35,
        0,
        94327,
        2360,
    )
    assert d.description == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    assert fit.seconds == 9.25
    # the load-log reader still reads the lines around it
    assert [x.name for x in log.devices] == ["CUDA0", "CUDA1", "CUDA2", "CUDA3", "CUDA4"]
    assert log.model_path is not None and log.model_path.endswith("00001-of-00006.gguf")


def test_the_first_builds_deficit_wording() -> None:
    """ggml-org/llama.cpp#16653 (build 7003): 'N deficit', 'cannot fulfill margin'."""
    fit = _fit("fit_2gpu_deficit_old.log")
    assert fit.status is None  # the published excerpt stops before the verdict
    assert (fit.projected_mib, fit.free_mib) == (410593, 97017)
    assert (fit.margin_mib, fit.shortfall_mib) == (1024, 316493)
    assert [(d.name, d.projected_mib, d.projected_free_mib) for d in fit.devices] == [
        ("CUDA0", 201672, -153599),
        ("CUDA1", 208920, -160846),
    ]


def test_a_context_the_user_set() -> None:
    """HilbertraumAI/HilbertRaum#318: llama-server with -lv 4, --ctx-size 8192."""
    fit = _fit("fit_user_context.log")
    assert fit.function == "common_params_fit_impl"
    assert (fit.projected_mib, fit.free_mib) == (6007, 6898)
    assert (fit.margin_mib, fit.shortfall_mib) == (1024, 133)
    assert (fit.initial_context, fit.context, fit.context_set_by_user) == (8192, 8192, True)
    assert fit.status is None and fit.devices == ()


def test_fit_lines_are_not_counted_as_skipped() -> None:
    log = parse_llama_log((DATA / "fit_2gpu_unchanged.log").read_text())
    # three comments, two memory breakdowns and the empty last line are skipped
    assert (log.lines, log.skipped_lines) == (14, 6)


def test_a_log_without_fit_has_none() -> None:
    log = parse_llama_log((DATA / "llama_cpp_load.log").read_text())
    assert log.fit is None
    assert parse_fit_log((DATA / "llama_cpp_load.log").read_text()) is None


def test_a_fit_log_is_frozen() -> None:
    fit = _fit("fit_2gpu_unchanged.log")
    with pytest.raises(FrozenInstanceError):
        fit.status = FitStatus.FAILED  # type: ignore[misc]


# ------------------------------------------------------------------ every line fit.cpp prints

# Line formats from common/fit.cpp (b11434); the function names of both eras.
FITTED = """\
{fn}_impl: getting device memory data for initial parameters:
{fn}_impl: context size unset and KV cache not unified -> using 262144 for 2 sequences:
{fn}_impl: projected memory use with initial parameters [MiB]:
{fn}_impl:   - CUDA0 (NVIDIA GeForce RTX 3090): 24123 total, 25000 used,   -900 free vs. target of   1024
{fn}_impl:   - SYCL1 (Intel(R) Arc(TM) Pro B50 Graphics): 15881 total, 14405 used, 1176 free vs. target of 1024
{fn}_impl: projected to use 39405 MiB of device memory vs. 39728 MiB of free device memory
{fn}_impl: cannot meet free memory targets on all devices, need to use 1724 MiB less in total
{fn}_impl: context size reduced from 262144 to 131072 -> need 5120 MiB less memory in total
{fn}_impl: entire model should be fit across devices by reducing context
{fn}_impl: with only dense weights in device memory there is a total surplus of 20123 MiB
{fn}_impl: id=0, target=22099 MiB
load_tensors: offloading 40 repeating layers to GPU
{fn}_impl:   - CUDA0 (NVIDIA GeForce RTX 3090): 40 layers,  20000 MiB used,   3000 MiB free
{fn}_impl:   - CUDA0 (NVIDIA GeForce RTX 3090): 41 layers (3 overflowing),  21000 MiB used,   2000 MiB free
{fn}_impl:   - SYCL1 (Intel(R) Arc(TM) Pro B50 Graphics):  8 layers ( 0 overflowing),  14000 MiB used,    881 MiB free
{wrapper}: successfully fit params to free device memory
{wrapper}: fitting params to free memory took 1.23 seconds
"""  # noqa: E501
ERAS = [("llama_params_fit", "llama_params_fit"), ("common_params_fit", "common_fit_params")]


@pytest.mark.parametrize(("fn", "wrapper"), ERAS, ids=["libllama", "common"])
def test_every_line_of_a_fit_that_changed_things(fn: str, wrapper: str) -> None:
    fit = parse_fit_log(FITTED.format(fn=fn, wrapper=wrapper))
    assert fit is not None and fit.function == f"{fn}_impl"
    assert fit.status is FitStatus.FITTED
    assert (fit.initial_context, fit.context, fit.context_saving_mib) == (262144, 131072, 5120)
    assert (fit.shortfall_mib, fit.dense_surplus_mib, fit.seconds) == (1724, 20123, 1.23)
    cuda, sycl = fit.devices
    assert (cuda.projected_mib, cuda.projected_free_mib, cuda.target_mib) == (25000, -900, 1024)
    # the MoE pass's line replaces the dense pass's
    assert (cuda.layers, cuda.overflowing, cuda.used_mib, cuda.free_mib) == (41, 3, 21000, 2000)
    assert (sycl.name, sycl.description, sycl.device) == (
        "SYCL1",
        "Intel(R) Arc(TM) Pro B50 Graphics",
        "gpu:1",
    )
    assert (sycl.layers, sycl.overflowing, sycl.used_mib, sycl.free_mib) == (8, 0, 14000, 881)


@pytest.mark.parametrize(
    ("lines", "status", "reason"),
    [
        (
            "common_fit_params: failed to fit params to free device memory: "
            "n_gpu_layers already set by user to 99, abort",
            FitStatus.FAILED,
            "n_gpu_layers already set by user to 99, abort",
        ),
        (
            "[1234] 0.00.100.000 W llama_params_fit: failed to fit params to free device memory: "
            "model_params::tensor_split already set by user, abort",
            FitStatus.FAILED,
            "model_params::tensor_split already set by user, abort",
        ),
        (
            "common_fit_params: encountered an error while trying to fit params to free device "
            "memory: no CPU backend found",
            FitStatus.FAILED,
            "no CPU backend found",
        ),
        (
            "\x1b[32mcommon_fit_params: successfully fit params to free device memory\x1b[0m",
            FitStatus.FITTED,
            "",
        ),
    ],
    ids=["ngl-by-user", "split-by-user", "error", "ansi"],
)
def test_the_verdict_and_its_reason(lines: str, status: FitStatus, reason: str) -> None:
    head = (
        "common_params_fit_impl: projected to use 900 MiB of device memory vs. 800 MiB of "
        "free device memory\n"
    )
    fit = parse_fit_log(head + lines + "\n")
    assert fit is not None and (fit.status, fit.reason) == (status, reason)
    assert fit.projected_mib == 900


def test_no_gpu_weighs_host_memory() -> None:
    text = (
        "common_params_fit_impl: projected to use 5012 MiB of host memory vs. 64000 MiB of "
        "total host memory\n"
        "common_params_fit_impl: will leave 58988 >= 1024 MiB of system memory, no changes needed\n"
        "common_fit_params: successfully fit params to free device memory\n"
    )
    fit = parse_fit_log(text)
    assert fit is not None and fit.host_only and fit.status is FitStatus.UNCHANGED
    assert (fit.projected_mib, fit.free_mib, fit.margin_mib) == (5012, 64000, 1024)


def test_a_full_context_the_user_asked_for_and_a_second_fit() -> None:
    text = (
        "llama_params_fit_impl: projected to use 9000 MiB of device memory vs. 8000 MiB of "
        "free device memory\n"
        "llama_params_fit_impl: user has requested full context size of 131072 -> no change\n"
        "llama_params_fit: fitting params to free memory took 0.50 seconds\n"
        "llama_params_fit_impl: projected to use 3000 MiB of device memory vs. 8000 MiB of "
        "free device memory\n"
        "llama_params_fit_impl: will leave 5000 >= 1024 MiB of free device memory, "
        "no changes needed\n"
    )
    fit = parse_fit_log(text)
    assert fit is not None and fit.projected_mib == 3000  # the last fit is kept
    assert fit.status is FitStatus.UNCHANGED and fit.initial_context is None
    assert fit.first_line == 4


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "data",
    [
        "hello world\n",
        "xllama_params_fit_impl: projected to use 1 MiB of device memory vs. 2 MiB of free "
        "device memory\n",
        "common_params_fit_impl: projected to use 99999999999999999999 MiB of device memory\n",
        "common_params_fit_impl:   - CUDA0 ("
        + "(" * 5000
        + "): 1 layers, 1 MiB used, 1 MiB free\n",
        "common_params_fit_impl: " + "- " * 20000 + "\n",
        bytes(range(256)) * 64,
        "llama_params_fit_impl: " + "9" * 100_000 + "\n",
    ],
    ids=["garbage", "other-name", "huge-number", "parens", "dashes", "binary", "huge-line"],
)
def test_garbage_gives_no_fit(data: str | bytes) -> None:
    assert parse_fit_log(data) is None


def test_hostile_input_is_linear_and_bounded() -> None:
    line = "common_params_fit_impl:   - CUDA0 (" + "x " * 8000 + "\n"
    t0 = time.perf_counter()
    assert parse_fit_log(line * 2000) is None
    assert time.perf_counter() - t0 < 5.0
    with pytest.raises(LogReadError) as err:
        parse_fit_log("x" * (MAX_LOG_BYTES + 1))
    assert "\n" not in str(err.value) and isinstance(err.value, RigSparkError)


def test_a_binary_file_is_still_the_packages_one_line_error() -> None:
    with pytest.raises(LogReadError, match="binary"):
        parse_llama_log(b"llama_params_fit: successfully fit\x00" + bytes(64))


def test_many_device_names_are_capped() -> None:
    text = "".join(
        f"common_params_fit_impl:   - CUDA{i} (x): 1 layers, 1 MiB used, 1 MiB free\n"
        for i in range(500)
    )
    fit = parse_fit_log(text)
    assert fit is not None and len(fit.devices) == 64


# ------------------------------------------------------------------ against RigSpark's fit


def _device(device: str, projected_mib: int, layers: int = 0, overflowing: int = 0) -> FitDevice:
    return FitDevice(
        device=device,
        free_bytes=24 * GIB,
        margin_bytes=1024 * MIB,
        projected_bytes=projected_mib * MIB + MIB // 3,  # llama.cpp floors it
        layers=layers,
        overflowing=overflowing,
    )


def test_compare_fit_on_the_unchanged_two_gpu_log() -> None:
    fit = _fit("fit_2gpu_unchanged.log")
    outcome = FitOutcome(
        status=FitStatus.UNCHANGED,
        reason="",
        context=262144,
        ngl=-1,
        devices=(_device("gpu:0", 22451), _device("gpu:1", 21290)),
    )
    rows = {r.what: r for r in compare_fit(fit, outcome)}
    assert list(rows) == ["status", "projected MiB on gpu:0", "projected MiB on gpu:1"]
    assert rows["status"].agrees and rows["status"].logged == "unchanged"
    assert rows["projected MiB on gpu:0"].agrees  # 1 MiB apart: llama.cpp floors
    assert rows["projected MiB on gpu:0"].difference_mib == 1
    off = rows["projected MiB on gpu:1"]
    assert not off.agrees and off.difference_mib == 15
    assert (off.logged, off.predicted) == ("21,275", "21,290")


def test_compare_fit_rows_for_a_fitted_moe_load() -> None:
    fit = parse_fit_log(FITTED.format(fn="common_params_fit", wrapper="common_fit_params"))
    assert fit is not None
    outcome = FitOutcome(
        status=FitStatus.FITTED,
        reason="",
        context=131072,
        ngl=49,
        tensor_split=(41, 8),
        initial_context=262144,
        devices=(_device("gpu:0", 21000, 41, 3), _device("gpu:1", 14002, 8, 1)),
    )
    rows = {r.what: r for r in compare_fit(fit, outcome)}
    assert [w for w, r in rows.items() if r.agrees] == [
        "status",
        "initial context",
        "context",
        "layers on gpu:0",
        "projected MiB on gpu:0",
    ]
    assert rows["layers on gpu:1"].logged == "8"
    assert rows["layers on gpu:1"].predicted == "8 (1 overflowing)"
    assert rows["projected MiB on gpu:1"].difference_mib == 2
    wrong = FitOutcome(status=FitStatus.FAILED, reason="x", context=65536, ngl=-1)
    rows = {r.what: r for r in compare_fit(fit, wrong)}
    assert not rows["status"].agrees and not rows["context"].agrees
    assert "initial context" not in rows  # RigSpark did not say where it started


def test_compare_fit_matches_devices_by_order_when_names_do_not_map() -> None:
    text = (
        "common_params_fit_impl:   - RPC0 (10.0.69.2:50052): 30 layers, 90000 MiB used, "
        "1000 MiB free\n"
        "common_params_fit_impl:   - ROCm0 (8060S Graphics): 32 layers, 95000 MiB used, "
        "900 MiB free\n"
        "common_fit_params: successfully fit params to free device memory\n"
    )
    fit = parse_fit_log(text)
    assert fit is not None
    outcome = FitOutcome(
        status=FitStatus.FITTED,
        reason="",
        context=4096,
        ngl=62,
        devices=(_device("rpc-cpu:10.0.69.2", 90000, 30), _device("gpu:0", 95000, 32)),
    )
    rows = compare_fit(fit, outcome)
    assert [r.what for r in rows if r.what.startswith("layers")] == [
        "layers on rpc-cpu:10.0.69.2",
        "layers on gpu:0",
    ]
    assert all(r.agrees for r in rows)


def test_compare_fit_on_one_device_without_per_device_lines() -> None:
    fit = _fit("fit_1gpu_unchanged.log")
    outcome = FitOutcome(
        status=FitStatus.UNCHANGED,
        reason="",
        context=32768,
        ngl=-1,
        devices=(_device("gpu:0", 3286),),
    )
    rows = compare_fit(fit, outcome)
    assert [(r.what, r.logged, r.predicted, r.agrees) for r in rows] == [
        ("status", "unchanged", "unchanged", True),
        ("projected MiB on gpu:0", "3,287", "3,286", True),
    ]


# ------------------------------------------------------------------ wired into reconcile


@pytest.fixture(scope="module")
def synthetic() -> ModelSpec:
    return read_model_spec(json.loads((DATA / "llama3-gqa-Q4_K_M.spec.json").read_text()))


def _cpu_rig() -> Rig:
    return Rig(
        ram_total_bytes=64 * GIB,
        cpu=Cpu(name="Xeon", threads=2, memory_bandwidth_gbps=20.0, features=("avx2", "avx512")),
    )


HOST_FIT = (
    "llama_params_fit_impl: projected to use 36 MiB of host memory vs. 64000 MiB of total "
    "host memory\n"
    "llama_params_fit_impl: will leave 63964 >= 1024 MiB of system memory, no changes needed\n"
    "llama_params_fit: successfully fit params to free device memory\n"
    "llama_params_fit: fitting params to free memory took 0.02 seconds\n"
)


def test_reconcile_carries_the_fit_rows_and_prints_them(synthetic: ModelSpec) -> None:
    perf = load_perf()
    text = (DATA / "llama_cpp_load.log").read_text()
    plain = reconcile(text, synthetic, _cpu_rig(), perf)
    assert plain.fit_rows == () and plain.log.fit is None
    outcome = FitOutcome(
        status=FitStatus.UNCHANGED,
        reason="",
        context=4096,
        ngl=-1,
        devices=(_device("cpu", 36),),
    )
    r = reconcile(HOST_FIT + text, synthetic, _cpu_rig(), perf, fit_outcome=outcome)
    assert r.rows == plain.rows  # the buffers are compared as before
    assert [(x.what, x.agrees) for x in r.fit_rows] == [
        ("status", True),
        ("projected MiB on cpu", True),
    ]
    out = format_reconciliation(r)
    before = format_reconciliation(plain)
    assert "llama.cpp's fit" not in before
    assert "llama.cpp's fit: unchanged, projected 36 of 64,000 MiB host memory, took 0.02 s" in out
    assert any(x.startswith("status") and x.endswith("agrees") for x in out.splitlines())
    # without an outcome given, RigSpark works out its own fit for the load the log
    # shows (its settings, -c not given) and sets it against llama.cpp's
    own = reconcile(HOST_FIT + text, synthetic, _cpu_rig(), perf)
    told = format_reconciliation(own)
    assert "llama.cpp's fit: unchanged" in told and "fit decision" in told
    assert ("status", True) in [(x.what, x.agrees) for x in own.fit_rows]


def test_a_fit_only_log_reconciles_to_its_fit_rows(synthetic: ModelSpec) -> None:
    log = parse_llama_log((DATA / "fit_1gpu_unchanged.log").read_text())
    assert log.buffers == () and log.bench == ()
    outcome = FitOutcome(
        status=FitStatus.FITTED, reason="", context=4096, ngl=20, devices=(_device("gpu:0", 3287),)
    )
    r = reconcile_log(log, synthetic, _cpu_rig(), load_perf(), fit_outcome=outcome)
    assert r.rows == () and [(x.what, x.agrees) for x in r.fit_rows] == [
        ("status", False),
        ("projected MiB on gpu:0", True),
    ]
    status = next(x for x in format_reconciliation(r).splitlines() if x.startswith("status"))
    assert status.split() == ["status", "unchanged", "fitted", "differs"]
