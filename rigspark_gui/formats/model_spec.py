"""A model's geometry and weights as the catalog, GGUF and config.json importers give them."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rigspark_gui.core.model import TensorGroup
from rigspark_gui.core.model import model_spec as core_spec
from rigspark_gui.core.model import quality as core_quality
from rigspark_gui.formats.base import Boundary, validated_as


class QuantQuality(Boundary):
    record: ClassVar[type] = core_quality.QuantQuality
    quant: str
    kld: float | None = Field(description="KL divergence to 16-bit as shown (None: unmeasured)")
    kld_imatrix: float | None = Field(default=None, description="with an importance matrix")
    kld_plain: float | None = Field(default=None, description="without an importance matrix")
    ppl_delta: float | None = None
    same_top_pct: float | None = None
    reference_gib: float | None = Field(
        default=None, description="its size on the measured model, for dominance"
    )
    imatrix_required: bool = False
    words: str
    basis: str


class QualityTable(Boundary):
    record: ClassVar[type] = core_quality.QualityTable
    entries: dict[str, QuantQuality]
    reference: str = Field(description="the model and source the figures come from")
    kv_kld: dict[str, float] = Field(
        default_factory=dict, description="KV cache types 'k/v' -> KL divergence to f16/f16"
    )
    kv_basis: str = ""


class Geometry(Boundary):
    record: ClassVar[type] = core_spec.Geometry
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
    ssm_d_conv: int = Field(default=0, ge=0, le=64, description="Mamba/DeltaNet conv kernel")
    ssm_d_inner: int = Field(default=0, ge=0, le=1 << 20, description="value heads x head dim")
    ssm_d_state: int = Field(default=0, ge=0, le=1 << 14, description="state (key head) size")
    ssm_dt_rank: int = Field(default=0, ge=0, le=1 << 14, description="value (time-step) heads")
    ssm_n_group: int = Field(default=0, ge=0, le=1 << 14, description="groups (key heads)")
    shortconv_l_cache: int = Field(default=0, ge=0, le=64, description="LFM2 conv length")
    # Kimi Linear
    kda_head_dim: int = Field(default=0, ge=0, le=4096, description="Kimi KDA head size")
    kda_value_length: int = Field(
        default=0, ge=0, le=65536, description="Kimi: the file's value_length (head_dim)"
    )
    n_ff_per_layer: tuple[int, ...] | None = Field(
        default=None, description="FFN width of each layer where it differs; 0 = no FFN"
    )
    moe_latent_size: int = Field(default=0, ge=0, le=1 << 20, description="latent MoE width")
    head_dim_k_swa: int | None = Field(
        default=None, gt=0, le=65536, description="K head dim of sliding-window layers"
    )
    head_dim_v_swa: int | None = Field(default=None, gt=0, le=65536)
    n_layer_kv_from_start: int | None = Field(
        default=None, ge=0, description="layers from here reuse an earlier layer's KV"
    )
    n_embd_per_layer: int = Field(
        default=0, ge=0, le=1 << 16, description="per-layer embedding width (host memory)"
    )
    attention_k_eq_v: bool = Field(default=False, description="full layers use K as V")
    n_altup: int = Field(default=0, ge=0, le=64, description="Gemma 3n AltUp inputs")
    laurel_rank: int = Field(default=0, ge=0, le=1 << 16, description="Gemma 3n LAuReL rank")
    indexer_n_head: int = Field(default=0, ge=0, le=4096, description="DSA indexer heads")
    indexer_head_size: int = Field(default=0, ge=0, le=65536, description="DSA indexer key")
    indexer_layers: tuple[int, ...] | None = Field(
        default=None, description="layers with an indexer cache where not all have one"
    )
    n_layer_nextn: int = Field(
        default=0, ge=0, le=16, description="MTP blocks at the end: no KV, skipped at load"
    )
    # DeepSeek V4
    compress_ratios: tuple[int, ...] | None = Field(
        default=None, description="KV compression ratio per layer (0, 4 or 128)"
    )
    hc_mult: int = Field(default=0, ge=0, le=64, description="hyper-connection streams")
    o_groups: int = Field(default=0, ge=0, le=4096, description="output projection groups")
    o_lora_rank: int = Field(default=0, ge=0, le=65536, description="output LoRA rank")
    n_hash_layers: int = Field(default=0, ge=0, le=4096, description="hash-routed layers")
    context_length: int = Field(gt=0, le=1 << 24, description="trained context, tokens")


class TensorInfo(Boundary):
    record: ClassVar[type] = core_spec.TensorInfo
    name: str
    type: str
    shape: tuple[int, ...]
    group: TensorGroup
    layer: int | None = None
    expert: bool = Field(default=False, description="a routed-expert tensor (ffn_*_exps)")
    n_bytes: int = Field(default=-1, description="bytes; computed from type and shape if -1")


class QuantFile(Boundary):
    record: ClassVar[type] = core_spec.QuantFile
    file_bytes: int = Field(gt=0)
    source: str


class Checkpoint(Boundary):
    record: ClassVar[type] = core_spec.Checkpoint
    format: str = Field(description="BF16, FP8, INT8, AWQ or GPTQ (from config.json)")
    total_bytes: int | None = Field(default=None, ge=0, description="its safetensors bytes")
    source: str = ""
    path: str = Field(default="", description="the folder holding it, when it was read")


class ModelSpec(Boundary):
    record: ClassVar[type] = core_spec.ModelSpec
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


GeometryRecord = validated_as(Geometry)
QuantFileRecord = validated_as(QuantFile)


def read_model_spec(raw: object) -> core_spec.ModelSpec:
    """A model spec from its JSON (validation cases, saved imports)."""
    record: core_spec.ModelSpec = ModelSpec.model_validate(raw).to_record()
    return record
