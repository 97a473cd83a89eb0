"""What the engine knows about a model: its geometry and its weights.

Geometry field names follow llama.cpp's hparams where one exists (n_layer, n_embd,
n_head, n_head_kv, n_ff, n_expert ...), so GGUF metadata and HF config.json both map
onto them without translation tables in the engine.
"""

from __future__ import annotations

from enum import StrEnum

from rigspark_gui.core.errors import InvalidModelError
from rigspark_gui.core.frozen import Frozen
from rigspark_gui.core.ggml_types import ggml_type, tensor_bytes
from rigspark_gui.core.quality import QuantQuality
from rigspark_gui.core.record import Field, model_validator

__all__ = [
    "Checkpoint",
    "Frozen",
    "Geometry",
    "ModelSpec",
    "QuantFile",
    "TensorGroup",
    "TensorInfo",
    "require_quant",
]


class Geometry(Frozen):
    """Architecture and shape of one model, enough to size weights, KV and compute."""

    architecture: str = Field(description="llama.cpp architecture name, e.g. llama, qwen2")
    n_layer: int = Field(gt=0, le=4096)
    n_embd: int = Field(gt=0, le=1 << 20)
    n_head: int = Field(gt=0, le=4096)
    n_head_kv: int = Field(ge=0, le=4096)
    n_head_kv_per_layer: tuple[int, ...] | None = Field(
        default=None, description="KV heads of each layer where they differ; 0 = no KV"
    )
    head_dim_k: int = Field(gt=0, le=65536)
    head_dim_v: int = Field(gt=0, le=65536)
    n_vocab: int = Field(gt=0, le=1 << 24)
    n_ff: int = Field(ge=0, le=1 << 22, description="dense FFN width (0 when every layer is MoE)")
    tied_embeddings: bool = False
    n_expert: int = Field(default=0, ge=0, le=4096)
    n_expert_used: int = Field(default=0, ge=0, le=4096)
    n_ff_expert: int = Field(default=0, ge=0, le=1 << 22)
    n_shared_expert: int = Field(default=0, ge=0, le=64)
    n_ff_shared_expert: int = Field(default=0, ge=0, le=1 << 22)
    n_dense_lead: int = Field(default=0, ge=0, description="leading dense layers of a MoE model")
    moe_every: int = Field(default=1, ge=1, description="every k-th layer is MoE (Llama 4)")
    sliding_window: int | None = Field(default=None, gt=0)
    swa_pattern: int | None = Field(
        default=None, ge=1, description="period p: layer i slides iff i mod p < p - 1"
    )
    kv_lora_rank: int | None = Field(default=None, gt=0, description="MLA latent width")
    q_lora_rank: int | None = Field(default=None, gt=0)
    rope_head_dim: int | None = Field(default=None, gt=0, description="MLA rotary part of K")
    recurrent_layers: tuple[int, ...] = Field(
        default=(), description="layers holding recurrent state instead of KV"
    )
    recurrent_r_values: int = Field(default=0, ge=0, description="conv state values per layer")
    recurrent_s_values: int = Field(default=0, ge=0, description="ssm state values per layer")
    context_length: int = Field(gt=0, le=1 << 24, description="trained context, tokens")

    @model_validator(mode="after")
    def _consistent(self) -> Geometry:
        if self.n_head_kv_per_layer is not None and len(self.n_head_kv_per_layer) != self.n_layer:
            raise ValueError("n_head_kv_per_layer must list one value per layer")
        if self.n_expert and not (0 < self.n_expert_used <= self.n_expert):
            raise ValueError("n_expert_used must be between 1 and n_expert")
        if self.n_expert and not self.n_ff_expert:
            raise ValueError("a MoE model needs n_ff_expert")
        if any(not 0 <= i < self.n_layer for i in self.recurrent_layers):
            raise ValueError("recurrent_layers names a layer outside the model")
        if (self.sliding_window is None) != (self.swa_pattern is None):
            raise ValueError("sliding_window and swa_pattern go together")
        return self

    @property
    def is_moe(self) -> bool:
        return self.n_expert > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    def kv_heads(self, layer: int) -> int:
        if layer in self.recurrent_layers:
            return 0
        if self.n_head_kv_per_layer is not None:
            return self.n_head_kv_per_layer[layer]
        return self.n_head_kv

    def is_sliding(self, layer: int) -> bool:
        p = self.swa_pattern
        return p is not None and p > 1 and layer % p < p - 1

    def is_moe_layer(self, layer: int) -> bool:
        if not self.is_moe or layer < self.n_dense_lead:
            return False
        return (layer + 1) % self.moe_every == 0 if self.moe_every > 1 else True


