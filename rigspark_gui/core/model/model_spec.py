"""What the engine knows about a model: its geometry and its weights.

Geometry field names follow llama.cpp's hparams where one exists (n_layer, n_embd,
n_head, n_head_kv, n_ff, n_expert ...), so GGUF metadata and HF config.json both map
onto them without translation tables in the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from rigspark_gui.core.errors import InvalidModelError
from rigspark_gui.core.model.draft import DraftModel
from rigspark_gui.core.model.ggml_types import ggml_type, tensor_bytes
from rigspark_gui.core.model.projector import Projector
from rigspark_gui.core.model.quality import QuantQuality

__all__ = [
    "Checkpoint",
    "Geometry",
    "ModelSpec",
    "QuantFile",
    "TensorGroup",
    "TensorInfo",
    "require_quant",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Geometry:
    """Architecture and shape of one model, enough to size weights, KV and compute."""

    # llama.cpp architecture name, e.g. llama, qwen2
    architecture: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    # KV heads of each layer where they differ; 0 = no KV
    n_head_kv_per_layer: tuple[int, ...] | None = None
    head_dim_k: int
    head_dim_v: int
    n_vocab: int
    # dense FFN width (0 when every layer is MoE)
    n_ff: int
    tied_embeddings: bool = False
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_expert: int = 0
    n_shared_expert: int = 0
    n_ff_shared_expert: int = 0
    # leading dense layers of a MoE model
    n_dense_lead: int = 0
    # every k-th layer is MoE (Llama 4)
    moe_every: int = 1
    sliding_window: int | None = None
    # period p: layer i slides iff i mod p < p - 1
    swa_pattern: int | None = None
    # MLA latent width
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    # MLA rotary part of K
    rope_head_dim: int | None = None
    # layers holding recurrent state instead of KV
    recurrent_layers: tuple[int, ...] = ()
    # conv state values per layer
    recurrent_r_values: int = 0
    # ssm state values per layer
    recurrent_s_values: int = 0
    # Mamba-2 / Gated DeltaNet shapes (llama.cpp hparams.ssm_*): conv kernel, inner width
    # (value heads x head dim), state size (key head dim), time-step rank (value heads),
    # groups (key heads)
    ssm_d_conv: int = 0
    ssm_d_inner: int = 0
    ssm_d_state: int = 0
    ssm_dt_rank: int = 0
    ssm_n_group: int = 0
    # LFM2 short-convolution cache length (hparams.n_shortconv_l_cache)
    shortconv_l_cache: int = 0
    # Kimi Linear: KDA (Kimi Delta Attention) head size (hparams.n_embd_head_kda); its
    # recurrent layers use n_head heads of it
    kda_head_dim: int = 0
    # and the file's attention.value_length (config.json's head_dim), which its MLA graph
    # does not use but llama.cpp checks a quantized V cache's block against (0: unknown)
    kda_value_length: int = 0
    # FFN width of each layer where it differs (Nemotron-H: 0 on Mamba and attention layers)
    n_ff_per_layer: tuple[int, ...] | None = None
    # Nemotron 3 latent MoE: experts work at this width (hparams.moe_latent_size)
    moe_latent_size: int = 0
    # head dims of sliding-window layers where they differ (Gemma 4: n_embd_head_k_swa)
    head_dim_k_swa: int | None = None
    head_dim_v_swa: int | None = None
    # layers from here on reuse an earlier layer's KV and hold none (Gemma 3n / 4:
    # hparams.n_layer_kv_from_start)
    n_layer_kv_from_start: int | None = None
    # per-layer embedding width (Gemma 3n / 4: hparams.n_embd_per_layer); its token table
    # of n_embd_per_layer x n_layer x n_vocab stays in host memory
    n_embd_per_layer: int = 0
    # Gemma 4: full-attention layers use K as V and have no attn_v (HF attention_k_eq_v)
    attention_k_eq_v: bool = False
    # Gemma 3n: AltUp inputs and LAuReL rank (hparams.n_altup, laurel_rank)
    n_altup: int = 0
    laurel_rank: int = 0
    # DeepSeek sparse attention: lightning-indexer heads and key width (hparams.indexer_*);
    # layers keeping an indexer key cache where not all do (GLM-5.2 is_indexer_full)
    indexer_n_head: int = 0
    indexer_head_size: int = 0
    indexer_layers: tuple[int, ...] | None = None
    # MTP / NextN blocks at the end of n_layer (hparams.n_layer_nextn): each a placement
    # slot (-ngl counts them), but without KV and skipped at load unless drafting with them
    n_layer_nextn: int = 0
    # DeepSeek V4 (deepseek4, hparams.dsv4_*): each layer's KV compression ratio (0: the
    # sliding window alone, 4: CSA with a lightning indexer, 128: HCA), hyper-connection
    # streams, the grouped low-rank output projection and the hash-routed leading layers
    compress_ratios: tuple[int, ...] | None = None
    hc_mult: int = 0
    o_groups: int = 0
    o_lora_rank: int = 0
    n_hash_layers: int = 0
    # trained context, tokens
    context_length: int

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
        if self.n_ff_per_layer is not None and len(self.n_ff_per_layer) != self.n_layer:
            raise ValueError("n_ff_per_layer must list one value per layer")
        if self.compress_ratios is not None and len(self.compress_ratios) != self.n_layer:
            raise ValueError("compress_ratios must list one value per layer")
        if self.recurrent_layers and not (self.recurrent_r_values or self.recurrent_s_values):
            r, s = self.state_values()
            object.__setattr__(self, "recurrent_r_values", r)
            object.__setattr__(self, "recurrent_s_values", s)
        return self

    def state_values(self) -> tuple[int, int]:
        """f32 values of one sequence's conv (r) and recurrent (s) state on a recurrent
        layer: llama.cpp's hparams.n_embd_r() and n_embd_s() (src/llama-hparams.cpp)."""
        if self.shortconv_l_cache:  # LFM2: the last L-1 inputs of the short convolution
            return self.n_embd * (self.shortconv_l_cache - 1), 0
        if self.kda_head_dim:  # Kimi KDA: Q, K and V conv states; a head_dim^2 state per head
            d_inner = self.n_head * self.kda_head_dim
            conv = self.ssm_d_conv - 1 if self.ssm_d_conv > 0 else 3
            return 3 * conv * d_inner, self.kda_head_dim * self.kda_head_dim * self.n_head
        width = self.ssm_d_inner + 2 * self.ssm_n_group * self.ssm_d_state
        return max(self.ssm_d_conv - 1, 0) * width, self.ssm_d_state * self.ssm_d_inner

    @property
    def is_moe(self) -> bool:
        return self.n_expert > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    def head_dim_k_at(self, layer: int) -> int:
        """hparams.n_embd_head_k(il): the sliding-window dim on sliding layers."""
        if self.head_dim_k_swa is not None and self.is_sliding(layer):
            return self.head_dim_k_swa
        return self.head_dim_k

    def head_dim_v_at(self, layer: int) -> int:
        if self.head_dim_v_swa is not None and self.is_sliding(layer):
            return self.head_dim_v_swa
        return self.head_dim_v

    def owns_kv(self, layer: int) -> bool:
        """hparams.has_kv(il): False on layers that reuse an earlier layer's cache."""
        if layer >= self.n_layer - self.n_layer_nextn:
            return False  # MTP blocks: the main context filters them out
        return self.n_layer_kv_from_start is None or layer < self.n_layer_kv_from_start

    def has_indexer(self, layer: int) -> bool:
        """Whether `layer` keeps a DSA lightning-indexer key cache."""
        if not self.indexer_head_size or layer >= self.n_layer - self.n_layer_nextn:
            return False
        return self.indexer_layers is None or layer in self.indexer_layers

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
        if self.n_ff_per_layer is not None:  # Nemotron-H: the FFN layers are the MoE ones
            return self.n_ff_per_layer[layer] > 0
        return (layer + 1) % self.moe_every == 0 if self.moe_every > 1 else True

    def __post_init__(self) -> None:
        self._consistent()


