"""The commands about this machine: `detect` (its CPU, RAM and GPUs as a rig) and
`calibrate` (time llama.cpp here and keep measured / predicted speeds for later plans)."""

from __future__ import annotations

import argparse
import sys

from rigspark_gui.cli_base import EXIT_FITS, emit_json
from rigspark_gui.cli_inputs import gpu_database
from rigspark_gui.core.rig import VM_FEATURE, Cpu
from rigspark_gui.formats.jsonable import jsonable


def cmd_detect(args: argparse.Namespace) -> int:
    from rigspark_gui.catalog.device_overhead import shipped_device_overhead
    from rigspark_gui.hardware.detect import detect

    rig = detect(
        database=gpu_database(),
        timeout_s=5.0,
        probe_bandwidth=args.bandwidth,
        overhead=shipped_device_overhead(),
    )
    if args.json:
        from rigspark_gui.formats.rig import rig_json

        sys.stdout.write(rig_json(rig) + "\n")
        return EXIT_FITS
    from rigspark_gui.core.units import gib

    print(f"CPU: {rig.cpu.name} ({cpu_cores_text(rig.cpu)})")
    print(f"RAM: {gib(rig.ram_total_bytes)} total, {gib(rig.ram_usable_bytes)} usable")
    bw = rig.cpu.memory_bandwidth_gbps
    if bw:
        print(f"RAM bandwidth: {bw:.1f} GB/s ({rig.cpu.basis_of('memory_bandwidth_gbps').source})")
    else:
        print("RAM bandwidth: unknown (use --bandwidth)")
    if not rig.gpus:
        print("GPUs: none")
    for gpu in rig.gpus:
        mem = gib(gpu.memory_total_bytes) if gpu.memory_total_bytes else "unknown"
        bw_g = f"{gpu.bandwidth_gbps:.0f} GB/s" if gpu.bandwidth_gbps else "unknown"
        print(
            f"GPU {gpu.index}: {gpu.name}, {mem}, {bw_g} ({gpu.basis_of('bandwidth_gbps').basis})"
        )
        # its own overhead (backend context), the reserve every plan subtracts
        reserve = gpu.basis_of("reserve_bytes")
        print(f"  overhead {gpu.reserve_bytes / 2**20:.0f} MiB ({reserve.basis}): {reserve.source}")
    for note in rig.notes:
        print(f"Note: {note}")
    return EXIT_FITS


def cmd_calibrate(args: argparse.Namespace) -> int:
    from rigspark_gui.calibrate import (
        DEFAULT_QUANTS,
        find_runner,
        run_calibration,
        save_calibration,
    )
    from rigspark_gui.catalog.perf import load_perf
    from rigspark_gui.hardware.detect import detect, needs_measuring, with_measured_bandwidth

    runner = find_runner(args.llama_bench, args.llama_python)
    rig = detect(database=gpu_database(), timeout_s=5.0)
    if needs_measuring(rig.cpu):
        rig, _ = with_measured_bandwidth(rig)

    def progress(step: int, steps: int, what: str) -> None:
        print(f"[{step}/{steps}] {what}", file=sys.stderr, flush=True)

    cal = run_calibration(
        rig, runner, load_perf(), quants=args.quants or DEFAULT_QUANTS, progress=progress
    )
    path = save_calibration(cal)
    if args.json:
        emit_json({"schema_version": 1, "path": str(path), **jsonable(cal)})
        return EXIT_FITS
    from rigspark_gui.core.units import speed_text

    print(f"Calibrated with {cal.llama_cpp} ({cal.runner})")
    print(f"  {'device':<34} {'quant':<7} {'measured':>12} {'predicted':>12}  ratio")
    for r in cal.runs:
        ratio = f"{r.decode_ratio:.2f}" if r.decode_ratio else "-"
        print(
            f"  {r.device_name[:34]:<34} {r.quant:<7} {speed_text(r.measured_tok_s):>12} "
            f"{speed_text(r.predicted_tok_s):>12}  {ratio}"
        )
    print(f"Kept in {path}; plans on this machine use it from now on.")
    return EXIT_FITS


def cpu_cores_text(cpu: Cpu) -> str:
    """ "16 cores", or for a VM its vCPUs and the cores' worth they were timed at."""
    if VM_FEATURE not in cpu.features:
        return f"{cpu.cores or '?'} cores"
    text = f"{cpu.cores or '?'} vCPUs"
    if cpu.compute_cores is None:
        return text + "; whole cores or hyperthread pairs: measured with --bandwidth"
    worth = "core's" if cpu.compute_cores == 1 else "cores'"
    return text + f" giving {cpu.compute_cores:g} {worth} worth of compute, measured"
