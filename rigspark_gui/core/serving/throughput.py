"""Decode throughput of a serving engine against concurrent users.

One decode step of a batch of b requests reads every weight once (MoE: the experts the
batch routes to) and each request's KV, and does 2 × active parameters × b FLOPs: the
step takes the longer of the two, so total tokens/s rise with b until compute-bound.
Tensor parallelism adds two all-reduces per layer over the GPUs' link; pipeline stages
each hold one micro-batch in turn, and stages on other hosts add the network hop.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from rigspark_gui.core.model import Geometry, KvCacheType
from rigspark_gui.core.rig import Gpu, Rig
from rigspark_gui.core.serving.budget import kv_bytes_per_token
from rigspark_gui.core.serving.checkpoint import FORMATS, RankWeights, tied_embedding_bytes
from rigspark_gui.core.serving.model import ConcurrencyPoint
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel, decode_depth, device_class

# All-reduce of a small message (decode: a few KiB per layer), per call: NCCL on 2x H100
# over NVLink measures ~6-12 us (NVIDIA/nccl#1259, sgl-project/sglang#2904); over PCIe
# ~36 us (16x RTX PRO 6000, plain NCCL). Link bandwidths are effective figures.
NVLINK_LATENCY_S = 10e-6
PCIE_LATENCY_S = 35e-6
NVLINK_BYTES_S = 150e9
PCIE_BYTES_S = {3: 12e9, 4: 24e9, 5: 48e9}
USERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def compute_at_least(gpu: Gpu, major: int, minor: int) -> bool:
    """Whether a GPU's CUDA compute capability ("8.9", "12.0") is at least major.minor."""
    try:
        have = tuple(int(x) for x in (gpu.compute_capability or "").split(".")[:2])
    except ValueError:
        return False
    return have >= (major, minor) if have else False


def users_to_chart(max_users: int) -> tuple[int, ...]:
    """1, 2, 4 … up to the pool's limit, which is always the last point."""
    top = max(max_users, 1)
    out = [u for u in USERS if u < top]
    return (*out, top)


def _link(gpus: Sequence[Gpu], rig: Rig) -> tuple[float, float]:
    """(latency per all-reduce, bytes/s) of the GPUs' link: the network when they are on
    several hosts, else NVLink or PCIe."""
    if len({g.host for g in gpus}) > 1:
        return rig.link.round_trip_s, rig.link.bytes_per_s
    if all(g.nvlink for g in gpus):
        return NVLINK_LATENCY_S, NVLINK_BYTES_S
    gen = min((g.pcie_generation or 4) for g in gpus)
    return PCIE_LATENCY_S, PCIE_BYTES_S.get(gen, PCIE_BYTES_S[4])


def _experts_read(g: Geometry, batch: int) -> float:
    """Share of a MoE layer's experts a batch routes to (expected distinct experts)."""
    if not g.n_expert:
        return 1.0
    p = g.n_expert_used / g.n_expert
    return 1.0 - (1.0 - p) ** batch


def concurrency_curve(
    g: Geometry,
    rig: Rig,
    s: PlanSettings,
    gpus: Sequence[Gpu],
    tp: int,
    pp: int,
    stages: tuple[int, ...],
    w: RankWeights,
    fmt: str,
    max_users: int,
    speed: SpeedModel | None,
    offload_bytes: int = 0,
    users_at: Sequence[int] | None = None,
) -> tuple[tuple[ConcurrencyPoint, ...], str]:
    """Per-user and total tokens/s at 1, 2, 4 … `max_users` concurrent requests (or at
    the counts `users_at` names)."""
    if speed is None or speed.decode is None or speed.prefill is None:
        return (), "unknown: no speed calibration loaded"
    slow = min(gpus, key=lambda x: x.bandwidth_gbps or 0)
    if slow.bandwidth_gbps is None:
        return (), f"unknown: {slow.name}'s memory bandwidth is not known"
    cls = device_class(slow)
    bw_eff = speed.decode.efficiency.get(cls)
    flop_eff = speed.prefill.efficiency.get(cls)
    if bw_eff is None or flop_eff is None:
        return (), f"unknown: no calibration for {slow.name}'s device class"
    bw = slow.bandwidth_gbps * 1e9 * bw_eff
    flops = (slow.fp16_tflops or 0) * 1e12 * flop_eff
    # 8-bit checkpoints run W8A8 kernels at twice the 16-bit rate on GPUs that have them
    if FORMATS[fmt].linear_bytes == 1 and compute_at_least(slow, 8, 9):
        flops *= 2
    lat, link_bw = _link(gpus[:tp], rig)
    decode_factor = FORMATS[fmt].decode_factor
    net = rig.link
    depth = decode_depth(s)
    kv_b = 1 if s.kv_k is KvCacheType.FP8 else 2
    pcie_bw = PCIE_BYTES_S.get(slow.pcie_generation or 4, PCIE_BYTES_S[4])
    hosts = [gpus[i * tp].host for i in range(pp)]
    points = []
    start = 0
    stage_info = []
    for n_layers in stages:
        layers = range(start, start + n_layers)
        start += n_layers
        dense = sum(w.layers[i] for i in layers)
        # the last stage also reads the LM head every step (a tied model's embedding)
        head = w.head + tied_embedding_bytes(g, tp) if start == g.n_layer else 0
        stage_info.append((n_layers, dense, head, kv_bytes_per_token(g, layers, tp, kv_b)))
    expert_share = (w.n_params - w.active_params) / w.n_params if g.n_expert and w.n_params else 0.0
    active_per_rank = w.active_params / tp
    for users in users_at if users_at is not None else users_to_chart(max_users):
        micro = max(users / pp, 1.0)
        stage_times = []
        for n_layers, dense, head, kv_per_token in stage_info:
            routed = 1 - expert_share + expert_share * _experts_read(g, int(micro))
            # a format whose kernels fall short of the roofline reads "slower"
            weights_read = (dense * routed + head) / decode_factor
            mem = (weights_read + micro * kv_per_token * depth) / bw
            cmp = 2 * active_per_rank * (n_layers / g.n_layer) * micro / flops if flops else 0.0
            t = max(mem, cmp)
            if tp > 1:
                msg = micro * g.n_embd * 2 * 2 * (tp - 1) / tp
                t += 2 * n_layers * (lat + msg / link_bw)
            stage_times.append((t, mem >= cmp))
        # stage to stage, and the sampled tokens back to the first stage's host
        crossings = sum(1 for a, b in itertools.pairwise([*hosts, hosts[0]]) if a != b)
        hops = crossings * (net.round_trip_s / 2 + micro * g.n_embd * 2 / net.bytes_per_s)
        if offload_bytes:
            stage_times = [(t + offload_bytes / pcie_bw, m) for t, m in stage_times]
        # a request's token passes every stage in turn; with a micro-batch in each stage
        # the slowest stage paces them all
        times = [t for t, _ in stage_times]
        cycle = max(sum(times) + hops, pp * max(times))
        bound = "memory" if all(m for _, m in stage_times) else "compute"
        points.append(
            ConcurrencyPoint(
                users=users,
                per_user_tok_s=round(1.0 / cycle, 2),
                total_tok_s=round(users / cycle, 1),
                limit=bound,
            )
        )
    basis = (
        f"estimate: {slow.name}'s bandwidth × {bw_eff:.2f} and FP16 FLOPS × {flop_eff:.2f} "
        "(llama.cpp's calibration for its device class); against 12 published vLLM runs "
        "it was not fitted to: −23 % to +23 %"
    )
    return tuple(points), basis
