"""data/projectors.json: which catalog models load a vision/audio projector (mmproj
GGUF) beside them, the projector files people download, and the projector's geometry
and weights where they are known. Keyed by catalog model id."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from rigspark_gui.core.model import Projector as ProjectorRecord
from rigspark_gui.formats.base import Boundary

PROJECTORS_SCHEMA_VERSION = 1
_Positive = Annotated[int, Field(ge=1, le=1 << 20)]


class Projector(Boundary):
    """A projector's geometry and weights, as clip.cpp reads them from its header."""

    record: ClassVar[type] = ProjectorRecord
    projector_type: str = Field(min_length=1, max_length=40, description="clip.projector_type")
    modality: Literal["vision", "audio", "vision+audio"] = "vision"
    n_embd: _Positive
    n_ff: _Positive
    n_head: _Positive
    n_layer: _Positive
    image_size: int = Field(default=0, ge=0, le=65536)
    patch_size: int = Field(default=0, ge=0, le=1024)
    n_merge: int = Field(default=1, ge=1, le=64)
    projection_dim: int = Field(default=0, ge=0, le=1 << 20)
    weights_bytes: int = Field(ge=0, le=1 << 40, description="sum of ggml_nbytes")
    warmup_image_size: int = Field(default=0, ge=0, le=65536)
    max_image_size: int = Field(default=0, ge=0, le=65536)
    file_name: str = Field(default="", max_length=200)
    source: str = Field(default="", max_length=2000)


class ProjectorFile(BaseModel):
    """One projector file people download for the model."""

    model_config = ConfigDict(extra="forbid")
    repo: str = Field(min_length=3, max_length=200, description="Hugging Face repository")
    file: str | None = Field(default=None, max_length=200, description="None: not listed here")
    type: str = Field(default="", max_length=20, description="f16, bf16, q8_0 ...")
    file_bytes: int | None = Field(default=None, ge=1, le=1 << 40)
    source: str = Field(min_length=1, max_length=2000)


class ModelProjectors(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # None: the model has a projector whose size is not known here (read it with --mmproj)
    projector: Projector | None = None
    files: list[ProjectorFile] = Field(min_length=1)
    note: str = Field(default="", max_length=2000)


class ProjectorsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1] = PROJECTORS_SCHEMA_VERSION
    source: str = Field(default="", max_length=4000)
    projectors: dict[str, ModelProjectors]
