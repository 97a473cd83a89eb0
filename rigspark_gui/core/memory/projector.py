"""The memory a multimodal projector (mmproj) takes: its weights and the compute buffer
clip.cpp reserves at load for its warm-up image (llama.cpp b11434, tools/mtmd/clip.cpp).

- Weights: the sum of ggml_nbytes of the tensors clip.cpp loads, in one buffer of the
  backend it runs on (`clip_model_loader::load_tensors`).
- Where: llama-server passes `mmproj_use_gpu` (on unless `--no-mmproj-offload`) and
  `mmproj_device` (`-mmdev`, else the first of `--device`); with neither, `clip_ctx`
  takes `ggml_backend_init_by_type(GPU)`, the first GPU the build registers (this
  machine's GPU 0), else an iGPU, else the CPU.
- Compute: `warmup()` reserves the graph of one square image of `warmup_image_size`
  (`get_dummy_batch`, logged "warmup with image size = N x N"): the model's image size,
  or for dynamic-resolution projectors a fixed token count per side
  (`set_warmup_n_tokens`, `set_limit_image_tokens`; `WARMUP_TOKENS` below). A larger
  image later grows the buffer (`ggml_backend_sched_alloc_graph`), never shrinks it.
  On a GPU the f32 input image stays in a host compute buffer (4 * 3 * side^2 bytes).

The compute buffer of a ViT encoder (`clip_graph::build_vit`, two or more blocks) over
n patches of width E (a row = 4 * n * E bytes) is the largest of:
- the FFN: the f32 up activations 4 * n * n_ff beside three rows;
- attention with flash attention: five rows (Q, K, V, the f16 K/V copies, the output);
- attention without: the f32 scores 4 * n^2 * n_head beside six rows.
Fitted on llama-server b11434's CPU buffer lines for 13 synthetic SigLIP-style
projectors (validation/projector_b11434.json, every row to the log's 0.01 MiB), and
equal to the published CUDA0 line of Gemma 3's projector (121.25 MiB at 896 x 896 with
flash attention, ggml-org/llama.cpp#22790). Other encoder graphs (window attention,
2-D RoPE, audio conformers) are estimated with the same terms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rigspark_gui.core.model import Projector

# clip.cpp load_hparams (b11434): token count per side at warm-up (after merging) for
# projector types that warm up below their image size; the rest use `image_size`
# (Gemma 3, LLaVA/CLIP, Idefics3, Llama 4 ...).
WARMUP_TOKENS: dict[str, int] = {
    "qwen2vl_merger": 46,
    "qwen2.5vl_merger": 46,
    "qwen3vl_merger": 46,
    "ling3vl": 46,
    "glm4v": 46,
    "glm5v": 46,
    "mimovl": 46,
    "dots_ocr": 46,
    "dots3note_v": 46,
    "exaone4_5": 46,
    "pixtral": 16,
    "lightonocr": 16,
    "kimivl": 16,
    "gemma4v": 16,
    "gemma4uv": 16,
    "phi4": 16,
    "youtuvl": 16,
    "minimax_m3": 16,
    "muse-glimmer": 32,
    "hunyuanvl": 32,
    "paddleocr": 28,
}
# set_limit_image_tokens(min, max): the most tokens (after merging) one image becomes
MAX_IMAGE_TOKENS: dict[str, int] = {
    "qwen2vl_merger": 4096,
    "qwen2.5vl_merger": 4096,
    "qwen3vl_merger": 4096,
    "ling3vl": 4096,
    "glm4v": 4096,
    "pixtral": 1024,
    "kimivl": 1024,
    "gemma4v": 1120,
    "gemma4uv": 1120,
    "minimax_m3": 576,
}

_FFN_ROWS = 3
_FA_ATTN_ROWS = 5
_ATTN_ROWS = 6


def warmup_image_size(projector_type: str, image_size: int, patch_size: int, n_merge: int) -> int:
    """The side of the square image clip.cpp warms up with (`get_dummy_batch`)."""
    tokens = WARMUP_TOKENS.get(projector_type)
    if tokens is None or patch_size <= 0:
        return image_size
    return tokens * patch_size * max(n_merge, 1)


def max_image_size(projector_type: str, patch_size: int, n_merge: int) -> int:
    """The largest square side a dynamic-resolution projector takes unresized
    (sqrt of image_max_pixels); 0 when every image is resized to the model's size."""
    tokens = MAX_IMAGE_TOKENS.get(projector_type)
    if tokens is None or patch_size <= 0:
        return 0
    return math.isqrt(tokens * (patch_size * max(n_merge, 1)) ** 2)


def encoded_side(p: Projector, image_size: int | None = None) -> int:
    """The square side the encoder's compute buffer is sized for: the warm-up image, or
    a larger image the user sends (`image_size`) where the projector keeps it (dynamic
    resolution, up to its limit; fixed-size projectors resize every image)."""
    warm = p.warmup_image_size or p.image_size
    if image_size is None or not p.dynamic:
        return warm
    step = max(p.patch_size * p.n_merge, 1)
    side = min(image_size, p.max_image_size) // step * step
    return max(warm, side)


def compute_bytes(p: Projector, side: int, flash_attn: bool) -> int:
    """clip.cpp's compute buffer on the backend running the encoder, for one square
    image of `side` pixels (see the module docstring)."""
    if p.patch_size <= 0 or side <= 0:
        return 0
    n = (side // p.patch_size) ** 2
    row = 4 * n * p.n_embd
    ffn = 4 * n * p.n_ff + _FFN_ROWS * row
    attn = _FA_ATTN_ROWS * row if flash_attn else 4 * n * n * p.n_head + _ATTN_ROWS * row
    return max(ffn, attn)


def input_bytes(side: int) -> int:
    """The f32 RGB input image: the host compute buffer when the encoder runs on a GPU
    (CPU 9.19 MiB beside CUDA0 for Gemma 3's 896 x 896, ggml-org/llama.cpp#22790)."""
    return 4 * 3 * side * side


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectorLoad:
    """What the projector takes on the device it runs on, and beside it on the host."""

    # cpu or gpu:N
    device: str
    weights_bytes: int
    compute_bytes: int
    # host memory when it runs on a GPU: the input image (0 on the CPU: in compute)
    host_bytes: int
    # the square image side its compute buffer is sized for, and whether that is
    # clip.cpp's own warm-up image
    image_size: int
    warmup: bool
    flash_attn: bool
    # its file and clip.projector_type, for the surfaces that name it
    file_name: str = ""
    projector_type: str = ""
    # False for an encoder without image patches (audio): its compute buffer is not
    # sized here, so compute_bytes (0) is unknown, not nothing
    compute_known: bool = True

    @property
    def device_bytes(self) -> int:
        return self.weights_bytes + self.compute_bytes


def projector_load(
    p: Projector, device: str, flash_attn: bool, image_size: int | None = None
) -> ProjectorLoad:
    """The projector's memory on `device` (cpu or gpu:N), its compute buffer sized for
    the warm-up image or the user's larger `image_size`."""
    side = encoded_side(p, image_size)
    on_cpu = device == "cpu"
    return ProjectorLoad(
        device=device,
        weights_bytes=p.weights_bytes,
        compute_bytes=compute_bytes(p, side, flash_attn),
        host_bytes=0 if on_cpu or p.patch_size <= 0 else input_bytes(side),
        image_size=side,
        warmup=side == (p.warmup_image_size or p.image_size),
        flash_attn=flash_attn,
        file_name=p.file_name,
        projector_type=p.projector_type,
        compute_known=p.patch_size > 0,
    )
