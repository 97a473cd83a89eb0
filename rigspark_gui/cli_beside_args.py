"""The flags for what loads beside the model, as llama.cpp spells them: a vision/audio
projector (`--mmproj FILE|URL`, `--text-only` / `--no-mmproj`, `--no-mmproj-offload`, the
image size its compute buffer is sized for) and a draft model for speculative decoding
(`--model-draft` / `-md`, `-ngld`, `-ctkd`, `-ctvd`, `--device-draft` / `-devd`) or the
model's own MTP blocks (`--spec-type draft-mtp`)."""

from __future__ import annotations

import argparse


def _pixels(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= n <= 65536:
        raise argparse.ArgumentTypeError(f"must be 1 to 65536 pixels, got {n}")
    return n


def add_draft_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model-draft",
        "-md",
        metavar="NAME|FILE",
        help="a draft model for speculative decoding loaded beside it, as llama.cpp's -md: "
        "a catalog model or a GGUF file (default: none)",
    )
    p.add_argument(
        "--draft-quant",
        metavar="TYPE",
        help="the catalog draft's quantization (default: Q8_0 where it has one)",
    )
    p.add_argument(
        "--gpu-layers-draft",
        "-ngld",
        metavar="N",
        help="the draft's layers on the GPUs, llama.cpp -ngld: a number, auto or all "
        "(default: auto, every layer)",
    )
    p.add_argument(
        "--device-draft",
        "-devd",
        metavar="DEV1,DEV2|none",
        help="the GPUs the draft loads on, as llama.cpp's -devd: buffer names numbered as "
        "the rig lists its GPUs (CUDA1, Vulkan0,Vulkan1), or none to keep it on the CPU; "
        "with several, the target's --tensor-split applies to them in order (default: the "
        "target's GPUs)",
    )
    p.add_argument(
        "--spec-type",
        choices=("draft-simple", "draft-mtp"),
        metavar="TYPE",
        help="speculative decoding as llama.cpp's --spec-type: draft-mtp drafts with the "
        "model's own MTP / NextN blocks, where its GGUF has them (GLM-4.5/4.7, GLM-5, "
        "DeepSeek V3.2, Nemotron 3 Super, Qwen3.5/3.6 files converted with them), loading "
        "them with a draft context of their own; draft-simple (llama.cpp's default with "
        "-md) with the --model-draft model (default: none)",
    )
    p.add_argument(
        "--cache-type-k-draft", "-ctkd", metavar="TYPE", help="draft K cache type (default: f16)"
    )
    p.add_argument(
        "--cache-type-v-draft", "-ctvd", metavar="TYPE", help="draft V cache type (default: f16)"
    )


def add_projector_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mmproj",
        metavar="FILE|URL",
        help="a vision/audio projector (mmproj GGUF) loaded beside the model, as llama.cpp's "
        "--mmproj: only its header is read (default: the catalog's, where it lists one)",
    )
    p.add_argument(
        "--text-only",
        "--no-mmproj",
        dest="text_only",
        action="store_true",
        help="leave the projector out (llama.cpp --no-mmproj): no images, no projector memory "
        "(default: off, a vision model loads its projector)",
    )
    p.add_argument(
        "--no-mmproj-offload",
        dest="mmproj_offload",
        action="store_false",
        default=True,
        help="keep the projector on the CPU, llama.cpp --no-mmproj-offload (default: GPU 0)",
    )
    p.add_argument(
        "--image-size",
        metavar="PX",
        type=_pixels,
        default=None,
        help="largest image side to size the projector's compute buffer for (default: the "
        "warm-up image llama.cpp reserves; fixed-size projectors resize every image)",
    )
