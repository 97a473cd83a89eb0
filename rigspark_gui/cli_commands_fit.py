"""`fit`: paste a llama.cpp command line, get what llama.cpp's --fit would do with it,
in the form `llama-fit-params` prints (`-c N -ngl N [-ts ...] [-ot "..."]`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rigspark_gui.cli_base import EXIT_FITS, EXIT_NO_FIT, PROG, emit_json
from rigspark_gui.cli_inputs import load_rig_arg

FIT_SCHEMA_VERSION = 1

if TYPE_CHECKING:
    from rigspark_gui.core.fit import FitCommand
    from rigspark_gui.core.model import Geometry
    from rigspark_gui.core.rig import Rig
    from rigspark_gui.core.settings import PlanSettings


def rpc_devices(rig: Rig, addresses: tuple[str, ...]) -> list[str]:
    """The rig's devices behind each --rpc address, in llama.cpp's order (the RPC
    servers first, as listed), then this machine's GPUs. An address may carry its port."""
    from rigspark_gui.core.errors import InvalidSettingsError
    from rigspark_gui.core.placement import gpu_device
    from rigspark_gui.core.rig import rpc_cpu_device

    out: list[str] = []
    for address in addresses:
        bare = address.rsplit(":", 1)[0] if address.count(":") == 1 else address
        host = next(
            (h for h in rig.hosts if h.address in (address, bare) or h.name in (address, bare)),
            None,
        )
        if host is None:
            known = ", ".join(h.address or h.name for h in rig.hosts) or "none"
            raise InvalidSettingsError(
                f"--rpc {address}: no host of the rig has this address (hosts: {known})"
            )
        gpus = [gpu_device(i) for i, g in enumerate(rig.gpus) if g.host == host.name]
        out.extend(gpus or [rpc_cpu_device(host.name)])
    out.extend(gpu_device(i) for i, g in enumerate(rig.gpus) if not g.host)
    return out


def fit_settings(cmd: FitCommand, rig: Rig, devices: list[str], g: Geometry) -> PlanSettings:
    """PlanSettings for the command line, flash attention auto resolved for the devices."""
    from dataclasses import replace

    from rigspark_gui.core.fit import AUTO_SLOTS
    from rigspark_gui.core.flash_attn import resolve_flash_attn_auto
    from rigspark_gui.core.settings import make_settings

    parallel, unified = cmd.parallel, cmd.kv_unified
    if parallel < 0:  # llama-server's auto slots
        parallel, unified = AUTO_SLOTS, True
    s = make_settings(
        kv_k=cmd.kv_k,
        kv_v=cmd.kv_v,
        flash_attn="auto" if cmd.flash_attn == "auto" else cmd.flash_attn == "on",
        parallel=max(parallel, 1),
        kv_unified=unified,
        n_ubatch=cmd.n_ubatch,
        swa_full=cmd.swa_full,
        fit=cmd.fit,
        fit_target_mib=cmd.fit_target_mib,
        fit_ctx=cmd.fit_ctx,
        # a context the user gave; without one, fit's own steps choose every context
        context=cmd.context or cmd.fit_ctx,
    )
    if s.is_auto("flash_attn"):
        on, _ = resolve_flash_attn_auto(rig, devices, s.kv_k, s.kv_v, g, s.gpu_backend)
        s = replace(s, flash_attn=on)
    return s


def cmd_fit(args: argparse.Namespace) -> int:
    from rigspark_gui.catalog.gguf_cache import gguf_spec
    from rigspark_gui.cli_projector import fit_with_projector, split_projector_flags
    from rigspark_gui.core.errors import InvalidSettingsError, ModelImportError
    from rigspark_gui.core.fit import UserFlags, llama_fit, parse_fit_command
    from rigspark_gui.formats.jsonable import jsonable

    argv = list(args.command_line)
    if argv and argv[0] == "--":
        argv = argv[1:]
    pasted, (argv, _) = argv, split_projector_flags(argv)  # --mmproj, --no-mmproj ...
    cmd = parse_fit_command(argv)
    path = Path(cmd.model).expanduser()
    if not path.is_file():
        raise ModelImportError(f"no such model file: {cmd.model}")
    spec = gguf_spec(path)
    rig = load_rig_arg(args)
    devices = rpc_devices(rig, cmd.rpc)
    if len(cmd.fit_target_mib) > 1 and len(cmd.fit_target_mib) > max(len(devices), 1):
        raise InvalidSettingsError(
            f"-fitt lists {len(cmd.fit_target_mib)} margins for {len(devices)} devices"
        )
    s = fit_settings(cmd, rig, devices, spec.geometry)
    user = UserFlags(
        context=cmd.context,
        ngl=None if cmd.ngl in (None, -1) else cmd.ngl,
        tensor_split=cmd.tensor_split,
        overrides=cmd.overrides,
        split_mode=cmd.split_mode,
    )
    outcome = fit_with_projector(
        pasted,
        spec,
        rig,
        s,
        lambda sp, r, st: llama_fit(sp, sp.available_quants[0], r, st, devices=devices, user=user),
    )
    if cmd.unmodelled:
        print(
            f"{PROG}: note: not modelled by fit here: {' '.join(cmd.unmodelled)}",
            file=sys.stderr,
        )
    if args.json:
        data = {"schema_version": FIT_SCHEMA_VERSION, **jsonable(outcome)}
        emit_json({**data, "unmodelled": list(cmd.unmodelled)})
    elif outcome.command:
        print(outcome.command)
    else:
        print(f"{PROG}: llama.cpp's fit gives up: {outcome.reason}", file=sys.stderr)
    return EXIT_FITS if outcome.status.value != "failed" else EXIT_NO_FIT
