"""A draft model for speculative decoding (llama.cpp's `-md`): another model loaded
beside the target, with its own weights, KV cache and compute buffer (llama.cpp b11434,
common/speculative.cpp `common_base_params_to_speculative`: the draft context copies
the target's context, slots and batch; `-ngld` and `-ctkd/-ctvd` are its own)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rigspark_gui.core.model.ggml_types import KvCacheType

if TYPE_CHECKING:
    from rigspark_gui.core.model.model_spec import ModelSpec

# common/speculative.cpp SPEC_VOCAB_MAX_SIZE_DIFFERENCE: the most the two vocabularies'
# sizes may differ before llama.cpp refuses the pair
VOCAB_MAX_SIZE_DIFFERENCE = 128


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftModel:
    spec: ModelSpec
    # the draft's file quantization
    quant: str
    # -ngld: layers on the GPUs (None: llama.cpp's auto, every layer where it fits)
    n_gpu_layers: int | None = None
    # -ctkd / -ctvd (llama.cpp's default f16)
    kv_k: KvCacheType = KvCacheType.F16
    kv_v: KvCacheType = KvCacheType.F16
    # -devd: the rig GPUs it is pinned to, in order (None: the target command's; ():
    # `none`, no GPU)
    devices: tuple[int, ...] | None = None
    # accepted draft tokens per target step, from a cited measurement (None: unknown)
    accepted_per_step: float | None = None
    acceptance_source: str = ""

    def __post_init__(self) -> None:
        if self.n_gpu_layers is not None and self.n_gpu_layers < 0:
            raise ValueError("-ngld cannot be negative")
        if self.devices is not None and len(set(self.devices)) != len(self.devices):
            raise ValueError("-devd names a device twice")
        if self.accepted_per_step is not None and self.accepted_per_step < 0:
            raise ValueError("an acceptance rate cannot be negative")
