"""A llama.cpp command line as fit reads it: `llama-server`, `llama-cli` or
`llama-fit-params` with llama.cpp's own flag spellings and each program's defaults."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.fit.llama_flags import LLAMA_FLAGS
from rigspark_gui.core.model import KvCacheType, kv_cache_type

PROGRAMS = ("llama-server", "llama-cli", "llama-fit-params")
# llama-server's automatic slots (tools/server/server.cpp: n_parallel -1 -> 4, kv_unified);
# the same figure as core.plan's LLAMA_SERVER_SLOTS, kept here so the fit verb need not
# load the planner
AUTO_SLOTS = 4

# flag spellings -> the setting they give (common/arg.cpp)
_ALIASES = {
    "model": ("-m", "--model"),
    "context": ("-c", "--ctx-size"),
    "ngl": ("-ngl", "--gpu-layers", "--n-gpu-layers"),
    "split": ("-ts", "--tensor-split"),
    "ot": ("-ot", "--override-tensor"),
    "cpu_moe": ("-cmoe", "--cpu-moe"),
    "n_cpu_moe": ("-ncmoe", "--n-cpu-moe"),
    "split_mode": ("-sm", "--split-mode"),
    "kv_k": ("-ctk", "--cache-type-k"),
    "kv_v": ("-ctv", "--cache-type-v"),
    "flash": ("-fa", "--flash-attn"),
    "parallel": ("-np", "--parallel"),
    "kv_unified": ("-kvu", "--kv-unified"),
    "no_kv_unified": ("-no-kvu", "--no-kv-unified"),
    "ubatch": ("-ub", "--ubatch-size"),
    "batch": ("-b", "--batch-size"),
    "fit": ("-fit", "--fit"),
    "fit_target": ("-fitt", "--fit-target"),
    "fit_ctx": ("-fitc", "--fit-ctx"),
    "fit_print": ("-fitp", "--fit-print"),
    "rpc": ("--rpc",),
    "swa_full": ("--swa-full",),
    "draft_devices": ("-devd", "--device-draft", "--spec-draft-device"),
}
# a draft model to load (common/arg.cpp): only then does -devd place anything
_DRAFT_MODEL = frozenset(
    ("-md", "--model-draft", "--spec-draft-model", "-hfd", "-hfrd", "--hf-repo-draft",
     "--spec-draft-hf")
)  # fmt: skip
# a GPU device name as ggml's registry spells it (CUDA0, ROCm1, Vulkan0, SYCL0, MTL0,
# RPC[host:port])
_DEVICE_NAME = re.compile(r"^([A-Za-z]+\d+|RPC\[[^\]]+\])$")
_SETTING = {flag: name for name, flags in _ALIASES.items() for flag in flags}
# flags that change nothing fit measures (sampling, serving, logging, threads, paths)
_NO_MEMORY = re.compile(
    r"^(-t|--threads|-tb|--threads-batch|--host|--port|-v|--verbose|-lv|--verbosity|"
    r"--log-.*|--temp|--top-[kp]|--min-p|--seed|-s|-n|--n-predict|-p|--prompt|--jinja|"
    r"--no-jinja|--chat-template.*|-a|--alias|--api-key.*|--metrics|--slots|--no-webui|"
    r"-fitp|--fit-print|--no-warmup|--mlock|-lm|--load-mode|-cnv|-no-cnv|--conversation|"
    r"--no-conversation|-sys|--system-prompt|--timeout|--threads-http|-to)$"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class FitCommand:
    """What a pasted command line sets, None where it leaves the program's default."""

    program: str
    model: str
    context: int | None = None
    ngl: int | None = None
    tensor_split: tuple[float, ...] | None = None
    overrides: bool = False
    split_mode: str = "layer"
    kv_k: KvCacheType = KvCacheType.F16
    kv_v: KvCacheType = KvCacheType.F16
    # auto | on | off
    flash_attn: str = "auto"
    # -1: llama-server's auto (4 slots, unified)
    parallel: int = 1
    kv_unified: bool = False
    n_ubatch: int = 512
    fit: bool = True
    fit_target_mib: tuple[int, ...] = (1024,)
    fit_ctx: int = 4096
    rpc: tuple[str, ...] = ()
    swa_full: bool = False
    # -devd: the draft model's devices as named (None: the target's; (): none)
    draft_devices: tuple[str, ...] | None = None
    # llama.cpp flags the fit reproduction does not model (named to the user)
    unmodelled: tuple[str, ...] = ()


