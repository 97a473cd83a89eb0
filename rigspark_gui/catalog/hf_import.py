"""Import a Hugging Face config.json as a ModelSpec.

A config has no tensors, so the spec carries geometry only and the engine synthesizes
weights per quantization. Geometry follows what llama.cpp builds from the converted
GGUF (architecture names, MLA widths, which sliding windows are honoured), so a model
imported from config.json and the same model imported from its GGUF plan alike.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from rigspark_gui.catalog.gguf_import import swa_period
from rigspark_gui.catalog.hf_hybrid import HF_HYBRID_TYPES, hybrid_config_geometry
from rigspark_gui.catalog.hf_more import HF_MORE_TYPES, more_config
from rigspark_gui.core.errors import ModelImportError, validation_message
from rigspark_gui.core.model import Checkpoint, Geometry, ModelSpec
from rigspark_gui.formats.model_spec import Geometry as GeometryFile

__all__ = ["SYNTHESIZED_QUANTS", "HfImport", "import_hf", "import_hf_config"]

SYNTHESIZED_QUANTS = ("F16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K")

_MAX_CONFIG_BYTES = 10 * 1024 * 1024
# Index files list every tensor; DeepSeek-V3's is several MB.
_MAX_INDEX_BYTES = 64 * 1024 * 1024
_INDEX_NAME = "model.safetensors.index.json"

# model_type -> (llama.cpp architecture, tie_word_embeddings default of the HF config class)
_FAMILIES: dict[str, tuple[str, bool]] = {
    "llama": ("llama", False),
    "mistral": ("llama", False),
    "mixtral": ("llama", False),
    "internlm3": ("llama", False),
    "qwen2": ("qwen2", False),
    "qwen2_moe": ("qwen2moe", False),
    "qwen3": ("qwen3", False),
    "qwen3_moe": ("qwen3moe", False),
    "gemma2": ("gemma2", True),
    "gemma3": ("gemma3", True),
    "gemma3_text": ("gemma3", True),
    "phi3": ("phi3", False),
    "phimoe": ("phimoe", False),
    "deepseek_v2": ("deepseek2", False),
    "deepseek_v3": ("deepseek2", False),
    "kimi_k2": ("deepseek2", False),
    "gpt_oss": ("gpt-oss", False),
    "glm4": ("glm4", False),
    "glm4_moe": ("glm4moe", False),
    "cohere": ("command-r", True),
    "cohere2": ("cohere2", True),
    "olmo2": ("olmo2", False),
    "olmoe": ("olmoe", False),
    "granite": ("granite", False),
    "granitemoe": ("granitemoe", False),
    "falcon": ("falcon", True),
    "starcoder2": ("starcoder2", True),
    "llama4": ("llama4", False),
    "exaone": ("exaone", True),
    "internlm2": ("internlm2", False),
}

# Gemma 3 configs omit fields equal to Gemma3TextConfig's defaults (the 4B lists only
# five), so those defaults are part of the format.
_GEMMA3_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131072,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
}

# Sliding-window period llama.cpp applies per architecture (set_swa_pattern); every
# other architecture runs full attention even when its config names a window.
_SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2, "llama4": 4}
_LLAMA4_CHUNK = 8192

_LIMIT_LAYERS = 4096
_LIMIT_WIDTH = 1 << 20
_LIMIT_FF = 1 << 22
_LIMIT_HEADS = 4096
_LIMIT_HEAD_DIM = 65536
_LIMIT_VOCAB = 1 << 24
_LIMIT_CONTEXT = 1 << 24
_LIMIT_EXPERTS = 4096


@dataclass(frozen=True, slots=True)
class HfImport:
    """A config.json import: the spec and what the folder says about the weights."""

    spec: ModelSpec
    config_path: Path
    safetensors_total_bytes: int | None  # metadata.total_size of model.safetensors.index.json


_MISSING = object()


class _Config:
    """Typed reads from one JSON object; every error names the field."""

    def __init__(
        self,
        data: dict[str, Any],
        fname: str,
        prefix: str = "",
        defaults: dict[str, Any] | None = None,
    ) -> None:
        self.data = data
        self.fname = fname
        self.prefix = prefix
        self.defaults = defaults or {}

    def fail(self, reason: str) -> NoReturn:
        raise ModelImportError(f"{self.fname}: {reason}")

    def _raw(self, names: tuple[str, ...]) -> tuple[str, Any]:
        for name in names:
            value = self.data.get(name)
            if value is not None:
                return name, value
        for name in names:
            if name in self.defaults:
                return name, self.defaults[name]
        return names[0], _MISSING

    def integer(self, *names: str, default: Any = _MISSING, lo: int = 1, hi: int) -> int:
        name, value = self._raw(names)
        if value is _MISSING:
            if default is _MISSING:
                self.fail(f"missing field {self.prefix}{name}")
            return int(default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(f"field {self.prefix}{name} must be an integer, got {_show(value)}")
        if not lo <= value <= hi:
            self.fail(f"field {self.prefix}{name} = {value} is out of range ({lo}..{hi})")
        return value

    def optional_int(self, *names: str, lo: int = 1, hi: int) -> int | None:
        name, value = self._raw(names)
        if value is _MISSING:
            return None
        return self.integer(name, lo=lo, hi=hi)

    def flag(self, name: str, default: bool) -> bool:
        value = self.data.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(f"field {self.prefix}{name} must be true or false, got {_show(value)}")
        return value

    def text(self, name: str) -> str | None:
        value = self.data.get(name)
        return value if isinstance(value, str) else None

    def layer_types(self, n_layer: int) -> list[bool] | None:
        """`layer_types` as sliding flags (True = windowed layer), when the config has it."""
        value = self.data.get("layer_types")
        if value is None:
            return None
        name = f"{self.prefix}layer_types"
        if not isinstance(value, list) or len(value) != n_layer:
            self.fail(f"field {name} must list one type per layer ({n_layer})")
        flags: list[bool] = []
        for item in value:
            if item not in ("full_attention", "sliding_attention", "chunked_attention"):
                self.fail(f"field {name} holds an unknown layer type {_show(item)}")
            flags.append(item != "full_attention")
        return flags


def _printable(text: str) -> str:
    """`text` with unprintable characters (controls, lone surrogates) replaced by '?'."""
    return "".join(ch if ch.isprintable() else "?" for ch in text).strip()


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _read_bounded(f: BinaryIO, limit: int) -> bytes:
    """At most `limit` bytes, in chunks: `f.read(limit)` allocates `limit` bytes up front,
    64 MiB for every safetensors index however small the file."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = f.read(min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_json(path: Path, limit: int) -> Any:
    fname = path.name
    try:
        with path.open("rb") as f:
            raw = _read_bounded(f, limit + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ModelImportError(f"{fname}: cannot read the file ({reason})") from exc
    if len(raw) > limit:
        raise ModelImportError(f"{fname}: larger than {limit // (1024 * 1024)} MB, not a config")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError
        detail = " ".join(str(exc).split())[:120]
        raise ModelImportError(f"{fname}: not valid JSON ({detail})") from exc


def _config_path(path: Path) -> Path:
    if path.is_dir():
        candidate = path / "config.json"
        if not candidate.is_file():
            raise ModelImportError(f"{path.name}: the folder holds no config.json")
        return candidate
    if not path.is_file():
        raise ModelImportError(f"{path.name}: no such file")
    return path


def _safetensors_total(folder: Path) -> int | None:
    index = folder / _INDEX_NAME
    if not index.is_file():
        return None
    from pydantic import ValidationError

    from rigspark_gui.catalog.files import SafetensorsIndex

    try:
        checked = SafetensorsIndex.model_validate(_read_json(index, _MAX_INDEX_BYTES))
    except ValidationError as err:
        raise ModelImportError(f"{_INDEX_NAME}: {validation_message(err)}") from None
    return checked.metadata.total_size


# safetensors: an 8-byte little-endian header length, then a JSON header naming every
# tensor's dtype, shape and byte range. Headers of real checkpoints are under 1 MiB.
_MAX_SAFETENSORS_HEADER = 64 * 1024 * 1024


def _safetensors_single(folder: Path) -> int | None:
    """Tensor bytes of a one-file checkpoint (`model.safetensors`), from its header."""
    path = folder / "model.safetensors"
    if not path.is_file():
        return None
    try:
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ModelImportError("model.safetensors: truncated header")
            size = int.from_bytes(head, "little")
            if not 2 <= size <= _MAX_SAFETENSORS_HEADER:
                raise ModelImportError("model.safetensors: implausible header size")
            raw = _read_bounded(f, size)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ModelImportError(f"model.safetensors: cannot read the file ({reason})") from exc
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ModelImportError("model.safetensors: the header is not valid JSON") from exc
    if not isinstance(header, dict):
        raise ModelImportError("model.safetensors: the header is not a JSON object")
    from pydantic import ValidationError

    from rigspark_gui.catalog.files import SafetensorsTensor

    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            tensor = SafetensorsTensor.model_validate(entry)
        except ValidationError:
            raise ModelImportError(
                f"model.safetensors: tensor {_printable(str(name))[:60]} has no byte range"
            ) from None
        end = max(end, tensor.data_offsets[1])
    return end


def checkpoint_format(config: dict[str, Any]) -> str:
    """The serving format a config.json describes: its quantization method, else 16-bit."""
    q = config.get("quantization_config")
    if not isinstance(q, dict):
        return "BF16"
    method = str(q.get("quant_method", "")).lower()
    bits = q.get("bits", q.get("w_bit"))
    if method in ("fp8", "fbgemm_fp8", "modelopt"):
        return "FP8"
    if method in ("awq", "gptq", "gptq_marlin") and bits == 8:
        return "INT8"  # 8-bit weights: a byte each, as W8A8's
    if method == "awq":
        return "AWQ"
    if method in ("gptq", "gptq_marlin"):
        return "GPTQ"
    if method == "mxfp4":
        return "MXFP4"
    if method == "compressed-tensors":
        groups = q.get("config_groups")
        weights: Any = {}
        if isinstance(groups, dict) and groups:
            first = next(iter(groups.values()))
            weights = first.get("weights", {}) if isinstance(first, dict) else {}
        bits = weights.get("num_bits") if isinstance(weights, dict) else None
        kind = weights.get("type") if isinstance(weights, dict) else None
        if bits == 4:
            return "GPTQ"
        return "FP8" if kind == "float" else "INT8"
    return "BF16"


def _geometry(
    top: dict[str, Any],
    model_type: str,
    fname: str,
    arch_as: str | None = None,
    extra: dict[str, Any] | None = None,
) -> tuple[Geometry, str]:
    """`extra` fields replace what model_type's reading gives (hf_more.py's types)."""
    arch, tie_default = _FAMILIES[model_type]
    arch = arch_as or arch
    if model_type in ("gemma3", "llama4"):
        inner = top.get("text_config")
        if model_type == "gemma3" and inner is None:
            inner = {}
        if not isinstance(inner, dict):
            raise ModelImportError(f"{fname}: field text_config must be an object")
        defaults = _GEMMA3_DEFAULTS if model_type == "gemma3" else None
        c = _Config(inner, fname, "text_config.", defaults)
    else:
        c = _Config(top, fname, "", _GEMMA3_DEFAULTS if model_type == "gemma3_text" else None)

    n_layer = c.integer("num_hidden_layers", "num_layers", "n_layer", hi=_LIMIT_LAYERS)
    n_embd = c.integer("hidden_size", "n_embd", "d_model", hi=_LIMIT_WIDTH)
    n_head = c.integer("num_attention_heads", "n_head", hi=_LIMIT_HEADS)
    n_vocab = c.integer("vocab_size", hi=_LIMIT_VOCAB)
    context = c.integer(
        "max_position_embeddings",
        "n_positions",
        default=2048 if model_type == "falcon" else _MISSING,  # FalconConfig's default
        hi=_LIMIT_CONTEXT,
    )
    if model_type == "falcon":
        # Falcon-7B is multi-query; the 40B/180B "new decoder" layout names its KV heads.
        if c.flag("new_decoder_architecture", False):
            n_head_kv = c.integer("num_kv_heads", "n_head_kv", default=n_head, hi=_LIMIT_HEADS)
        elif c.flag("multi_query", True):
            n_head_kv = 1
        else:
            n_head_kv = n_head
        n_ff = c.integer("ffn_hidden_size", default=4 * n_embd, hi=_LIMIT_FF)
    else:
        n_head_kv = c.integer("num_key_value_heads", default=n_head, hi=_LIMIT_HEADS)
        n_ff = c.integer("intermediate_size", hi=_LIMIT_FF)

    head_dim = c.optional_int("head_dim", hi=_LIMIT_HEAD_DIM)
    if head_dim is None:
        if n_embd % n_head:
            c.fail(f"no head_dim and hidden_size {n_embd} is not divisible by {n_head} heads")
        head_dim = n_embd // n_head
    head_dim_k = head_dim_v = head_dim
    # a text_config may leave the tie flag to the outer config
    tied = c.flag(
        "tie_word_embeddings", _Config(top, fname).flag("tie_word_embeddings", tie_default)
    )

    moe: dict[str, int] = {}
    mla: dict[str, int | None] = {}
    kv_layers: list[int] | None = None
    if model_type in ("mixtral", "phimoe", "olmoe", "granitemoe", "gpt_oss"):
        # Experts as wide as intermediate_size; every layer is MoE.
        moe = {
            "n_expert": c.integer("num_local_experts", "num_experts", hi=_LIMIT_EXPERTS),
            "n_expert_used": c.integer(
                "num_experts_per_tok", "experts_per_token", hi=_LIMIT_EXPERTS
            ),
            "n_ff_expert": n_ff,
        }
        n_ff = 0
    elif model_type in ("qwen2_moe", "qwen3_moe"):
        moe = {
            "n_expert": c.integer("num_experts", hi=_LIMIT_EXPERTS),
            "n_expert_used": c.integer("num_experts_per_tok", hi=_LIMIT_EXPERTS),
            "n_ff_expert": c.integer("moe_intermediate_size", hi=_LIMIT_FF),
        }
        shared = c.integer("shared_expert_intermediate_size", default=0, lo=0, hi=_LIMIT_FF)
        if shared:
            moe |= {"n_shared_expert": 1, "n_ff_shared_expert": shared}
        n_ff = 0
    elif model_type in ("deepseek_v2", "deepseek_v3", "kimi_k2", "glm4_moe"):
        n_ff_expert = c.integer("moe_intermediate_size", hi=_LIMIT_FF)
        n_shared = c.integer("n_shared_experts", default=0, lo=0, hi=64)
        moe = {
            "n_expert": c.integer("n_routed_experts", hi=_LIMIT_EXPERTS),
            "n_expert_used": c.integer("num_experts_per_tok", hi=_LIMIT_EXPERTS),
            "n_ff_expert": n_ff_expert,
            "n_shared_expert": n_shared,
            "n_ff_shared_expert": n_ff_expert * n_shared,
            "n_dense_lead": c.integer("first_k_dense_replace", default=0, lo=0, hi=n_layer),
        }
        if model_type == "glm4_moe":
            # llama.cpp keeps the MTP block(s) as extra layers (-ngl slots) without a KV
            # cache, and skips their weights unless drafting with them.
            nextn = c.integer("num_nextn_predict_layers", default=0, lo=0, hi=16)
            if nextn:
                kv_layers = [n_head_kv] * n_layer + [0] * nextn
                n_layer += nextn
                moe["n_layer_nextn"] = nextn
        else:
            # MLA; the DeepSeek converters drop MTP layers, so num_hidden_layers stands.
            nope = c.integer("qk_nope_head_dim", hi=_LIMIT_HEAD_DIM)
            rope = c.integer("qk_rope_head_dim", hi=_LIMIT_HEAD_DIM)
            head_dim_k = nope + rope
            head_dim_v = c.integer("v_head_dim", hi=_LIMIT_HEAD_DIM)
            mla = {
                "kv_lora_rank": c.integer("kv_lora_rank", hi=_LIMIT_HEAD_DIM),
                "q_lora_rank": c.optional_int("q_lora_rank", hi=_LIMIT_WIDTH),
                "rope_head_dim": rope,
            }
    elif model_type == "llama4":
        n_ff_expert = n_ff
        moe_every = c.integer("interleave_moe_layer_step", default=1, hi=n_layer)
        moe = {
            "n_expert": c.integer("num_local_experts", hi=_LIMIT_EXPERTS),
            "n_expert_used": c.integer("num_experts_per_tok", hi=_LIMIT_EXPERTS),
            "n_ff_expert": n_ff_expert,
            "n_shared_expert": 1,
            "n_ff_shared_expert": n_ff_expert,
            "moe_every": moe_every,
        }
        # Dense layers between MoE layers use intermediate_size_mlp.
        n_ff = c.integer("intermediate_size_mlp", hi=_LIMIT_FF) if moe_every > 1 else 0

    sliding_window, swa_pattern = _sliding_window(c, arch, n_layer)
    fields: dict[str, Any] = dict(
        architecture=arch,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_head_kv_per_layer=tuple(kv_layers) if kv_layers is not None else None,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        n_vocab=n_vocab,
        n_ff=n_ff,
        tied_embeddings=tied,
        sliding_window=sliding_window,
        swa_pattern=swa_pattern,
        context_length=context,
        **moe,
        **mla,
    )
    try:
        geometry = GeometryFile(**(fields | (extra or {}))).to_record()
    except ValueError as exc:  # pydantic's ValidationError, or fields that disagree
        msg = " ".join(validation_message(exc).split())
        raise ModelImportError(f"{fname}: unusable geometry ({msg})") from exc
    return geometry, arch


def _sliding_window(c: _Config, arch: str, n_layer: int) -> tuple[int | None, int | None]:
    if arch not in _SWA_PERIOD:
        return None, None  # e.g. Qwen2/Mistral/Phi-3/Starcoder2 windows: llama.cpp ignores them
    if arch == "llama4":
        window = c.integer("attention_chunk_size", default=_LLAMA4_CHUNK, hi=_LIMIT_CONTEXT)
    else:
        window = c.integer("sliding_window", default=0, lo=0, hi=_LIMIT_CONTEXT)
    flags = c.layer_types(n_layer)
    if flags is not None:
        period = swa_period(flags)
        if period is None:
            c.fail(
                "field layer_types: sliding layers do not repeat periodically; not supported yet"
            )
    else:
        period = c.integer("sliding_window_pattern", default=_SWA_PERIOD[arch], hi=n_layer + 1)
    if not window or period <= 1:
        return None, None
    return window, period


def import_hf(path: str | os.PathLike[str]) -> HfImport:
    """Read config.json (or a folder holding one) and the safetensors index beside it."""
    config_path = _config_path(Path(path))
    fname = config_path.name
    data = _read_json(config_path, _MAX_CONFIG_BYTES)
    if not isinstance(data, dict):
        raise ModelImportError(f"{fname}: the top level must be a JSON object")
    from pydantic import ValidationError

    from rigspark_gui.catalog.files import HfConfigFile

    try:
        model_type = HfConfigFile.model_validate(data).model_type
    except ValidationError as err:
        raise ModelImportError(f"{fname}: {validation_message(err)}") from None
    if model_type in HF_HYBRID_TYPES:  # Gated DeltaNet / Mamba-2 hybrids
        geometry = hybrid_config_geometry(data, model_type, fname)
    elif model_type in HF_MORE_TYPES:  # wrapped or renamed fields
        flat, family, arch, extra = more_config(data, model_type, fname)
        geometry, _ = _geometry(flat, family, fname, arch, extra)
    elif model_type not in _FAMILIES:
        raise ModelImportError(f"{fname}: not supported yet: {_printable(model_type)[:60]}")
    else:
        geometry, _ = _geometry(data, model_type, fname)

    folder = config_path.parent.resolve()
    folder_name = folder.name or "model"
    total = _safetensors_total(folder)
    if total is None:
        total = _safetensors_single(folder)
    name_or_path = data.get("_name_or_path")
    name = folder_name
    if isinstance(name_or_path, str) and name_or_path.strip():
        # JSON may spell lone surrogates ("\ud800"), which no encoder can write out again.
        name = _printable(name_or_path.strip().rstrip("/").split("/")[-1]) or folder_name
    source = str(config_path)
    if total is not None:
        source += f" (safetensors {total} bytes)"
    try:
        spec = ModelSpec(
            id=("hf:" + folder_name)[:200],
            name=name[:300],
            family=model_type,
            geometry=geometry,
            quants=SYNTHESIZED_QUANTS,
            source=source,
            imported=True,
            checkpoint=Checkpoint(
                format=checkpoint_format(data),
                total_bytes=total,
                source=f"{fname} and its safetensors" if total is not None else fname,
                path=str(folder),
            ),
        )
    except ValueError as exc:
        raise ModelImportError(f"{fname}: unusable model ({validation_message(exc)})") from None
    return HfImport(spec=spec, config_path=config_path, safetensors_total_bytes=total)


def import_hf_config(path: str | os.PathLike[str]) -> ModelSpec:
    """A ModelSpec from config.json or a folder holding one; see `import_hf` for the rest."""
    return import_hf(path).spec
