"""The JSON `rigspark-plan ... --json` writes, as pydantic models: for `rigspark-plan schema`
and for scripts that read it. The CLI itself writes through `formats.jsonable` (no pydantic
on its hot path); tests/cli/test_schema.py checks that each model reads back exactly what
the CLI wrote.

Engine records are typed with the core dataclasses themselves (pydantic validates them
field by field); `settings` goes through the settings file model, ranges and all.

The outputs whose items live above this layer are described beside the CLI, in
`rigspark_gui/cli_outputs.py`: `models --json` (catalog entries), `gpus --json` (the GPU
database), `reconcile --json` and `calibrate --json`. `rigspark_gui/cli_schema.py` names
them all for `rigspark-plan schema`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from rigspark_gui.core.device_overhead import DeviceOverheadEntry
from rigspark_gui.core.fit import FitDevice, FitOutcome, FitStatus
from rigspark_gui.core.launch import ClusterLaunch, LaunchCommand
from rigspark_gui.core.memory import ProjectorLoad
from rigspark_gui.core.placement import DeviceLoad, Placement
from rigspark_gui.core.plan import (
    DraftLoad,
    KvComparisonRow,
    PathName,
    PathPlan,
    RankedModel,
    Resolved,
    Suggestion,
)
from rigspark_gui.core.serving import ServingPlan
from rigspark_gui.core.speed import Prefill, Throughput
from rigspark_gui.formats.settings import PlanSettings

__all__ = [
    "CliOutput",
    "FitOutput",
    "LocalModel",
    "LocalModelsOutput",
    "PlaceOutput",
    "PlanOutput",
    "RankOutput",
]


class CliOutput(BaseModel):
    """One command's JSON: every key is always written (no defaults), nothing else."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    schema_version: int = Field(description="the layout's version: 1")


class PlanOutput(CliOutput):
    """`plan --json`: the plan record's fields, then `suggestions`."""

    model_id: str
    model_name: str
    rig_name: str
    unified_memory: bool
    settings: PlanSettings
    paths: tuple[PathPlan, ...] = Field(description="every path planned, in order")
    recommended: PathName | None = Field(description="the path that runs it; null: none fits")
    placement: Placement | None = Field(description="the recommended (or nearest) path's")
    device_loads: tuple[DeviceLoad, ...] = Field(
        description="each device's weights, attention KV (`kv_bytes`), recurrent state of a "
        "hybrid model's linear-attention / Mamba / conv layers (`state_bytes`: f32 whatever "
        "the KV cache type), compute and reserve"
    )
    kv_comparison: tuple[KvComparisonRow, ...] = Field(
        description="the KV cache pairs the engine runs, most useful first, each path's "
        "largest context at one quantization (each limit's `quant`: the recommended "
        "path's), the measured quality cost (`kv_kld`) and what is known of its speed "
        "(`speed_note`); empty with --kv-compare none"
    )
    notes: tuple[str, ...]
    serving: ServingPlan | None = Field(description="vLLM/SGLang: the shown path's figures")
    launch: ClusterLaunch | None = Field(
        description="a script per host in start order: serving engines and multi-host paths"
    )
    resolved: Resolved | None = Field(
        description="what each setting left to the engine (`auto` in `settings`) became for "
        "this plan: context, flash attention (per device), parallel slots, unified KV"
    )
    fit: FitOutcome | None = Field(
        description="llama.cpp's --fit for the shown quantization, as the engine runs it "
        "(llama.cpp and Ollama plans): status, reason, context, -ngl, -ts, -ot and the "
        "line llama-fit-params prints"
    )
    fit_summary: str = Field(
        description="what llama.cpp alone would do against RigSpark's plan, in one sentence"
    )
    draft: DraftLoad | None = Field(
        description="a draft model for speculative decoding (-md): its quantization, -ngld, "
        "KV types, bytes per device (also each device's `draft_bytes`) and the basis of "
        "its speed (unknown without a cited acceptance rate: the speed shown is plain)"
    )
    projector: ProjectorLoad | None = Field(
        description="the vision/audio projector (mmproj) loaded beside the model: its device, "
        "weights and compute buffer at the image size it is sized for (also each device's "
        "`projector_bytes`); null: none, or text only"
    )
    suggestions: tuple[Suggestion, ...] = Field(
        description="the smallest changes that buy a better quantization or path"
    )
    smaller_models: tuple[Suggestion, ...] = Field(
        description="when no quantization reaches the minimum speed: smaller catalog models "
        "that do (same family first), each with its quantization and speed (`model_id`)",
    )
    device_overhead: tuple[DeviceOverheadEntry, ...] = Field(
        description="each GPU's own overhead, the reserve every tally subtracts (backend "
        "context; 0 for Metal, whose memory is the working set), with its basis and source"
    )


class PlaceOutput(CliOutput):
    """`place --json`: one quantization's per-layer placement and per-device loads."""

    model_id: str
    quant: str
    settings: PlanSettings
    placement: Placement
    device_loads: tuple[DeviceLoad, ...]
    fits: bool = Field(
        description="the plan's verdict for this placement: every device (a unified chip's "
        "pool as one) leaves 5% of its usable memory free, and the context is within the "
        "model's trained one"
    )
    throughput: Throughput = Field(description="decode")
    prefill: Prefill
    launch_commands: tuple[LaunchCommand, ...]


class RankOutput(CliOutput):
    """`rank --json`: every catalog model on the rig, best first."""

    rig_name: str
    settings: PlanSettings
    models: tuple[RankedModel, ...]


class LocalModel(BaseModel):
    """One model file found on this computer, read from its header."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    id: str = Field(description="what `--model` takes: ollama:TAG, lmstudio:..., hfcache:...")
    name: str
    store: str = Field(description="where it was found: Ollama, LM Studio, ...")
    path: str
    size_bytes: int = Field(ge=0)
    quant: str
    architecture: str
    params: int = Field(ge=0)
    context_length: int
    ollama_tag: str | None


class LocalModelsOutput(CliOutput):
    """`models --local --json` (or with `--folder`)."""

    models: tuple[LocalModel, ...]
    skipped: tuple[str, ...] = Field(description="files that could not be read, and why")


class FitOutput(CliOutput):
    """`fit --json -- COMMAND`: what llama.cpp's --fit does with a command line."""

    status: FitStatus = Field(description="unchanged, fitted, failed (fit gives up) or off")
    reason: str = Field(description="why, in llama.cpp's words where it has them")
    context: int = Field(description="-c after fit")
    ngl: int = Field(description="-ngl after fit; -1: left to llama.cpp (all layers)")
    tensor_split: tuple[int, ...] = Field(description="whole layers per device (several)")
    overrides: tuple[str, ...] = Field(description="-ot rules fit sets, PATTERN=BUFFER")
    command: str = Field(description="the line llama-fit-params prints; empty when fit fails")
    devices: tuple[FitDevice, ...] = Field(
        description="llama.cpp's devices in its order: free memory, margin, projected use"
    )
    initial_context: int = Field(description="the context fit started from")
    unmodelled: tuple[str, ...] = Field(description="llama.cpp flags given that fit ignores here")
