"""The expert tensors a MoE block holds, as llama.cpp's loader names and shapes them
(`ffn_*_exps` for the routed experts, `ffn_*_shexp` for the shared one), for the
architecture modules that list a block's tensors in llama.cpp's order: gate, down, up."""

from __future__ import annotations

Tensors = list[tuple[str, tuple[int, ...]]]


def routed_experts(p: str, e: int, f: int, n: int) -> Tensors:
    """`n` experts of width `f` over an embedding of `e`, for the block prefix `p`."""
    return [
        (p + "ffn_gate_exps.weight", (e, f, n)),
        (p + "ffn_down_exps.weight", (f, e, n)),
        (p + "ffn_up_exps.weight", (e, f, n)),
    ]


def shared_expert(p: str, e: int, fs: int) -> Tensors:
    """The shared expert of width `fs`."""
    return [
        (p + "ffn_gate_shexp.weight", (e, fs)),
        (p + "ffn_down_shexp.weight", (fs, e)),
        (p + "ffn_up_shexp.weight", (e, fs)),
    ]