class TensorGroup(StrEnum):
    INPUT = "input"
    BLOCK = "block"
    OUTPUT = "output"


class TensorInfo(Frozen):
    """One weight tensor: ggml type name and shape (ne0 first, as ggml stores it)."""

    name: str
    type: str
    shape: tuple[int, ...]
    group: TensorGroup
    layer: int | None = None
    expert: bool = Field(default=False, description="a routed-expert tensor (ffn_*_exps)")
    n_bytes: int = Field(default=-1, description="bytes; computed from type and shape if -1")

    @model_validator(mode="after")
    def _fill_bytes(self) -> TensorInfo:
        if self.n_bytes < 0:
            ggml_type(self.type)
            object.__setattr__(self, "n_bytes", tensor_bytes(self.type, self.shape))
        return self

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class QuantFile(Frozen):
    """A published file of one quantization, cited."""

    file_bytes: int = Field(gt=0)
    source: str


class Checkpoint(Frozen):
    """The Hugging Face checkpoint a serving engine would load, when it was read."""

    format: str = Field(description="BF16, FP8, INT8, AWQ or GPTQ (from config.json)")
    total_bytes: int | None = Field(default=None, ge=0, description="its safetensors bytes")
    source: str = ""
    path: str = Field(default="", description="the folder holding it, when it was read")


class ModelSpec(Frozen):
    """A plannable model. Weights come from an exact tensor list (a GGUF header)
    or, for catalog models, are synthesized per quantization from the geometry."""

    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=300)
    family: str = ""
    geometry: Geometry
    tensors: tuple[TensorInfo, ...] | None = Field(
        default=None, description="exact tensors (GGUF); fixes the quantization"
    )
    file_quant: str | None = Field(default=None, description="quant label of an imported file")
    quants: tuple[str, ...] = Field(default=(), description="quantizations available, best first")
    dominated: dict[str, str] = Field(
        default_factory=dict,
        description="quantizations Auto never picks: quant -> a smaller one of better "
        "quality ('' when its quality is not measured)",
    )
    quality: dict[str, QuantQuality] = Field(
        default_factory=dict, description="measured quality cost of each quantization"
    )
    published: dict[str, QuantFile] = Field(default_factory=dict)
    cpu_only_quants: tuple[str, ...] = Field(default=(), description="BitNet-style, CPU only")
    source: str = Field(default="", description="where it came from: config, file or URL")
    imported: bool = False
    hf_repo: str = Field(default="", description="its Hugging Face repository, if known")
    ollama_tag: str = Field(default="", description="its name in Ollama's store, if it is there")
    checkpoint: Checkpoint | None = Field(
        default=None, description="a native checkpoint's format and size (serving engines)"
    )

    @model_validator(mode="after")
    def _has_weights(self) -> ModelSpec:
        if self.tensors is None and not self.quants:
            raise ValueError("a model needs exact tensors or at least one quantization")
        if self.tensors is not None:
            for t in self.tensors:
                if t.layer is not None and not 0 <= t.layer < self.geometry.n_layer:
                    raise ValueError(f"tensor {t.name} names layer {t.layer} outside the model")
        return self

    @property
    def available_quants(self) -> tuple[str, ...]:
        if self.tensors is not None:
            return (self.file_quant or "file",)
        return self.quants

    @property
    def auto_quants(self) -> tuple[str, ...]:
        """What Auto tries, best quality first: every quantization but dominated ones."""
        return tuple(q for q in self.available_quants if q not in self.dominated)


def require_quant(spec: ModelSpec, quant: str) -> str:
    if quant not in spec.available_quants:
        options = ", ".join(spec.available_quants)
        raise InvalidModelError(f"{spec.id} has no quantization {quant!r} (choose from {options})")
    return quant
