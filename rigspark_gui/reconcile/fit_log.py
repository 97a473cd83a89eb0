"""What llama.cpp's `--fit` printed: the lines of common/fit.cpp (`common_params_fit_impl`,
`common_fit_params`) and of the libllama builds before it (`llama_params_fit_impl`,
`llama_params_fit`), read into a FitLog.

Fit runs before the model loads, so its lines come first; llama-server may put a pid,
a timestamp and a level before each (`[34353] 0.00.633.443 I common_params_fit_impl: ...`)
and other lines (memory breakdowns, test allocations, load_tensors) sit between them;
anything that is not one of fit's lines is skipped. When a log holds more than one fit,
the last one is kept. Every figure is the MiB llama.cpp printed (floored by it).

Hostile input is bounded as in the load-log reader: over-long lines are skipped and the
patterns are anchored, with bounded repetition, so the time is linear in the input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rigspark_gui.core.fit import FitStatus
from rigspark_gui.reconcile.log_records import (
    MAX_LINE_CHARS,
    MAX_LOG_BYTES,
    MIB,
    FitLog,
    FitLogDevice,
    LogReadError,
)

__all__ = ["FitLogReader", "parse_fit_log"]

# fit's function names across versions; the lookbehind keeps 'xllama_params_fit' out
_FUNCTION = re.compile(
    r"(?<![A-Za-z0-9_])(llama_params_fit_impl|common_params_fit_impl|llama_params_fit"
    r"|common_params_fit|common_fit_params): "
)
_ANSI = re.compile(r"\x1b\[[0-9;]{0,16}[A-Za-z]")
_N = r"(-?\d{1,12})"
_PROJECTED = re.compile(
    r"projected to use (\d{1,12}) MiB of (device|host) memory vs\. "
    r"(?:(\d{1,12}) MiB of (?:free device|total host) memory|a total of (\d{1,12}) MiB)"
)
_LEAVE = re.compile(r"will leave " + _N + r" >= (\d{1,12}) MiB of (?:free device|system) memory")
_CANNOT_ONE = re.compile(
    r"cannot meet free memory target of (\d{1,12}) MiB, need to reduce device memory by "
    r"(\d{1,12}) MiB"
)
_CANNOT_ALL = re.compile(
    r"cannot (?:meet free memory targets|fulfill margin of (\d{1,12}) MiB) on all devices, "
    r"need to use (\d{1,12}) MiB less in total"
)
_REDUCED = re.compile(
    r"context size reduced from (\d{1,10}) to (\d{1,10}) -> need (\d{1,12}) MiB less memory"
)
_UNSET = re.compile(r"context size unset and KV cache not unified -> using (\d{1,10}) for")
_FULL = re.compile(r"user has requested full context size of (\d{1,10}) -> no change")
_DEFAULT = re.compile(r"default model context size is (\d{1,10}) which is <=")
_BY_USER = re.compile(r"context size set by user to (\d{1,10}) -> no change")
_DENSE = re.compile(
    r"with only dense weights in device memory there is (a total surplus|still a total "
    r"deficit) of (\d{1,12}) MiB"
)
_TOOK = re.compile(r"fitting params to free memory took (\d{1,9}(?:\.\d{1,9})?) seconds")
# '  - CUDA0 (NVIDIA GeForce RTX 3090)   : ...' (names padded to the longest)
_DEVICE = re.compile(r"\s{0,16}- ([A-Za-z0-9_.:\-]{1,64}) \((.{0,256})\)\s{0,256}: ")
_INITIAL = re.compile(
    r"\s{0,16}" + _N + r" total,\s{1,16}" + _N + r" used,\s{1,16}" + _N + r" (free|deficit)"
    r"(?: vs\. target of\s{1,16}" + _N + r")?"
)
_FINAL = re.compile(
    r"\s{0,16}(\d{1,5}) layers(?: \(\s{0,8}(\d{1,5}) overflowing\))?,\s{1,16}"
    + _N
    + r" MiB used,\s{1,16}"
    + _N
    + r" MiB free"
)
_FAILED = ("failed to fit params to free device memory: ", "while trying to fit params to ")


def _int(text: str | None) -> int | None:
    return int(text) if text is not None else None


@dataclass
class _Run:
    """Mutable state of one fit while its lines are read."""

    function: str
    first_line: int
    values: dict[str, Any] = field(default_factory=dict)
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_line: int = 0

    def device(self, name: str, description: str) -> dict[str, Any]:
        d = self.devices.get(name)
        if d is None:
            if len(self.devices) >= 64:
                return {}  # more devices than llama.cpp supports: not fit's lines
            d = self.devices[name] = {"name": name, "description": description}
        return d

    def result(self) -> FitLog:
        values = dict(self.values)
        status = values.get("status")
        if status is FitStatus.UNCHANGED and "context" not in values:
            values["context"] = values.get("initial_context")
        return FitLog(
            function=self.function,
            devices=tuple(FitLogDevice(**d) for d in self.devices.values()),
            first_line=self.first_line,
            last_line=self.last_line,
            **values,
        )


class FitLogReader:
    """Reads a log line by line (`line`), then gives the FitLog of its last fit or None
    (`result`)."""

    def __init__(self) -> None:
        self.runs: list[_Run] = []

    def line(self, n: int, raw: str) -> bool:
        """Read one line; True when it was one of fit's."""
        if len(raw) > MAX_LINE_CHARS or "_fit" not in raw:
            return False
        line = _ANSI.sub("", raw) if "\x1b" in raw else raw
        m = _FUNCTION.search(line)
        if m is None:
            return False
        rest = line[m.end() :].rstrip()
        run = self._run(n, m.group(1), rest)
        if not self._read(run, rest):
            return False
        run.last_line = n
        return True

    def result(self) -> FitLog | None:
        runs = [r for r in self.runs if r.values or r.devices]
        return runs[-1].result() if runs else None

    # --------------------------------------------------------------- runs

    def _run(self, n: int, function: str, rest: str) -> _Run:
        """The run this line belongs to: a new one at fit's first lines, at a second
        projection, or after the closing 'took S seconds' line."""
        current = self.runs[-1] if self.runs else None
        if current is not None:
            started = bool(current.values or current.devices)
            new = rest.startswith(("getting device memory data for initial", "projected memory"))
            new = new or (rest.startswith("projected to use") and "projected_mib" in current.values)
            new = new or "seconds" in current.values
            if not (new and started):
                if function.endswith("_impl"):
                    current.function = function
                return current
            if not started:
                self.runs.pop()
        current = _Run(function=function, first_line=n)
        self.runs.append(current)
        del self.runs[:-2]
        return current

    # --------------------------------------------------------------- lines

    def _read(self, run: _Run, rest: str) -> bool:
        v = run.values
        if rest.lstrip().startswith("- "):
            return self._device(run, rest)
        if (m := _PROJECTED.match(rest)) is not None:
            v["projected_mib"] = int(m.group(1))
            v["host_only"] = m.group(2) == "host"
            v["free_mib"] = int(m.group(3) or m.group(4))
        elif (m := _LEAVE.match(rest)) is not None:
            v["margin_mib"] = int(m.group(2))
            v["status"] = FitStatus.UNCHANGED
        elif rest.startswith("targets for free memory can be met on all devices"):
            v["status"] = FitStatus.UNCHANGED
        elif (m := _CANNOT_ONE.match(rest)) is not None:
            v["margin_mib"], v["shortfall_mib"] = int(m.group(1)), int(m.group(2))
        elif (m := _CANNOT_ALL.match(rest)) is not None:
            if m.group(1) is not None:
                v["margin_mib"] = int(m.group(1))
            v["shortfall_mib"] = int(m.group(2))
        elif (m := _REDUCED.match(rest)) is not None:
            v["initial_context"], v["context"] = int(m.group(1)), int(m.group(2))
            v["context_saving_mib"] = int(m.group(3))
        elif (m := _UNSET.match(rest)) is not None:
            v["initial_context"] = int(m.group(1))
        elif (m := _FULL.match(rest) or _DEFAULT.match(rest)) is not None:
            v["initial_context"] = v["context"] = int(m.group(1))
        elif (m := _BY_USER.match(rest)) is not None:
            v["initial_context"] = v["context"] = int(m.group(1))
            v["context_set_by_user"] = True
        elif (m := _DENSE.match(rest)) is not None:
            sign = 1 if m.group(1) == "a total surplus" else -1
            v["dense_surplus_mib"] = sign * int(m.group(2))
        elif rest.startswith("successfully fit params to free device memory"):
            v.setdefault("status", FitStatus.FITTED)
        elif (i := _failure_at(rest)) >= 0:
            v["status"] = FitStatus.FAILED
            v["reason"] = rest[i:].strip()[:300]
        elif (m := _TOOK.match(rest)) is not None:
            v["seconds"] = float(m.group(1))
        else:
            return rest.startswith(("entire model", "getting device memory data", "projected"))
        return True

    def _device(self, run: _Run, rest: str) -> bool:
        m = _DEVICE.match(rest)
        if m is None:
            return False
        tail = rest[m.end() :]
        if (f := _INITIAL.match(tail)) is not None:
            d = run.device(m.group(1), m.group(2).strip())
            free = int(f.group(3))
            d.update(
                total_mib=int(f.group(1)),
                projected_mib=int(f.group(2)),
                projected_free_mib=-free if f.group(4) == "deficit" else free,
                target_mib=_int(f.group(5)),
            )
            return bool(d)
        if (f := _FINAL.match(tail)) is not None:
            d = run.device(m.group(1), m.group(2).strip())
            d.update(
                layers=int(f.group(1)),
                overflowing=_int(f.group(2)),
                used_mib=int(f.group(3)),
                free_mib=int(f.group(4)),
            )
            return bool(d)
        return False


def _failure_at(rest: str) -> int:
    """Where the reason starts in a failure line ('failed to fit params to free device
    memory: <reason>', 'encountered an error while trying to fit params to free device
    memory: <reason>'), else -1."""
    for marker in _FAILED:
        i = rest.find(marker)
        if i >= 0:
            j = rest.find(": ", i + len(marker) - 2)
            return j + 2 if j >= 0 else len(rest)
    return -1


def parse_fit_log(data: str | bytes) -> FitLog | None:
    """The last `--fit` in a llama.cpp log, or None when the log holds none; LogReadError
    (one sentence) when the text is larger than RigSpark reads."""
    if len(data) > MAX_LOG_BYTES:
        raise LogReadError(
            f"the log is {len(data) / MIB:.0f} MiB; RigSpark reads logs up to "
            f"{MAX_LOG_BYTES // MIB} MiB (keep the part around the model load)"
        )
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    reader = FitLogReader()
    for n, line in enumerate(text.split("\n"), 1):
        reader.line(n, line.removesuffix("\r"))
    return reader.result()
