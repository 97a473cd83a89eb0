"""A multimodal projector (llama.cpp's mmproj GGUF): the vision or audio encoder that
llama-server loads beside the text model with `--mmproj`, as tools/mtmd/clip.cpp reads
it (b11434): the encoder's geometry, the warm-up image it reserves its compute buffer
for, and the bytes of its weights."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Projector:
    # clip.projector_type (gemma3, qwen25vl, pixtral, ...)
    projector_type: str
    # vision, audio or vision+audio
    modality: str = "vision"
    # encoder geometry: clip.vision.* (clip.audio.* for an audio encoder)
    n_embd: int
    n_ff: int
    n_head: int
    n_layer: int
    # clip.vision.image_size and patch_size (0 for audio)
    image_size: int = 0
    patch_size: int = 0
    # patches merged per side into one token (Gemma 3's 4x4 pool, Qwen-VL's 2x2)
    n_merge: int = 1
    # the text model's embedding width it feeds (clip.vision.projection_dim, or the
    # output rows of its last projection)
    projection_dim: int = 0
    # sum of ggml_nbytes over the tensors clip.cpp loads (the weights buffer)
    weights_bytes: int
    # the square image clip.cpp warms up with (get_dummy_batch); its compute buffer is
    # reserved for it at load
    warmup_image_size: int = 0
    # the largest image side it takes unresized (dynamic resolution: Qwen-VL, Pixtral,
    # Gemma 4); 0: every image is resized to `image_size`
    max_image_size: int = 0
    # file name, and where its figures come from (a GGUF header read, or a listing)
    file_name: str = ""
    source: str = ""
    # the file or URL someone chose (`--mmproj`, Choose file…), which the launch command
    # passes as is; '' for a catalog listing, the file -hf downloads beside the model
    path: str = ""

    def __post_init__(self) -> None:
        if self.weights_bytes < 0 or min(self.n_embd, self.n_head, self.n_layer) < 0:
            raise ValueError("a projector's sizes cannot be negative")
        if self.patch_size < 0 or self.image_size < 0 or self.n_merge < 1:
            raise ValueError("a projector's image geometry is out of range")

    @property
    def dynamic(self) -> bool:
        """Whether images keep their own size (up to `max_image_size`) rather than being
        resized to one square."""
        return self.max_image_size > 0