def _int(flag: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidSettingsError(f"{flag}: not a whole number: {text!r}") from None


def _on_off(flag: str, text: str, choices: tuple[str, ...] = ("on", "off")) -> str:
    value = text.lower()
    if value in ("1", "true", "enabled"):
        value = "on"
    elif value in ("0", "false", "disabled"):
        value = "off"
    if value not in choices:
        raise InvalidSettingsError(f"{flag}: expected {' or '.join(choices)}, not {text!r}")
    return value


def draft_devices(flag: str, value: str) -> tuple[str, ...]:
    """`-devd` as llama.cpp's parse_device_list takes it (common/arg.cpp, b11434):
    `none` alone, or GPU device names; the CPU, an empty list or an empty name is
    refused as llama.cpp refuses it."""
    names = [x.strip() for x in value.split(",")]
    if not value.strip() or not all(names):
        raise InvalidSettingsError(f"{flag}: no devices specified")
    if names == ["none"]:
        return ()
    for name in names:
        if name.upper() == "CPU" or name == "none" or not _DEVICE_NAME.match(name):
            raise InvalidSettingsError(f"{flag}: invalid device: {name}")
    return tuple(names)


def parse_fit_command(argv: Sequence[str]) -> FitCommand:
    """Read `llama-server -m FILE ...` (the program may be a path). Raises
    InvalidSettingsError, naming the flag, for anything llama.cpp would refuse."""
    if not argv:
        raise InvalidSettingsError("no command line: expected llama-server, llama-cli or "
                                   "llama-fit-params with its flags")  # fmt: skip
    program = argv[0].replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".exe")
    if program not in PROGRAMS:
        raise InvalidSettingsError(
            f"{argv[0]!r}: expected one of {', '.join(PROGRAMS)} (the program fit runs in)"
        )
    v: dict[str, object] = {"program": program}
    if program == "llama-server":
        v["parallel"] = -1  # auto: 4 slots on one unified cache
    unmodelled: list[str] = []
    i, args = 1, list(argv)
    while i < len(args):
        a = args[i]
        flag, eq, inline = a.partition("=") if a.startswith("--") else (a, "", "")
        if flag not in LLAMA_FLAGS:
            raise InvalidSettingsError(f"{a}: not a llama.cpp flag")
        takes, programs = LLAMA_FLAGS[flag]
        if program not in programs:
            raise InvalidSettingsError(f"{flag}: {program} does not take this flag")
        value = ""
        if takes:
            if eq:
                value = inline
            else:
                i += 1
                if i >= len(args):
                    raise InvalidSettingsError(f"{flag} needs a value")
                value = args[i]
        i += 1
        name = _SETTING.get(flag)
        if flag in _DRAFT_MODEL:
            v["has_draft"] = True
        if name is None:
            if not _NO_MEMORY.match(flag):
                unmodelled.append(flag)
            continue
        if name == "model":
            v["model"] = value
        elif name == "context":
            n = _int(flag, value)
            if n < 0:
                raise InvalidSettingsError(f"{flag}: a context cannot be negative")
            v["context"] = n
        elif name == "ngl":
            # auto (-1) is the default, fit decides; all (-2) counts as set by the user
            v["ngl"] = {"auto": -1, "all": -2}.get(value) or _int(flag, value)
        elif name == "split":
            try:
                v["tensor_split"] = tuple(float(x) for x in re.split(r"[,/]", value) if x)
            except ValueError:
                raise InvalidSettingsError(f"{flag}: expected numbers like 3,1") from None
        elif name in ("ot", "cpu_moe", "n_cpu_moe"):
            if name == "n_cpu_moe":
                _int(flag, value)
            v["overrides"] = True
        elif name == "split_mode":
            if value not in ("none", "layer", "row", "tensor"):
                raise InvalidSettingsError(f"{flag}: expected none, layer, row or tensor")
            v["split_mode"] = value
        elif name in ("kv_k", "kv_v"):
            try:
                v[name] = kv_cache_type(value)
            except (ValueError, KeyError):
                raise InvalidSettingsError(f"{flag}: unknown cache type {value!r}") from None
        elif name == "flash":
            v["flash_attn"] = _on_off(flag, value, ("on", "off", "auto"))
        elif name == "parallel":
            v["parallel"] = _int(flag, value)
        elif name == "kv_unified":
            v["kv_unified"] = True
        elif name == "no_kv_unified":
            v["kv_unified"] = False
        elif name == "ubatch":
            v["n_ubatch"] = max(_int(flag, value), 1)
        elif name == "fit":
            v["fit"] = _on_off(flag, value) == "on"
        elif name == "fit_target":
            parts = [p for p in re.split(r"[,/]+", value) if p]
            margins = tuple(_int(flag, p) for p in parts)
            if any(m < 0 for m in margins):
                raise InvalidSettingsError(f"{flag}: a margin cannot be negative")
            v["fit_target_mib"] = margins
        elif name == "fit_ctx":
            v["fit_ctx"] = _int(flag, value)
        elif name == "rpc":
            v["rpc"] = tuple(x.strip() for x in value.split(",") if x.strip())
        elif name == "swa_full":
            v["swa_full"] = True
        elif name == "draft_devices":
            v["draft_devices"] = draft_devices(flag, value)
    if v.pop("has_draft", False) and v.get("draft_devices") is not None:
        # fit here measures the target alone; llama.cpp counts the draft it places
        unmodelled.append("-devd")
    if "model" not in v:
        raise InvalidSettingsError("no model: add -m FILE")
    return FitCommand(**v, unmodelled=tuple(dict.fromkeys(unmodelled)))  # type: ignore[arg-type]
