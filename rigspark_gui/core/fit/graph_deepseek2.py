"""DeepSeek-V2's compute graph as llama.cpp b11434 builds it (src/models/deepseek2.cpp with
MLA and flash attention, llama-graph.cpp build_inp_embd / build_attn / build_moe_ffn /
build_ffn), for `alloc_replay`: every tensor ggml-alloc places, in graph order.

Covered: the MLA path (absorbed K, flash attention), a plain or low-rank Q, dense
leading layers, softmax routing without weight normalisation (DeepSeek-V2 and V2-Lite;
V2's weight scale of 16 adds a SCALE node that reuses its input in place, not checked
against llama.cpp), shared experts. `covers` says whether a model is such a graph.
Checked against llama.cpp's own buffer sizes over 96 placements of DeepSeek-V2-Lite
(pipeline parallelism among them) and 14 of a q-LoRA variant (docs/validation-fit.md)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from rigspark_gui.core.fit.alloc_replay import (
    F16,
    F32,
    FLAG_INPUT,
    FLAG_OUTPUT,
    I32,
    I64,
    Graph,
    Tensor,
)
from rigspark_gui.core.model import Geometry

# fit's -ot patterns name tensors by these; a weight's backend is its layer's unless one
# of them moves it
WeightHome = Callable[[str, int], int]


def covers(g: Geometry, flash_attn: bool, tensor_names: Iterable[str] | None) -> bool:
    """A DeepSeek-V2 graph this builder reproduces: MLA with flash attention and softmax
    routing. The routing is known from the file's tensors only: V3-style files (sigmoid
    routing, normalised and scaled weights) carry the router bias `exp_probs_b` and add
    nodes this builder leaves out; a catalog model (no tensor list) is not replayed."""
    if tensor_names is None or any("exp_probs_b" in n for n in tensor_names):
        return False
    return (
        g.architecture == "deepseek2"
        and flash_attn
        and g.is_mla
        and bool(g.rope_head_dim)
        and g.n_expert > 1
        and g.n_expert_used > 1
        and not g.indexer_head_size
        and not g.n_layer_nextn
    )


def build(
    g: Geometry,
    n_tokens: int,
    n_kv: int,
    layer_home: Sequence[int],
    head_home: int,
    weight_home: WeightHome,
    cpu: int,
    pin_norms: bool,
) -> Graph:
    """The graph for a batch of `n_tokens` over a cache of `n_kv` cells. `layer_home`:
    each layer's backend; `weight_home(name, default)`: a weight's backend after -ot;
    `pin_norms`: llama-context's callback pins each layer's norms to the layer's device
    (full offload, or fewer than 32 tokens)."""
    gr = Graph()
    t = n_tokens
    rope = g.rope_head_dim or 0
    nope = g.head_dim_k - rope
    lora = g.kv_lora_rank or 0
    n_head = g.n_head
    # llama.cpp takes these for the Lite, whose layers have a plain attn_q
    # (src/models/deepseek2.cpp, is_lite)
    lite = g.n_layer in (26, 27) or (g.n_layer == 48 and g.n_vocab == 128256)

    def w(name: str, home: int, *ne: int) -> Tensor:
        return gr.weight(name, weight_home(name, home), *ne)

    def inp(name: str, type_: int, *ne: int) -> Tensor:
        return gr.new(name, type_, *ne, flags=FLAG_INPUT, home=None)

    def norm(x: Tensor, wt: Tensor, name: str, il: int) -> Tensor:
        n = gr.op("RMS_NORM", f"norm-{il}" if il >= 0 else "norm", [x])
        if pin_norms and il >= 0:
            gr.pinned[id(n)] = layer_home[il]
        return gr.op("MUL", name, [n, wt])

    tok_embd = w("token_embd.weight", cpu, g.n_embd, g.n_vocab)
    embd = gr.get_rows(tok_embd, inp("inp_tokens", I32, t), "embd")
    node_1 = gr.get_rows(tok_embd, inp("inp_mixed_tokens", I32, t), "node_1")
    dup = gr.op("DUP", "node_2", [inp("inp_mixed_embd", F32, g.n_embd, t)])
    gr.expand(embd)
    gr.expand(inp("inp_embd", F32, g.n_embd, t))
    gr.expand(gr.set_rows(dup, node_1, inp("inp_mixed_slots", I64, t)))
    inp_pos = inp("inp_pos", I32, t)
    k_idxs = inp("attn_inp_k_idxs", I64, t)
    kq_mask = inp("attn_inp_kq_mask", F16, n_kv, t)
    out_ids = inp("out_ids", I32, t)
    n_ff_sh = g.n_ff_shared_expert or g.n_ff_expert * max(g.n_shared_expert, 1)

    cur = embd
    for il in range(g.n_layer):
        home = layer_home[il]
        p = f"blk.{il}."
        inp_sa = cur
        x = norm(cur, w(p + "attn_norm.weight", home, g.n_embd), f"attn_norm-{il}", il)
        if g.q_lora_rank and not lite:
            q = gr.mul_mat(w(p + "attn_q_a.weight", home, g.n_embd, g.q_lora_rank), x, f"q-{il}")
            q = norm(q, w(p + "attn_q_a_norm.weight", home, g.q_lora_rank), f"q-{il}", il)
            q = gr.mul_mat(
                w(p + "attn_q_b.weight", home, g.q_lora_rank, n_head * g.head_dim_k), q, f"q-{il}"
            )
        else:
            q = gr.mul_mat(
                w(p + "attn_q.weight", home, g.n_embd, n_head * g.head_dim_k), x, f"q-{il}"
            )
        q = gr.reshape(q, g.head_dim_k, n_head, t, name=f"q-{il}")
        kv_pe = gr.mul_mat(
            w(p + "attn_kv_a_mqa.weight", home, g.n_embd, lora + rope), x, f"kv_cmpr_pe-{il}"
        )
        row = 4 * (lora + rope)
        kv = gr.view(kv_pe, (lora, t), (4, row, row * t, row * t), f"kv_cmpr-{il}")
        k_pe = gr.view(kv_pe, (rope, 1, t), (4, row, row, row * t), f"k_pe-{il}")
        k_pe = gr.op("ROPE", f"k_pe-{il}", [k_pe, inp_pos])
        kv = norm(kv, w(p + "attn_kv_a_norm.weight", home, lora), f"kv_cmpr-{il}", il)
        q_nope = gr.view(q, (nope, n_head, t), (4, q.nb[1], q.nb[2], q.nb[3]), f"q_nope-{il}")
        q_pe = gr.view(q, (rope, n_head, t), (4, q.nb[1], q.nb[2], q.nb[3]), f"q_pe-{il}")
        q_pe = gr.op("ROPE", f"q_pe-{il}", [q_pe, inp_pos])
        q_nope = gr.permute(q_nope, 0, 2, 1, 3, name=f"q_nope_perm-{il}")
        q_abs = gr.mul_mat(
            w(p + "attn_k_b.weight", home, nope, lora, n_head), q_nope, f"q_nope_absorbed-{il}"
        )
        q_abs = gr.permute(q_abs, 0, 2, 1, 3, name=f"q_nope_absorbed_perm-{il}")
        q_cur = gr.concat(q_abs, q_pe, f"Qcur-{il}")
        v_cur = gr.reshape(kv, lora, 1, t, name=f"Vcur-{il}")
        k_cur = gr.concat(v_cur, k_pe, f"Kcur-{il}")
        gr.expand(q_cur)
        gr.expand(v_cur)
        gr.expand(k_cur)
        cache = gr.new(f"cache_k_l{il}", F16, lora + rope, n_kv, home=home)
        k_row = k_cur.nb[2]
        k_view = gr.view(k_cur, (lora + rope, t), (4, k_row, k_row * t, k_row * t))
        gr.expand(gr.set_rows(cache, k_view, k_idxs))
        qv = gr.view(q_cur, q_cur.ne, q_cur.nb)
        qv = gr.permute(qv, 0, 2, 1, 3)
        c_row = 2 * (lora + rope)
        kc = gr.view(cache, (lora + rope, 1, n_kv, 1), (2, c_row, c_row, c_row * n_kv))
        vc = gr.view(kc, (lora, 1, n_kv, 1), kc.nb)
        kc = gr.permute(kc, 0, 2, 1, 3)
        vc = gr.permute(vc, 0, 2, 1, 3)
        fa = gr.op(
            "FLASH_ATTN_EXT",
            f"fattn-{il}",
            [qv, kc, vc, kq_mask],
            (vc.ne[0], qv.ne[2], qv.ne[1], qv.ne[3]),
        )
        o = gr.permute(fa, 0, 2, 1, 3)
        o = gr.mul_mat(
            w(p + "attn_v_b.weight", home, lora, g.head_dim_v, n_head), o, f"fattn_mla-{il}"
        )
        o = gr.permute(o, 0, 2, 1, 3)
        o = gr.op("CONT", f"fattn_mla-{il} (cont)", [o])
        o = gr.reshape(o, o.ne[0] * o.ne[1], o.ne[2] * o.ne[3], name=f"kqv_out-{il}")
        o = gr.mul_mat(
            w(p + "attn_output.weight", home, n_head * g.head_dim_v, g.n_embd), o, f"attn_out-{il}"
        )
        if il == g.n_layer - 1:
            o = gr.get_rows(o, out_ids, f"attn_out_rows-{il}")
            inp_sa = gr.get_rows(inp_sa, out_ids, f"inp_sa_rows-{il}")
        ffn_inp = gr.op("ADD", f"ffn_inp-{il}", [o, inp_sa])
        x = norm(ffn_inp, w(p + "ffn_norm.weight", home, g.n_embd), f"ffn_norm-{il}", il)
        if not g.is_moe_layer(il):
            ffn = _ffn(gr, w, x, p, "", home, g.n_embd, g.n_ff, f"ffn_out-{il}", il)
        else:
            moe = _moe(gr, g, w, x, p, home, il)
            sh = _ffn(gr, w, x, p, "_shexp", home, g.n_embd, n_ff_sh, f"ffn_shexp-{il}", il)
            ffn = gr.op("ADD", f"ffn_out-{il}", [moe, sh])
        cur = gr.op("ADD", f"l_out-{il}", [ffn, ffn_inp])
    out_norm = w("output_norm.weight", head_home, g.n_embd)
    x = norm(cur, out_norm, "result_norm", -1)
    x.flags |= FLAG_OUTPUT
    logits = gr.mul_mat(w("output.weight", head_home, g.n_embd, g.n_vocab), x, "result_output")
    logits.flags |= FLAG_OUTPUT
    gr.expand(logits)
    return gr


def _ffn(
    gr: Graph,
    w: Callable[..., Tensor],
    x: Tensor,
    p: str,
    suffix: str,
    home: int,
    n_embd: int,
    n_ff: int,
    name: str,
    il: int,
) -> Tensor:
    """build_ffn with a SiLU-gated parallel FFN: gate, up, their swiglu, down."""
    up = gr.mul_mat(w(p + f"ffn_up{suffix}.weight", home, n_embd, n_ff), x, f"ffn_up-{il}")
    gate = gr.mul_mat(w(p + f"ffn_gate{suffix}.weight", home, n_embd, n_ff), x, f"ffn_gate-{il}")
    act = gr.op("GLU", f"ffn_swiglu-{il}", [gate, up])
    return gr.mul_mat(w(p + f"ffn_down{suffix}.weight", home, n_ff, n_embd), act, name)


def _moe(
    gr: Graph, g: Geometry, w: Callable[..., Tensor], x: Tensor, p: str, home: int, il: int
) -> Tensor:
    """build_moe_ffn with softmax routing: the router, the top-k experts' gate, up and
    down, their outputs weighted and summed view by view."""
    t, k = x.ne[1], g.n_expert_used
    logits = gr.mul_mat(
        w(p + "ffn_gate_inp.weight", home, g.n_embd, g.n_expert), x, f"ffn_moe_logits-{il}"
    )
    probs = gr.op("SOFT_MAX", f"ffn_moe_probs-{il}", [logits])
    order = gr.op("ARGSORT", f"ffn_moe_argsort-{il}", [probs], type_=I32)
    topk = gr.view(
        order, (k, t), (4, order.nb[1], order.nb[1] * t, order.nb[1] * t), f"ffn_moe_topk-{il}"
    )
    probs3 = gr.reshape(probs, 1, g.n_expert, t)
    weights = gr.get_rows(probs3, topk, f"ffn_moe_weights-{il}")
    gr.expand(weights)
    x3 = gr.reshape(x, g.n_embd, 1, t)
    ff = g.n_ff_expert
    up = gr.mul_mat_id(
        w(p + "ffn_up_exps.weight", home, g.n_embd, ff, g.n_expert), x3, topk, f"ffn_moe_up-{il}"
    )
    gate = gr.mul_mat_id(
        w(p + "ffn_gate_exps.weight", home, g.n_embd, ff, g.n_expert),
        x3,
        topk,
        f"ffn_moe_gate-{il}",
    )
    act = gr.op("GLU", f"ffn_moe_swiglu-{il}", [gate, up])
    down = gr.mul_mat_id(
        w(p + "ffn_down_exps.weight", home, ff, g.n_embd, g.n_expert),
        act,
        topk,
        f"ffn_moe_down-{il}",
    )
    experts = gr.op("MUL", f"ffn_moe_weighted-{il}", [down, weights])
    gr.expand(experts)
    views = [
        gr.view(experts, (g.n_embd, t), (4, experts.nb[2], experts.nb[2] * t, experts.nb[2] * t))
        for _ in range(k)
    ]
    for v in views:
        gr.expand(v)
    out = views[0]
    for i, v in enumerate(views[1:], 1):
        out = gr.op("ADD", f"ffn_moe_out-{il}" if i == k - 1 else f"moe_sum-{il}", [out, v])
    gr.expand(out)
    return out


def weight_homes(rules: Sequence[tuple[str, int]]) -> WeightHome:
    """A weight's backend under -ot rules (pattern, backend), the first that matches
    (llama-model.cpp reads tensor_buft_overrides in order, std::regex_search)."""
    compiled = [(re.compile(pat), b) for pat, b in rules]

    def home(name: str, default: int) -> int:
        for rx, b in compiled:
            if rx.search(name):
                return b
        return default

    return home
