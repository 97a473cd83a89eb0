"""A GGUF header's geometry checked without loading pydantic, for the common case.

`formats.model_spec.Geometry` is the boundary's rule for a geometry (types, ranges, no
unknown field). Loading pydantic to apply it costs more than reading a GGUF header and
planning with it (a third of a second on a small machine), which is what a first question
about a file waits for. Here the same rule is applied from a table of its ranges when
every value is already of its exact type and inside its range; anything else (an unknown
field, a value pydantic would convert or refuse) goes to pydantic itself, so a bad file
fails with the same message as before. tests/importers/test_geometry_check.py keeps the
table equal to the pydantic model, field by field.
"""

from __future__ import annotations

from typing import Any

from rigspark_gui.core.model import Geometry

# field -> (kind, low, low is strict, high); kind: int | bool | str | ints (a tuple of
# ints); a "?" suffix: None allowed. None bounds: unbounded (formats/model_spec.py).
_K = 1 << 10
_M = 1 << 20
RANGES: dict[str, tuple[str, int | None, bool, int | None]] = {
    "architecture": ("str", None, False, None),
    "n_layer": ("int", 0, True, 4 * _K),
    "n_embd": ("int", 0, True, _M),
    "n_head": ("int", 0, True, 4 * _K),
    "n_head_kv": ("int", 0, False, 4 * _K),
    "n_head_kv_per_layer": ("ints?", None, False, None),
    "head_dim_k": ("int", 0, True, 64 * _K),
    "head_dim_v": ("int", 0, True, 64 * _K),
    "n_vocab": ("int", 0, True, 16 * _M),
    "n_ff": ("int", 0, False, 4 * _M),
    "tied_embeddings": ("bool", None, False, None),
    "n_expert": ("int", 0, False, 4 * _K),
    "n_expert_used": ("int", 0, False, 4 * _K),
    "n_ff_expert": ("int", 0, False, 4 * _M),
    "n_shared_expert": ("int", 0, False, 64),
    "n_ff_shared_expert": ("int", 0, False, 4 * _M),
    "n_dense_lead": ("int", 0, False, None),
    "moe_every": ("int", 1, False, None),
    "sliding_window": ("int?", 0, True, None),
    "swa_pattern": ("int?", 1, False, None),
    "kv_lora_rank": ("int?", 0, True, None),
    "q_lora_rank": ("int?", 0, True, None),
    "rope_head_dim": ("int?", 0, True, None),
    "recurrent_layers": ("ints", None, False, None),
    "recurrent_r_values": ("int", 0, False, None),
    "recurrent_s_values": ("int", 0, False, None),
    "ssm_d_conv": ("int", 0, False, 64),
    "ssm_d_inner": ("int", 0, False, _M),
    "ssm_d_state": ("int", 0, False, 16 * _K),
    "ssm_dt_rank": ("int", 0, False, 16 * _K),
    "ssm_n_group": ("int", 0, False, 16 * _K),
    "shortconv_l_cache": ("int", 0, False, 64),
    "n_ff_per_layer": ("ints?", None, False, None),
    "moe_latent_size": ("int", 0, False, _M),
    "head_dim_k_swa": ("int?", 0, True, 64 * _K),
    "head_dim_v_swa": ("int?", 0, True, 64 * _K),
    "n_layer_kv_from_start": ("int?", 0, False, None),
    "n_embd_per_layer": ("int", 0, False, 64 * _K),
    "attention_k_eq_v": ("bool", None, False, None),
    "n_altup": ("int", 0, False, 64),
    "laurel_rank": ("int", 0, False, 64 * _K),
    "indexer_n_head": ("int", 0, False, 4 * _K),
    "indexer_head_size": ("int", 0, False, 64 * _K),
    "indexer_layers": ("ints?", None, False, None),
    "n_layer_nextn": ("int", 0, False, 16),
    "context_length": ("int", 0, True, 16 * _M),
}


def _int_ok(v: Any, low: int | None, strict: bool, high: int | None) -> bool:
    if type(v) is not int:
        return False
    if low is not None and (v <= low if strict else v < low):
        return False
    return high is None or v <= high


def _plain(fields: dict[str, Any]) -> dict[str, Any] | None:
    """The values as the pydantic model would leave them, or None where it might
    convert or refuse one (then it decides)."""
    out: dict[str, Any] = {}
    for name, v in fields.items():
        rule = RANGES.get(name)
        if rule is None:
            return None
        kind, low, strict, high = rule
        if kind.endswith("?"):
            if v is None:
                out[name] = None
                continue
            kind = kind[:-1]
        if kind == "str":
            ok = type(v) is str
        elif kind == "bool":
            ok = type(v) is bool
        elif kind == "int":
            ok = _int_ok(v, low, strict, high)
        else:  # a tuple of ints (a list becomes one, as pydantic makes it)
            ok = isinstance(v, tuple | list) and all(type(x) is int for x in v)
            v = tuple(v) if ok else v
        if not ok:
            return None
        out[name] = v
    return out


def checked_geometry(fields: dict[str, Any]) -> Geometry:
    """`formats.model_spec.Geometry(**fields).to_record()`, without pydantic when the
    values need no conversion. Raises ValueError (pydantic's ValidationError, or the
    record's own checks) as that does."""
    plain = _plain(fields)
    if plain is not None:
        try:
            return Geometry(**plain)
        except TypeError:
            pass  # a required field missing: pydantic names it
    from rigspark_gui.formats.model_spec import Geometry as GeometryFile

    return GeometryFile(**fields).to_record()  # type: ignore[no-any-return]