class TensorGroup(StrEnum):
    INPUT = "input"
    BLOCK = "block"
    OUTPUT = "output"


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorInfo:
    """One weight tensor: ggml type name and shape (ne0 first, as ggml stores it)."""

    name: str
    type: str
    shape: tuple[int, ...]
    group: TensorGroup
    layer: int | None = None
    # a routed-expert tensor (ffn_*_exps)
    expert: bool = False
    # bytes; computed from type and shape if -1
    n_bytes: int = -1

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

    def __post_init__(self) -> None:
        self._fill_bytes()


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantFile:
    """A published file of one quantization, cited."""

    file_bytes: int
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """The Hugging Face checkpoint a serving engine would load, when it was read."""

    # BF16, FP8, INT8, AWQ or GPTQ (from config.json)
    format: str
    # its safetensors bytes
    total_bytes: int | None = None
    source: str = ""
    # the folder holding it, when it was read
    path: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A plannable model. Weights come from an exact tensor list (a GGUF header)
    or, for catalog models, are synthesized per quantization from the geometry."""

    id: str
    name: str
    family: str = ""
    geometry: Geometry
    # exact tensors (GGUF); fixes the quantization
    tensors: tuple[TensorInfo, ...] | None = None
    # quant label of an imported file
    file_quant: str | None = None
    # quantizations available, best first
    quants: tuple[str, ...] = ()
    # quantizations Auto never picks: quant -> a smaller one of better quality ('' when its
    # quality is not measured)
    dominated: dict[str, str] = field(default_factory=dict)
    # measured quality cost of each quantization
    quality: dict[str, QuantQuality] = field(default_factory=dict)
    published: dict[str, QuantFile] = field(default_factory=dict)
    # BitNet-style, CPU only
    cpu_only_quants: tuple[str, ...] = ()
    # where it came from: config, file or URL
    source: str = ""
    imported: bool = False
    # its Hugging Face repository, if known
    hf_repo: str = ""
    # its name in Ollama's store, if it is there
    ollama_tag: str = ""
    # a native checkpoint's format and size (serving engines)
    checkpoint: Checkpoint | None = None
    # the vision/audio projector (mmproj) loaded beside it, if any
    projector: Projector | None = None
    # a draft model for speculative decoding loaded beside it (-md), if any
    draft: DraftModel | None = None

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

    def __post_init__(self) -> None:
        self._has_weights()


def require_quant(spec: ModelSpec, quant: str) -> str:
    if quant not in spec.available_quants:
        options = ", ".join(spec.available_quants)
        raise InvalidModelError(f"{spec.id} has no quantization {quant!r} (choose from {options})")
    return quant
