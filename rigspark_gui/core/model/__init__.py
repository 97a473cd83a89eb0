"""What the model is: ggml types and their sizes, llama-quantize's per-tensor recipe,
a model's geometry and weights (ModelSpec), and the measured quality of each
quantization.

The public face of the model package; other packages import from here only."""

from rigspark_gui.core.model import quant_recipe
from rigspark_gui.core.model.draft import VOCAB_MAX_SIZE_DIFFERENCE, DraftModel
from rigspark_gui.core.model.ggml_types import (
    GGML_TYPES,
    GGML_TYPES_BY_ID,
    KvCacheType,
    kv_cache_type,
    kv_row_bytes,
    row_bytes,
)
from rigspark_gui.core.model.model_spec import (
    Checkpoint,
    Geometry,
    ModelSpec,
    QuantFile,
    TensorGroup,
    TensorInfo,
    require_quant,
)
from rigspark_gui.core.model.projector import Projector
from rigspark_gui.core.model.quality import (
    QualityTable,
    QuantQuality,
    loss_words,
)
from rigspark_gui.core.model.quant_recipe import (
    FTYPE_ALIASES,
    FTYPE_DEFAULT,
    RecipeContext,
    canonical_ftype,
    chooser,
    position_facts,
    quantizable,
)

__all__ = [
    "FTYPE_ALIASES",
    "FTYPE_DEFAULT",
    "GGML_TYPES",
    "GGML_TYPES_BY_ID",
    "VOCAB_MAX_SIZE_DIFFERENCE",
    "Checkpoint",
    "DraftModel",
    "Geometry",
    "KvCacheType",
    "ModelSpec",
    "Projector",
    "QualityTable",
    "QuantFile",
    "QuantQuality",
    "RecipeContext",
    "TensorGroup",
    "TensorInfo",
    "canonical_ftype",
    "chooser",
    "kv_cache_type",
    "kv_row_bytes",
    "loss_words",
    "position_facts",
    "quant_recipe",
    "quantizable",
    "require_quant",
    "row_bytes",
]
