"""The knobs of one plan, as the CLI, the window's remembered settings and reports give them."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from rigspark_gui.core import settings as core_settings
from rigspark_gui.core.model import KvCacheType
from rigspark_gui.core.settings import (
    DEFAULT_FIT_CTX,
    DEFAULT_FIT_TARGET_MIB,
    DEFAULT_MIN_TOK_S,
    DEFAULT_UBATCH,
    MAX_CONTEXT,
    Backend,
    GpuBackend,
)
from rigspark_gui.formats.base import Boundary


class PlanSettings(Boundary):
    """PlanSettings as given from outside: CLI flags, remembered settings, a report."""

    record: ClassVar[type] = core_settings.PlanSettings
    context: Annotated[int, Field(ge=1, le=MAX_CONTEXT)] | Literal["auto"] = Field(
        default=8192, description="tokens; auto: the engine's default"
    )
    kv_k: KvCacheType = KvCacheType.F16
    kv_v: KvCacheType = KvCacheType.F16
    flash_attn: bool | Literal["auto"] = Field(
        default=False, description="auto: on where the devices holding the KV support it"
    )
    parallel: Annotated[int, Field(ge=1, le=256)] | Literal["auto"] = Field(
        default=1, description="sequences served at once; auto: the engine's"
    )
    backend: Backend = Backend.LLAMA_CPP
    n_ubatch: int = Field(default=DEFAULT_UBATCH, ge=1, le=65536)
    swa_full: bool = Field(
        default=False, description="size sliding-window layers at the full context"
    )
    quant: str | None = Field(default=None, description="fixed quantization, or None = best")
    prompt_tokens: int = Field(default=1024, ge=1, le=MAX_CONTEXT, description="for prefill")
    gpu_backend: GpuBackend | None = Field(
        default=None, description="GPU compute backend; None = each vendor's own"
    )
    min_tok_s: float = Field(
        default=DEFAULT_MIN_TOK_S,
        ge=0,
        le=100000,
        description="Auto: the best quality reaching this decode speed (0 = best that fits)",
    )
    memory_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="vLLM gpu_memory_utilization / SGLang mem_fraction_static",
    )
    tensor_parallel: int | None = Field(default=None, ge=1, le=1024)
    pipeline_parallel: int | None = Field(default=None, ge=1, le=1024)
    max_num_seqs: int | None = Field(default=None, ge=1, le=1 << 16)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=1 << 24)
    cpu_offload_gb: float = Field(
        default=0.0, ge=0, le=1 << 20, description="vLLM --cpu-offload-gb"
    )
    kv_unified: bool = Field(default=False, description="one KV cache shared by the sequences")
    fit: bool = Field(default=True, description="llama.cpp's --fit")
    fit_target_mib: tuple[int, ...] = Field(
        default=(DEFAULT_FIT_TARGET_MIB,),
        min_length=1,
        description="--fit-target: MiB kept free per device (one value: every device)",
    )
    fit_ctx: int = Field(default=DEFAULT_FIT_CTX, ge=1, le=MAX_CONTEXT, description="--fit-ctx")
    text_only: bool = Field(default=False, description="no vision/audio projector (--no-mmproj)")
    mmproj_offload: bool = Field(
        default=True, description="projector on the first GPU (False: --no-mmproj-offload)"
    )
    image_size: int | None = Field(
        default=None, ge=1, le=65536, description="largest image side in pixels (None: warm-up)"
    )
    mmap: bool | None = Field(
        default=None,
        description="load the weights memory-mapped (llama.cpp's default); false: "
        "--load-mode none (--no-mmap before b11434); null: without mmap where the CPU "
        "repacks weights",
    )
    repack: bool = Field(default=True, description="false: llama.cpp's --no-repack")
    mtp_draft: bool = Field(
        default=False, description="draft with the model's MTP blocks (--spec-type draft-mtp)"
    )

    def to_record(self) -> Any:
        # "auto" values become the record's engine_defaults (make_settings reads them)
        values = {name: getattr(self, name) for name in type(self).model_fields}
        return core_settings.make_settings(**values)

    @classmethod
    def from_record(cls, record: Any) -> PlanSettings:
        values = {name: getattr(record, name) for name in cls.model_fields}
        for name in record.engine_defaults:
            values[name] = "auto"
        return cls.model_validate(values)
