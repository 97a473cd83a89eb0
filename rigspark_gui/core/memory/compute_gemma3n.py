"""Gemma 3n's compute buffer (`gemma3n`): the per-layer inputs' projection phase, read off
llama.cpp b11434's graph (src/models/gemma3n.cpp) and checked on
validation/arch_b11434.json (CPU).

Before its first layer the graph looks up the per-layer token embeddings
(build_inp_per_layer: get_rows of per_layer_tok_embd, then scaled into
inp_per_layer_selected) and projects the hidden state onto them
(project_per_layer_inputs: per_layer_model_proj's matmul, its RMS norm, then the sum
with the selected rows). Each of these is f32, n_embd_per_layer x n_layer per token;
three are alive at once (the selected rows, the projection and its norm). On the CPU
the get_rows output, freed by the scale, leaves a hole of the same size below them that
the first layer's smaller tensors (AltUp's predictions, LAuReL) take before the
projection is placed, so the projection and its norm go above it: four such tensors sit
on the graph inputs. On a GPU the lookup runs beside the host-resident table (the CPU)
and the selected rows arrive as a copy, so three sit on the device's inputs (not
measured). On small-vocabulary models this phase is the peak; on the published ones the
logits (262,144 entries per token) are larger.
"""

from __future__ import annotations

from rigspark_gui.core.model import Geometry

GEMMA3N_ARCHS = frozenset({"gemma3n"})
_F32 = 4


def per_layer_rows_bytes(g: Geometry, n_tokens: int) -> int:
    """One f32 tensor of per-layer inputs: n_embd_per_layer x n_layer per token."""
    return _F32 * g.n_embd_per_layer * g.n_layer * n_tokens


def gemma3n_projection_bytes(g: Geometry, n_tokens: int, inputs: int, cpu: bool) -> int:
    """The projection phase's peak over `inputs`, the graph inputs allocated below it
    (on the CPU: the backend's whole prefix, see compute_buffer._cpu_prefix_bytes)."""
    return inputs + (4 if cpu else 3) * per_layer_rows_bytes(g, n_tokens)
