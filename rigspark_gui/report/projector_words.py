"""The projector and the draft model of a plan in words, the same sentence for the text table, the
Markdown/HTML report and the window."""

from __future__ import annotations

from rigspark_gui.core.memory import ProjectorLoad
from rigspark_gui.core.plan import DraftLoad
from rigspark_gui.core.units import human_bytes


def projector_sentence(load: ProjectorLoad | None) -> str:
    """One line: where the projector runs and what it takes there ('' without one)."""
    if load is None:
        return ""
    name = f"{load.file_name} " if load.file_name else ""
    image = f"{load.image_size} x {load.image_size}"
    image = f"the {image} warm-up image" if load.warmup else f"a {image} image"
    fa = "flash attention" if load.flash_attn else "no flash attention"
    host = f", {human_bytes(load.host_bytes)} of input image on the CPU" if load.host_bytes else ""
    where = "the CPU (--no-mmproj-offload)" if load.device == "cpu" else load.device
    return (
        f"Projector {name}on {where}: weights {human_bytes(load.weights_bytes)} + compute "
        f"{human_bytes(load.compute_bytes)} at {image} ({fa}){host}; --text-only frees it"
    )


def draft_sentence(draft: DraftLoad | None) -> str:
    """One line: the draft model, where it loads and the basis of its speed."""
    if draft is None:
        return ""
    where = ", ".join(f"{d} {human_bytes(b)}" for d, b in draft.bytes_on)
    if draft.mtp:
        return (
            f"MTP drafting (--spec-type draft-mtp) with {draft.model_name} (KV "
            f"{draft.kv_k}/{draft.kv_v} at {draft.context:,} tokens): weights "
            f"{human_bytes(draft.weights_bytes)}, KV {human_bytes(draft.kv_bytes)}, compute "
            f"{human_bytes(draft.compute_bytes)}, the target's rollback state "
            f"{human_bytes(draft.state_bytes)} ({where}); speed gain: {draft.speed_basis}"
        )
    return (
        f"Draft {draft.model_name} {draft.quant} (-ngld {draft.n_gpu_layers}, KV "
        f"{draft.kv_k}/{draft.kv_v} at {draft.context:,} tokens): weights "
        f"{human_bytes(draft.weights_bytes)}, KV {human_bytes(draft.kv_bytes)}, compute "
        f"{human_bytes(draft.compute_bytes)} ({where}); speed gain: {draft.speed_basis}"
    )
