"""A draft model in a plan (speculative decoding, llama.cpp's `-md`): its weights, KV
cache and compute buffers on the devices it loads on, set aside before the target's
layers are placed, and the speed basis of speculative decoding.

llama-server (b11434) builds the draft's context from the target's
(common/speculative.cpp `common_base_params_to_speculative`): the same context, slots,
batch and flash attention; its own `-ngld` (default auto: every layer offloaded, llama.cpp's
own -ngl rule over the same GPUs), `-devd` and `-ctkd/-ctvd` (default f16). Fit counts
it with the target (`common_fit_extra_model`, #23485). It refuses a draft whose
vocabulary differs from the target's (`common_speculative_are_compatible`: vocabulary
sizes more than 128 apart, or other token texts, BOS or EOS).

Speed: a draft only speeds decoding by the tokens it gets accepted per target step,
which depends on the pair and the text. Without a cited figure for the pair the plan
keeps the plain decode speed and says the gain is unknown; it never assumes one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rigspark_gui.core.errors import InvalidModelError, InvalidPlacementError
from rigspark_gui.core.launch import launch_split
from rigspark_gui.core.memory import WeightsLayout, output_buffer_bytes, weights_layout
from rigspark_gui.core.model import VOCAB_MAX_SIZE_DIFFERENCE, DraftModel, Geometry, ModelSpec
from rigspark_gui.core.placement import (
    DeviceId,
    DeviceLoad,
    Placement,
    as_device,
    auto_place,
    device_loads,
    split_memory,
)
from rigspark_gui.core.plan.mtp import mtp_layers, mtp_loads
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import Backend, PlanSettings

CPU = "cpu"


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftLoad:
    """What a draft model takes on each device, and what is known of its speed."""

    model_id: str
    model_name: str
    quant: str
    # -ngld as llama.cpp runs it (every layer and the head: n_layer + 1)
    n_gpu_layers: int
    kv_k: str
    kv_v: str
    context: int
    # (device, bytes): weights + KV + compute buffers of the draft there
    bytes_on: tuple[tuple[str, int], ...]
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    # the target's extra recurrent state rows while drafting (MTP: n_rs_seq = n_max)
    state_bytes: int = 0
    # the model's own MTP blocks draft (`--spec-type draft-mtp`), not another model
    mtp: bool = False
    # accepted draft tokens per target step, cited (None: unknown, the plan's speed is
    # plain decoding)
    accepted_per_step: float | None
    speed_basis: str

    @property
    def total_bytes(self) -> int:
        return sum(b for _, b in self.bytes_on)

    def on(self) -> dict[str, int]:
        return dict(self.bytes_on)


def check_draft(spec: ModelSpec, draft: DraftModel) -> None:
    """llama.cpp's refusal of an incompatible pair, as one line (InvalidModelError)."""
    a, b = spec.geometry.n_vocab, draft.spec.geometry.n_vocab
    if abs(a - b) > VOCAB_MAX_SIZE_DIFFERENCE:
        raise InvalidModelError(
            f"the draft {draft.spec.name} has a vocabulary of {b:,} tokens and "
            f"{spec.name} one of {a:,}: llama.cpp refuses a draft whose vocabulary differs "
            f"by more than {VOCAB_MAX_SIZE_DIFFERENCE} tokens (common/speculative.cpp)"
        )
    if draft.quant not in draft.spec.available_quants:
        raise InvalidModelError(
            f"the draft {draft.spec.name} has no {draft.quant} here "
            f"({', '.join(draft.spec.available_quants[:8])} ...)"
        )


