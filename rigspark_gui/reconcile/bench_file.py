"""One llama-bench result as its `-o json`, `-o jsonl` and `-o csv` outputs write it, as a
pydantic model. llama-bench adds keys from build to build and CSV gives every value as
text, so unknown keys are kept and a value that does not read as its type is `None`
(the row may still be usable), read as llama.cpp prints it (`parse_int`/`parse_float`)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

from rigspark_gui.reconcile.log_records import parse_float, parse_int


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    return parse_int(_text(value))


def _float(value: Any) -> float | None:
    return parse_float(_text(value))


Int = Annotated[int | None, BeforeValidator(_int)]
Float = Annotated[float | None, BeforeValidator(_float)]
Text = Annotated[str | None, BeforeValidator(_text)]


class LlamaBenchRecord(BaseModel):
    """The fields of a llama-bench result RigSpark compares with its estimate."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
    avg_ts: Float = None
    stddev_ts: Float = None
    n_prompt: Int = None
    n_gen: Int = None
    n_depth: Int = None
    model_type: Text = None
    model_filename: Text = None
    model_size: Int = None
    model_n_params: Int = None
    backends: Text = None
    backend: Text = None
    n_gpu_layers: Int = None
    n_threads: Int = None
    n_batch: Int = None
    n_ubatch: Int = None
    type_k: Text = None
    type_v: Text = None
    flash_attn: Text = None
    tensor_split: Text = None
