"""What every launch command shares: the engines, the `LaunchCommand` record, and the
helpers that name the model file, quote the shell line and accept or refuse a placement.

Every command is built as an argv list and joined with `shlex.join`, so a model name or
path read from a file is always one quoted shell word and never runs as code. Engines
that cannot express a placement get an explanation, never an approximate command.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import CPU, INPUT, Placement
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings


class Engine(StrEnum):
    LLAMA_CPP = "llama.cpp"
    KOBOLDCPP = "koboldcpp"
    OLLAMA = "ollama"
    LM_STUDIO = "lm-studio"
    VLLM = "vllm"

    @property
    def label(self) -> str:
        return {
            Engine.LLAMA_CPP: "llama.cpp (llama-server)",
            Engine.KOBOLDCPP: "koboldcpp",
            Engine.OLLAMA: "Ollama",
            Engine.LM_STUDIO: "LM Studio (lms)",
            Engine.VLLM: "vLLM",
        }[self]


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchForm:
    """One way to write an engine's command for the same plan: `pinned` (the placement
    written out: -ngl, --tensor-split, -ot / --n-cpu-moe) or `fit` (llama.cpp's --fit
    places the layers at launch)."""

    form: str
    argv: tuple[str, ...]
    text: str
    recommended: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchCommand:
    engine: Engine
    # False: `explanation` says why no command is given
    supported: bool
    # the main command, unquoted (the recommended form where there are several)
    argv: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # what to copy: shell lines (and a Modelfile for Ollama)
    text: str
    explanation: str = ""
    notes: tuple[str, ...] = ()
    # llama-server: both forms, the recommended one marked, and why it is recommended
    forms: tuple[LaunchForm, ...] = ()
    recommendation: str = ""


def default_model_file(spec: ModelSpec, quant: str) -> str:
    """The file a command loads: an imported file's own path, else the name a download
    of this quantization would have."""
    if spec.imported and spec.source.lower().endswith(".gguf"):
        return spec.source
    return f"{spec.id}-{quant}.gguf"


# owner/name of a GGUF repository at the start of a published file's source
# ("bartowski/Llama-3.3-70B-Instruct-GGUF@b6c5c9f: Llama-3.3-70B-Instruct-Q4_K_M.gguf, ...")
_GGUF_REPO = re.compile(r"([A-Za-z0-9][\w.-]*/[\w.-]*?gguf[\w.-]*)(?=[@:\s])", re.IGNORECASE)
# split files: Ollama cannot pull them from Hugging Face
_SHARDED = re.compile(r"-\d{5}-of-\d{5}|\{")


@dataclass(frozen=True, slots=True)
class HfGguf:
    """A Hugging Face repository that holds this quantization as GGUF, and the tag
    llama.cpp's `-hf` and Ollama's `hf.co/` take for it."""

    repo: str
    quant: str
    sharded: bool = False

    @property
    def ref(self) -> str:
        return f"{self.repo}:{self.quant}"


def hf_gguf(spec: ModelSpec, quant: str) -> HfGguf | None:
    """Where `quant` of this model can be downloaded by name: the repository the model
    was read from (`hf:REPO:QUANT`), or the one its published file of `quant` cites.
    None when no such repository is known (never a guess)."""
    if spec.source.startswith("hf:"):
        repo, _, q = spec.source.removeprefix("hf:").partition(":")
        if not q or q == "file" or (spec.tensors is None and q != quant):
            return None  # a config.json, or a file without a quantization in its name
        return HfGguf(repo, q)
    published = spec.published.get(quant)
    if published is None:
        return None
    m = _GGUF_REPO.match(published.source)
    if m is None or quant.lower() not in published.source.lower():
        return None
    return HfGguf(m.group(1), quant, sharded=bool(_SHARDED.search(published.source)))


def model_args(
    spec: ModelSpec, quant: str, model_path: str | None = None
) -> tuple[list[str], tuple[str, ...]]:
    """How llama.cpp is told the model: `-m FILE` for a file on disk, else `-hf REPO:QUANT`
    (llama-server and llama-cli download it) when a repository holding it is known, else
    `-m` with the file name a download of it would have; and a note saying which."""
    if model_path:
        return ["-m", model_path], ()
    hf = hf_gguf(spec, quant)
    if hf is not None:
        return ["-hf", hf.ref], (
            f"-hf downloads {hf.quant} from huggingface.co/{hf.repo} into llama.cpp's cache "
            "on the first run (set HF_TOKEN for a gated repository)",
        )
    path = default_model_file(spec, quant)
    if spec.imported and path == spec.source:
        return ["-m", path], ()
    return ["-m", path], (f"{path}: the path of your {quant} GGUF file of this model",)


def hf_repo(spec: ModelSpec) -> str:
    """owner/name from a catalog source like `owner/name/config.json`, else the id."""
    m = re.fullmatch(r"([\w.-]+/[\w.-]+)/config\.json", spec.source)
    return m.group(1) if m else spec.id


def shell_line(env: Sequence[tuple[str, str]], argv: Sequence[str]) -> str:
    pre = " ".join(f"{k}={shlex.quote(v)}" for k, v in env)
    cmd = shlex.join(argv)
    return f"{pre} {cmd}" if pre else cmd


def accept(
    engine: Engine,
    argv: Sequence[str],
    env: Sequence[tuple[str, str]],
    notes: Sequence[str],
) -> LaunchCommand:
    return LaunchCommand(
        engine=engine,
        supported=True,
        argv=tuple(argv),
        env=tuple(env),
        text=shell_line(env, argv),
        notes=tuple(notes),
    )


def refuse(engine: Engine, why: str) -> LaunchCommand:
    return LaunchCommand(
        engine=engine,
        supported=False,
        text=f"# {engine.label} cannot run this placement: {why}",
        explanation=why,
    )


def cuda_env(rig: Rig, prefix: str) -> tuple[tuple[str, str], ...]:
    # CUDA numbers GPUs fastest-first by default; NVML (our indices) uses PCI bus order.
    if prefix == "CUDA" and len(rig.gpus) > 1:
        return (("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),)
    return ()


def per_sequence_context(s: PlanSettings) -> int:
    return max(s.context // s.parallel, 1)


def _slot_devices(placement: Placement) -> list[str]:
    return [u.device for u in placement.units if u.unit != INPUT]


def used_gpus(placement: Placement) -> list[str]:
    return sorted({d for d in _slot_devices(placement) if d != CPU})


def split_note(engine: Engine, placement: Placement) -> tuple[str, ...]:
    if len(used_gpus(placement)) > 1:
        return (
            f"{engine.label} chooses its own split across GPUs; per-GPU loads may differ "
            "from this placement (no custom --tensor-split)",
        )
    return ()
