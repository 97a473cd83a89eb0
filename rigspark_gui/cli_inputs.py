"""What the commands read from their flags: the model (catalog, local store, file or
the network), the rig (a rig file, else this machine detected), the plan settings, and
the GPU database that fills them in."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rigspark_gui.cli_base import PROG, UsageError, print_note

if TYPE_CHECKING:
    from rigspark_gui.catalog.gpu_database import GpuDatabase
    from rigspark_gui.core.model import ModelSpec
    from rigspark_gui.core.rig import Rig
    from rigspark_gui.core.settings import PlanSettings

# The ids `models --local` prints: `ollama:TAG` and the like (local_models._ID_PREFIX).
LOCAL_ID_PREFIXES = frozenset({"ollama", "lmstudio", "hfcache", "llamacpp"})


def gpu_database() -> GpuDatabase | None:
    from rigspark_gui.catalog.gpu_database import load_gpu_database
    from rigspark_gui.resources import data_file

    path = data_file("gpus.json")
    if not path.exists():
        return None
    return load_gpu_database(path, lenient=True)


def load_model(args: argparse.Namespace) -> ModelSpec:
    spec = _load_model(args)
    if not hasattr(args, "mmproj"):
        return spec
    from rigspark_gui.cli_projector import attach_draft, attach_projector

    return attach_draft(args, attach_projector(args, spec))


def _load_model(args: argparse.Namespace) -> ModelSpec:
    if getattr(args, "model_url", None) is not None or (
        args.model is not None and args.model.startswith("hf:")
    ):
        return _remote_model(args)
    if args.model is not None:
        from rigspark_gui.catalog.models import resolve_model

        if args.model.split(":", 1)[0] in LOCAL_ID_PREFIXES:
            from rigspark_gui.catalog.local_models import find_by_id

            local = find_by_id(args.model)  # ollama:TAG and the other ids `models --local` prints
            if local is not None:
                return local
        found = resolve_model(args.model)
        _refuse_dynamic_quant(getattr(args, "quant", None), found.spec)
        if found.quant is not None and getattr(args, "quant", None) is None:
            # the quantization named in the model ("llama3.1:8b-instruct-q4_K_M")
            if found.quant in found.spec.available_quants:
                args.quant = found.quant
            elif found.quant.startswith("UD-"):
                from rigspark_gui.catalog.resolve import dynamic_quant_message

                repo = args.model.split(":")[0] if "/" in args.model else ""
                note = dynamic_quant_message(found.quant, found.spec.id, repo)
                print_note(f"{note}; planning the best that fits")
            else:
                print_note(
                    f"{found.quant} (named in {args.model!r}) is not among "
                    f"{found.spec.id}'s quantizations here; planning the best that fits"
                )
        name, _, tag = args.model.strip().partition(":")
        if tag and "/" not in name and name != found.spec.id:  # an Ollama tag: `ollama run` it
            from dataclasses import replace

            return replace(found.spec, ollama_tag=args.model.strip())
        return found.spec
    path: Path = args.model_file
    from rigspark_gui.core.errors import ModelImportError

    if not path.exists():
        raise ModelImportError(f"no such model file: {path}")
    if path.is_file() and path.suffix.lower() == ".gguf":
        from rigspark_gui.catalog.gguf_import import import_gguf

        return import_gguf(path)
    if path.is_dir() or path.suffix.lower() == ".json":
        from rigspark_gui.catalog.hf_import import import_hf_config

        result = import_hf_config(path)
        return getattr(result, "spec", result)  # type: ignore[no-any-return]
    raise ModelImportError(f"{path.name}: expected a .gguf file, a config.json or its folder")


def _refuse_dynamic_quant(quant: str | None, spec: ModelSpec) -> None:
    """--quant UD-Q4_K_XL on a catalog model: say how it can be planned, in one line."""
    if quant and quant.upper().startswith("UD-") and quant.upper() not in spec.available_quants:
        from rigspark_gui.catalog.resolve import dynamic_quant_message

        raise UsageError(dynamic_quant_message(quant.upper(), spec.id))


def _remote_model(args: argparse.Namespace) -> ModelSpec:
    """The one place the CLI uses the network: the user named a remote model."""
    from rigspark_gui.catalog.remote import model_from_hf, model_from_url
    from rigspark_gui.user_dirs import cache_dir

    def progress(text: str) -> None:
        print(f"{PROG}: {text}", file=sys.stderr, flush=True)

    cache = cache_dir()
    timeout_s = getattr(args, "network_timeout", None)
    if args.model_url is not None:
        return model_from_url(args.model_url, cache, progress, timeout_s)
    return model_from_hf(args.model, cache, progress, timeout_s)


def load_rig_arg(args: argparse.Namespace) -> Rig:
    if args.rig is not None:
        from rigspark_gui.catalog.rig_file import load_rig

        return load_rig(args.rig, gpu_database)  # read only when the rig names GPUs
    db = gpu_database()
    from rigspark_gui.catalog.device_overhead import shipped_device_overhead
    from rigspark_gui.core.rig import VM_FEATURE
    from rigspark_gui.hardware.detect import detect, needs_measuring, with_measured_bandwidth

    # the overhead table kept by its bytes: no validation framework on a later run
    rig = detect(database=db, timeout_s=5.0, overhead=shipped_device_overhead())
    if needs_measuring(rig.cpu):
        # CPU speed rests on it: measure once (a few seconds), kept for later runs
        what = " and how its vCPUs share cores" if VM_FEATURE in rig.cpu.features else ""
        print(f"{PROG}: measuring this machine's RAM bandwidth{what} (once)…", file=sys.stderr)
        rig, result = with_measured_bandwidth(rig)
        if result.busy:
            print(
                f"{PROG}: note: {result.reason}; using {result.bandwidth_gbps:g} GB/s, the best "
                "busy figure so far, measured again on the next run",
                file=sys.stderr,
            )
    return rig


def settings_from(args: argparse.Namespace) -> PlanSettings:
    from rigspark_gui.core.model import kv_cache_type
    from rigspark_gui.core.settings import make_settings

    k = kv_cache_type(args.kv_k)
    v = kv_cache_type(args.kv_v) if args.kv_v else k
    fa: object = "auto" if args.flash_attn in (None, "auto") else args.flash_attn == "on"
    extra: dict[str, object] = {}
    if args.min_speed is not None:
        extra["min_tok_s"] = args.min_speed
    if getattr(args, "kv_unified", False):
        extra["kv_unified"] = True
    if getattr(args, "fit", "on") == "off":
        extra["fit"] = False
    if getattr(args, "fit_target", None) is not None:
        extra["fit_target_mib"] = args.fit_target
    if getattr(args, "fit_ctx", None) is not None:
        extra["fit_ctx"] = args.fit_ctx
    if getattr(args, "mmap", None) is not None:
        extra["mmap"] = args.mmap
    if getattr(args, "no_repack", False):
        extra["repack"] = False
    if getattr(args, "text_only", False):
        extra["text_only"] = True
    if not getattr(args, "mmproj_offload", True):
        extra["mmproj_offload"] = False
    if getattr(args, "image_size", None) is not None:
        extra["image_size"] = args.image_size
    if getattr(args, "spec_type", None) == "draft-mtp":
        extra["mtp_draft"] = True
    return make_settings(
        context=args.context,
        kv_k=k,
        kv_v=v,
        flash_attn=fa,
        parallel=args.parallel,
        backend=args.backend,
        swa_full=args.swa_full,
        quant=args.quant,
        prompt_tokens=args.prompt_tokens,
        gpu_backend=args.gpu_backend,
        **extra,
        **_serving_values(args),
    )


def _serving_values(args: argparse.Namespace) -> dict[str, object]:
    """The serving-engine flags the user gave (settings refuse them for other engines)."""
    names = (
        "memory_utilization",
        "tensor_parallel",
        "pipeline_parallel",
        "max_num_seqs",
        "max_num_batched_tokens",
    )
    out: dict[str, object] = {n: getattr(args, n) for n in names if getattr(args, n, None)}
    if getattr(args, "cpu_offload_gb", 0):
        out["cpu_offload_gb"] = args.cpu_offload_gb
    return out
