"""Display helpers: bytes stay integers everywhere else and become GiB only here."""

from __future__ import annotations

GIB = 1 << 30
MIB = 1 << 20


def gib(n_bytes: float, digits: int = 1) -> str:
    return f"{n_bytes / GIB:.{digits}f} GiB"


def human_bytes(n_bytes: float) -> str:
    if abs(n_bytes) >= GIB:
        return f"{n_bytes / GIB:.2f} GiB"
    if abs(n_bytes) >= MIB:
        return f"{n_bytes / MIB:.1f} MiB"
    if abs(n_bytes) >= 1024:
        return f"{n_bytes / 1024:.1f} KiB"
    return f"{int(n_bytes)} B"


def tokens(n: int) -> str:
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}K"
    return str(n)


def speed_text(point: float | None, low: float | None = None, high: float | None = None) -> str:
    """A decode estimate as people read it: the point, then its calibrated band."""
    if point is None:
        return "unknown"
    digits = 0 if point >= 10 else 1
    text = f"{point:.{digits}f} tok/s"
    if low is not None and high is not None:
        text += f" ({low:.{digits}f}–{high:.{digits}f})"
    return text


def seconds_text(point: float | None, low: float | None = None, high: float | None = None) -> str:
    """A prefill estimate: the point in seconds, then its band."""
    if point is None:
        return "unknown"

    def fmt(v: float) -> str:
        return f"{v:.2f}" if v < 1 else f"{v:.1f}" if v < 10 else f"{v:.0f}"

    text = f"{fmt(point)} s"
    if low is not None and high is not None:
        text += f" ({fmt(low)}–{fmt(high)})"
    return text


def parse_token_count(text: str) -> int | None:
    """A token count as people type it: 32768, 32k, 128K, 1M (k = 1024, M = 1024 k),
    spaces and a trailing "tokens" ignored. None when it is not one."""
    value = text.strip().lower().removesuffix("tokens").strip().replace(" ", "").replace(",", "")
    mult = 1
    if value.endswith("k"):
        value, mult = value[:-1], 1024
    elif value.endswith("m"):
        value, mult = value[:-1], 1024 * 1024
    try:
        n = float(value) * mult if mult > 1 else int(value)
    except ValueError:
        return None
    if n != int(n) or n < 0:
        return None
    return int(n)


def param_text(n: float) -> str:
    """A parameter count as people write it: 70.6B, 350M, 4.2M, 12K. Rounded first, then
    named in the unit the rounded figure belongs to: 999.6M is 1.0B (not "1000M"), 9.96M
    is 10M (not "10.0M")."""
    if n >= 999.5e6:
        return f"{n / 1e9:.1f}B"
    if n >= 9.95e6:
        return f"{n / 1e6:.0f}M"
    if n >= 999.5e3:
        return f"{n / 1e6:.1f}M"
    if n >= 999.5:
        return f"{n / 1e3:.0f}K"
    return f"{n:.0f}"
