"""The projector flags of a llama.cpp command line pasted into the Layers tab, applied to
the plan as llama-server would take them: `--no-mmproj` plans text only (the controls'
Text only box follows), `--no-mmproj-offload` keeps the projector on the CPU, and
`--mmproj FILE` loads that file beside the model (its header read, bounded, like a
model's)."""

from __future__ import annotations

from collections.abc import Mapping

from rigspark_gui.catalog.mmproj import load_projector
from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.model import Projector
from rigspark_gui.ui.session import PlannerSession
from rigspark_gui.user_dirs import cache_dir


def apply_pasted_projector(session: PlannerSession, found: Mapping[str, object]) -> str:
    """Apply what `split_projector_flags` found; a one-line message to show ('' when
    there is nothing to say). A projector that cannot be read leaves the plan as it was."""
    spec = session.spec
    if spec is None or not found:
        return ""
    changes = {k: bool(found[k]) for k in ("text_only", "mmproj_offload") if k in found}
    given = found.get("mmproj")
    said = ""
    if isinstance(given, str) and given and not found.get("text_only"):
        changes.setdefault("text_only", False)  # llama-server loads the file it is given
        current = spec.projector
        if current is None or given.replace("\\", "/").rsplit("/", 1)[-1] != current.file_name:
            if given.startswith(("http://", "https://")):
                return (
                    f"The pasted --mmproj is a URL ({given[:60]}): the window reads local "
                    "files only; give it to `rigspark plan --mmproj URL`, or download it"
                )
            projector, why = read_projector_file(given)
            if projector is None:
                return f"The pasted --mmproj cannot be read: {why}"
            refused = session.set_projector(projector)
            if refused:
                return f"The pasted --mmproj cannot be used: {refused}"
            said = f"Planned with the pasted projector {projector.file_name}."
    if changes:
        session.update_settings(**changes)
    if found.get("text_only"):
        said = "Text only, as the pasted --no-mmproj says: the projector is left out."
    return said


def read_projector_file(path: str) -> tuple[Projector | None, str]:
    """A local mmproj GGUF read with the bounded header reader (`load_projector`, as
    `--mmproj FILE`), or None and why not in one line: a damaged, hostile or foreign
    file is a message, never an exception."""
    try:
        return load_projector(path, cache_dir()), ""
    except (RigSparkError, OSError, ValueError, OverflowError, MemoryError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        return None, first
