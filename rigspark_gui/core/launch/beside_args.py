"""llama-server's flags for what loads beside the model (common/arg.cpp, b11434): the
vision/audio projector (`--mmproj`, `--no-mmproj`, `--no-mmproj-offload`) and a draft
model for speculative decoding (`-md` or `-hfd`, `-ngld`, `-ctkd`, `-ctvd`), or drafting
with the model's own MTP blocks (`--spec-type draft-mtp`)."""

from __future__ import annotations

from rigspark_gui.core.launch.engine import default_model_file, hf_gguf
from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.settings import Backend, PlanSettings


def beside_args(spec: ModelSpec, s: PlanSettings, *, hf: bool) -> list[str]:
    """The flags; `hf`: the model is given with -hf, which downloads its projector by
    itself (docs/multimodal.md), so only --no-mmproj is said."""
    out: list[str] = []
    p = spec.projector
    if p is not None:
        if s.text_only:
            out.append("--no-mmproj")
        else:
            if not hf:
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
