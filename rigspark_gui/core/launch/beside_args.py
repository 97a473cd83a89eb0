"""llama-server's flags for what loads beside the model (common/arg.cpp, b11434): the
vision/audio projector (`--mmproj`, `--no-mmproj`, `--no-mmproj-offload`) and a draft
model for speculative decoding (`-md` or `-hfd`, `-ngld`, `-ctkd`, `-ctvd`, `-devd`), or
drafting with the model's own MTP blocks (`--spec-type draft-mtp`)."""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.core.errors import InvalidPlacementError, InvalidSettingsError
from rigspark_gui.core.launch.engine import default_model_file, hf_gguf
from rigspark_gui.core.launch.llama_layout import device_of_buffer
from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.settings import Backend, PlanSettings


def beside_args(spec: ModelSpec, s: PlanSettings, *, hf: bool) -> list[str]:
    """The flags; `hf`: the model is given with -hf, which downloads its own projector
    (docs/multimodal.md), so a catalog projector is not named; one chosen from a file
    or URL always is (`Projector.path`)."""
    out: list[str] = []
    p = spec.projector
    if p is not None:
        if s.text_only:
            out.append("--no-mmproj")
        else:
            if p.path:
                # a file someone chose: named as given, -hf or not (llama.cpp downloads
                # the repo's own only where no --mmproj / --mmproj-url is set, arg.cpp)
                out += ["--mmproj-url" if "://" in p.path else "--mmproj", p.path]
            elif not hf:
                out += ["--mmproj", p.file_name or "mmproj.gguf"]
            if not s.mmproj_offload:
                out.append("--no-mmproj-offload")
    if s.mtp_draft and s.backend is Backend.LLAMA_CPP:
        # the MTP blocks load with the model: no -md (common/arg.cpp, load_mtp)
        return [*out, "--spec-type", "draft-mtp"]
    d = spec.draft
    if d is not None and s.backend is not Backend.OLLAMA:
        repo = hf_gguf(d.spec, d.quant)
        out += (
            ["-hfd", repo.ref] if repo is not None else ["-md", default_model_file(d.spec, d.quant)]
        )
        if d.n_gpu_layers is not None:
            out += ["-ngld", str(d.n_gpu_layers)]
        if d.kv_k is not KvCacheType.F16:
            out += ["-ctkd", d.kv_k.value]
        if d.kv_v is not KvCacheType.F16:
            out += ["-ctvd", d.kv_v.value]
    return out


def draft_pinned(spec: ModelSpec, s: PlanSettings) -> tuple[int, ...]:
    """The rig GPUs a -devd draft is pinned to (none where it follows the target)."""
    d = spec.draft
    if d is None or d.devices is None or s.backend is not Backend.LLAMA_CPP or s.mtp_draft:
        return ()
    return d.devices


def draft_device_args(
    spec: ModelSpec,
    s: PlanSettings,
    shown: Sequence[int],
    prefix: str,
    target: Sequence[int] | None = None,
) -> list[str]:
    """`-devd` for a draft pinned to GPUs other than the target's: `shown` are the rig
    GPUs the command lets the backend see, in its order (CUDA0 is the first), `prefix`
    its buffer names' (CUDA, ROCm, Vulkan). Nothing where the draft follows the target
    (llama.cpp's default: the target's devices, common_base_params_to_speculative);
    `none` keeps it off every GPU. InvalidPlacementError when a pinned GPU is hidden
    from the command (another host's): llama.cpp refuses a device it cannot see
    (arg.cpp, parse_device_list). `target`: the GPUs a `-dev` gives the target (None:
    all shown), which is the list the draft inherits without `-devd`."""
    d = spec.draft
    if d is None or d.devices is None or s.backend is not Backend.LLAMA_CPP or s.mtp_draft:
        return []
    if not d.devices:
        return ["-devd", "none"]
    order = list(shown)
    hidden = [i for i in d.devices if i not in order]
    if hidden:
        raise InvalidPlacementError(
            f"the draft is pinned to GPU {', '.join(map(str, hidden))} (-devd), which this "
            "command cannot show llama.cpp: pin it to a GPU of this machine"
        )
    if list(d.devices) == list(order if target is None else target):
        return []  # the very list the draft inherits
    return ["-devd", ",".join(f"{prefix}{order.index(i)}" for i in d.devices)]


def parse_draft_devices(value: str, *, flag: str = "-devd") -> tuple[int, ...]:
    """`-devd` as llama.cpp reads it (arg.cpp, parse_device_list): `none`, or GPU names
    (CUDA1, Vulkan0 ...; here numbered as the rig lists its GPUs) -> rig GPU indices.
    InvalidSettingsError for an empty list, the CPU (llama.cpp: invalid device), a name
    that is no GPU buffer, or a GPU named twice."""
    names = [x.strip() for x in value.split(",")]
    if not value.strip() or not all(names):
        raise InvalidSettingsError(f"{flag}: no devices specified")
    if names == ["none"]:
        return ()
    out: list[int] = []
    for name in names:
        if name.upper() == "CPU" or name == "none":
            raise InvalidSettingsError(f"{flag}: invalid device: {name} (the CPU is not one)")
        try:
            device = device_of_buffer(name)
        except InvalidPlacementError:
            raise InvalidSettingsError(
                f"{flag}: invalid device: {name} (expected GPU names like CUDA0,CUDA1 or none)"
            ) from None
        index = int(device.split(":")[1])
        if index in out:
            raise InvalidSettingsError(f"{flag}: {name} is named twice")
        out.append(index)
    return tuple(out)


# llama.cpp's projector flags in a pasted command line (common/arg.cpp, b11434)
_MMPROJ_FILE = ("-mm", "--mmproj", "-mmu", "--mmproj-url")
_MMPROJ_SWITCHES = {
    "--no-mmproj": ("text_only", True),
    "--no-mmproj-auto": ("text_only", True),
    "--mmproj-auto": ("text_only", False),
    "--no-mmproj-offload": ("mmproj_offload", False),
    "--mmproj-offload": ("mmproj_offload", True),
}


def split_projector_flags(argv: list[str]) -> tuple[list[str], dict[str, object]]:
    """A pasted llama.cpp command line without its projector flags, and what they set:
    `mmproj` (a file or URL), `text_only` (`--no-mmproj`), `mmproj_offload`
    (`--no-mmproj-offload`), `image_max_tokens` (kept for the note only), and
    `mtp_draft` where `--spec-type` names draft-mtp (the flag itself is kept)."""
    out: list[str] = []
    found: dict[str, object] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        flag, eq, inline = a.partition("=") if a.startswith("--") else (a, "", "")
        if flag in _MMPROJ_FILE:
            if eq:
                found["mmproj"] = inline
            elif i + 1 < len(argv):
                found["mmproj"] = argv[i + 1]
                i += 1
        elif flag == "--spec-type":
            # kept for the command's own parser; MTP drafting is a plan setting
            types = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if "draft-mtp" in types.split(","):
                found["mtp_draft"] = True
            out.append(a)
        elif flag in _MMPROJ_SWITCHES:
            name, value = _MMPROJ_SWITCHES[flag]
            found[name] = value
        else:
            out.append(a)
        i += 1
    return out, found