def draft_loads(
    placement: Placement, g: Geometry, layout: WeightsLayout, rig: Rig, sd: PlanSettings
) -> tuple[DeviceLoad, ...]:
    """The draft context's loads. Its logits are reserved for `n_outputs_max` =
    n_parallel rows, not a whole ubatch (common_base_params_to_speculative), so its
    compute buffers are tallied with the vocabulary scaled to that many rows of the
    graph's tokens; the host's output buffer keeps the real vocabulary."""
    loads = device_loads(placement, g, layout, rig, sd)
    tokens = min(sd.context, sd.n_ubatch)
    rows = min(sd.parallel, tokens)
    if rows >= tokens:
        return loads
    scaled = replace(g, n_vocab=max(-(-g.n_vocab * rows // tokens), 1))
    fewer = device_loads(placement, scaled, layout, rig, sd)
    lost = output_buffer_bytes(g, sd) - output_buffer_bytes(scaled, sd)
    out = []
    for x, y in zip(loads, fewer, strict=True):
        compute = y.compute_bytes + (lost if x.device == CPU else 0)
        out.append(
            replace(x, compute_bytes=compute, total_bytes=x.total_bytes - x.compute_bytes + compute)
        )
    return tuple(out)


def plan_draft(
    spec: ModelSpec, rig: Rig, s: PlanSettings, target: Placement | None = None
) -> DraftLoad | None:
    """The draft model's memory per device under the plan's settings (None: no draft,
    or an engine that does not take `-md`). The draft takes the target command's GPUs
    and --tensor-split (`launch_split` of the `target` placement); without a target,
    every local GPU at the default split, as a plan's first guess."""
    if s.mtp_draft and s.backend is Backend.LLAMA_CPP:
        return plan_mtp(spec, rig, s, target)
    draft = spec.draft
    if draft is None or s.backend is not Backend.LLAMA_CPP:
        # only llama-server's command carries -md: Ollama starts it without one, and the
        # koboldcpp and LM Studio recipes have no draft flag here
        return None
    check_draft(spec, draft)
    g = draft.spec.geometry
    sd = replace(s, kv_k=draft.kv_k, kv_v=draft.kv_v, quant=draft.quant)
    ngl = g.n_layer + 1 if draft.n_gpu_layers is None else min(draft.n_gpu_layers, g.n_layer + 1)
    local, split = draft_gpus(draft, rig, target)
    if split is None and len(local) > 1 and target is not None:
        split = free_split(spec, rig, s, target, local)
    placement = auto_place(g, rig, sd, ngl=ngl if local else 0, tensor_split=split, gpu_ids=local)
    layout = weights_layout(draft.spec, draft.quant)
    loads = draft_loads(placement, g, layout, rig, sd)
    bytes_on = tuple(
        (x.device, x.required_bytes)
        for x in loads
        if x.required_bytes and (x.units or x.device == CPU)
    )
    basis = speed_basis(draft.accepted_per_step, draft.acceptance_source, "this pair")
    return DraftLoad(
        model_id=draft.spec.id,
        model_name=draft.spec.name,
        quant=draft.quant,
        n_gpu_layers=ngl if local else 0,
        kv_k=draft.kv_k.value,
        kv_v=draft.kv_v.value,
        context=s.context,
        bytes_on=bytes_on,
        weights_bytes=sum(x.weights_bytes for x in loads),
        kv_bytes=sum(x.kv_bytes + x.state_bytes for x in loads),
        compute_bytes=sum(x.compute_bytes for x in loads),
        accepted_per_step=draft.accepted_per_step,
        speed_basis=basis,
    )


def draft_gpus(
    draft: DraftModel, rig: Rig, target: Placement | None
) -> tuple[list[DeviceId], tuple[int, ...] | None]:
    """The devices the draft loads on (rig GPU numbers; an `rpc-cpu:` device where the
    target's RPC command gives it another host's CPU) and its --tensor-split over them.
    Without -devd, the target command's (`launch_split`, RPC devices first). -devd
    replaces the devices, not the split: llama.cpp reads the target's --tensor-split by
    position over the draft's list, and one device takes the whole draft in layer mode
    (common_base_params_to_speculative; llama-model.cpp, load_tensors: an all-zero split
    falls back to free memory)."""
    local: list[DeviceId] = list(rig.local_gpus)
    split: tuple[int, ...] | None = None
    if target is not None:
        local, split = launch_split(target, rig)
    if draft.devices is None:
        return local, split
    for i in draft.devices:
        if i not in rig.local_gpus:
            raise InvalidPlacementError(f"-devd: there is no GPU {i} in this machine")
    pinned: list[DeviceId] = list(draft.devices)
    if split is None or len(pinned) < 2:
        return pinned, None
    by_position = tuple(split[j] if j < len(split) else 0 for j in range(len(pinned)))
    return pinned, by_position if any(by_position) else None


def free_split(
    spec: ModelSpec, rig: Rig, s: PlanSettings, target: Placement, devices: list[DeviceId]
) -> tuple[int, ...] | None:
    """llama.cpp's default split for a draft over several devices: the free memory of
    each as the draft loads, after the target's weights, KV and compute buffers are
    allocated (llama-model.cpp load_tensors reads ggml_backend_dev_memory then; the
    target's model and context exist first, common_init_from_params). None where the
    target's quantization is open (its loads unknown): the devices' whole memory."""
    if s.quant is None:
        return None
    loads = device_loads(target, spec.geometry, weights_layout(spec, s.quant), rig, s)
    on = {x.device: x.required_bytes for x in loads}
    return tuple(max(split_memory(rig, as_device(i)) - on.get(as_device(i), 0), 1) for i in devices)


def speed_basis(accepted: float | None, source: str, what: str) -> str:
    """The speed basis in words: a cited acceptance rate, or an unknown gain."""
    if accepted is not None:
        return f"{accepted:g} draft tokens accepted per target step ({source})"
    return (
        f"unknown: no published acceptance rate for {what} here; the speed shown is "
        "plain decoding (the gain depends on the model and the text)"
    )


def plan_mtp(
    spec: ModelSpec, rig: Rig, s: PlanSettings, target: Placement | None = None
) -> DraftLoad:
    """MTP drafting (`--spec-type draft-mtp`, core/plan/mtp.py): the MTP blocks' weights,
    their draft context's KV and compute, and the target's extra recurrent state rows,
    on the devices the target's placement gives those layers."""
    on, weights, kv, compute, state = mtp_loads(spec, rig, s, target)
    g = spec.geometry
    on_gpu = 0
    if target is not None:
        on_gpu = sum(1 for il in mtp_layers(g) if target.unit(f"blk.{il}").device != CPU)
    elif rig.local_gpus:
        on_gpu = g.n_layer_nextn
    return DraftLoad(
        model_id=spec.id,
        model_name=f"the MTP blocks of {spec.name}",
        quant=s.quant or "",
        n_gpu_layers=on_gpu,
        kv_k="f16",
        kv_v="f16",
        context=s.context,
        bytes_on=tuple((d, n) for d, n in sorted(on.items()) if n),
        weights_bytes=weights,
        kv_bytes=kv,
        compute_bytes=compute,
        state_bytes=state,
        mtp=True,
        accepted_per_step=None,
        speed_basis=speed_basis(None, "", f"MTP drafting with {spec.name}"),
    )
