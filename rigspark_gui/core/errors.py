"""Errors a user can cause. Each carries a one-line message fit to show as is."""


class RigSparkError(ValueError):
    """Base of every user-facing error; the CLI prints `str(err)` and exits 2."""


class InvalidSettingsError(RigSparkError):
    """A plan setting is out of range or inconsistent (context, KV types, flash attention)."""


class InvalidModelError(RigSparkError):
    """A model's geometry or weights are unusable."""


class InvalidRigError(RigSparkError):
    """A rig description is malformed or inconsistent."""


class InvalidPlacementError(RigSparkError):
    """A placement edit names an unknown layer or device."""


class ModelImportError(RigSparkError):
    """A model file (GGUF, config.json) could not be read; the message says which and why."""


class CatalogError(RigSparkError):
    """A catalog or database entry is malformed; the message names the entry and field."""


class DetectionError(RigSparkError):
    """A hardware probe failed in a way the user should hear about."""


def validation_message(err: Exception) -> str:
    """One line from a record ValidationError: the first problem and where it is."""
    errors = getattr(err, "errors", None)
    if not callable(errors):
        return str(err)
    first = errors()[0]
    msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    loc = ".".join(str(p) for p in first.get("loc", ()))
    return f"{loc}: {msg}" if loc else msg
