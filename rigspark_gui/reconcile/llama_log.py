"""What a llama.cpp log says about one model load: settings, devices and every buffer.

Reads the load log llama-server, llama-cli and llama-cpp-python write to stderr (also
inside Ollama's server log, where each line may carry a journald or timestamp prefix)
and llama-bench's results (markdown table, `-o json` / `-o jsonl`, `-o csv`). Lines it
does not understand are skipped, so format drift across llama.cpp versions loses
detail rather than failing: `llm_load_tensors:` became `load_tensors:`,
`llama_kv_cache_init:` became `llama_kv_cache_unified:` then `llama_kv_cache:`, and
`llama_new_context_with_model:` became `llama_init_from_model:` then `llama_context:`.

Hostile input is bounded: the text is capped (MAX_LOG_BYTES), over-long lines are
skipped, and lines are taken apart with `str.find` / `split` and anchored patterns
without nested repetition, so the time is linear in the input.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from rigspark_gui.core.errors import RigSparkError

MIB = 1 << 20
MAX_LOG_BYTES = 64 * MIB
# llama.cpp's buffer and settings lines are short; a longer line is something else (a
# chat template, a metadata dump) and is skipped whole rather than scanned.
MAX_LINE_CHARS = 16384
# A file is binary when its head holds a NUL byte (a GGUF, an archive, an image).
_BINARY_PROBE = 65536


class LogReadError(RigSparkError):
    """A log could not be read or holds nothing RigSpark can compare."""


class BufferKind(StrEnum):
    """What a buffer holds, in llama.cpp's words (`model buffer`, `KV buffer` ...)."""

    MODEL = "model"
    REPACK = "repack"  # CPU_REPACK / CPU_AARCH64 / AMX: weights copied into another layout
    KV = "kv"
    COMPUTE = "compute"
    OUTPUT = "output"
    OTHER = "other"


class FlashAttn(StrEnum):
    ON = "on"
    OFF = "off"
    AUTO = "auto"


@dataclass(frozen=True, slots=True, kw_only=True)
class LogBuffer:
    """One `<name> <kind> buffer size = <x> MiB` line."""

    # llama.cpp's buffer name: CUDA0, CPU_Mapped, CUDA_Host ...
    name: str
    kind: BufferKind
    # cpu or gpu:N; None for a backend RigSpark lacks
    device: str | None
    # the MiB figure as printed (two decimals)
    mib: float
    # round(mib * 2^20)
    bytes: int
    # the llama.cpp function that printed it
    origin: str
    # 1-based line number in the log
    line: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDevice:
    """A device llama.cpp named: CUDA0 and its card, with the free memory it saw."""

    name: str
    description: str = ""
    free_mib: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchRow:
    """One llama-bench result."""

    # llama-bench's model type, e.g. 'llama 8B Q4_K - Medium'
    model: str
    model_filename: str | None = None
    size_bytes: int | None = None
    params: int | None = None
    backend: str = ""
    ngl: int | None = None
    threads: int | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
    type_k: str | None = None
    type_v: str | None = None
    flash_attn: FlashAttn | None = None
    tensor_split: tuple[float, ...] | None = None
    # pp512, tg128, pp512+tg128, 'tg128 @ d4096' ...
    test: str
    n_prompt: int = 0
    n_gen: int = 0
    n_depth: int = 0
    tok_s: float
    tok_s_sd: float | None = None

    @property
    def quant(self) -> str | None:
        return quant_label(self.model)


@dataclass(frozen=True, slots=True, kw_only=True)
class LlamaLog:
    """What one llama.cpp log recovered. Settings describe the last model load in it."""

    model_path: str | None = None
    # general.name
    model_name: str | None = None
    architecture: str | None = None
    # as printed: 'Q4_K - Medium'
    file_type: str | None = None
    n_layer: int | None = None
    n_ctx_train: int | None = None
    n_ctx: int | None = None
    n_ctx_per_seq: int | None = None
    n_seq_max: int | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
    flash_attn: FlashAttn | None = None
    flash_attn_was_auto: bool = False
    type_k: str | None = None
    type_v: str | None = None
    kv_unified: bool | None = None
    # cells per stream of each KV cache printed (iswa: two)
    kv_cells: tuple[int, ...] = ()
    kv_streams: int | None = None
    swa_full: bool | None = None
    # cells of the sliding-window cache
    swa_cells: int | None = None
    offloaded_layers: int | None = None
    # Y of 'offloaded X/Y layers'
    offload_slots: int | None = None
    # device of each slot, when llama.cpp printed the assignment
    layer_devices: tuple[str, ...] = ()
    pipeline_copies: int | None = None
    mmap: bool | None = None
    devices: tuple[LogDevice, ...] = ()
    # system_info flags set to 1
    cpu_features: tuple[str, ...] = ()
    build: str | None = None
    # allocation failures printed
    failures: tuple[str, ...] = ()
    buffers: tuple[LogBuffer, ...] = ()
    bench: tuple[BenchRow, ...] = ()
    # markdown, json, jsonl or csv
    bench_format: str | None = None
    # model loads seen; the fields are the last one's
    loads: int = 0
    lines: int = 0
    skipped_lines: int = 0

    @property
    def quant(self) -> str | None:
        """The file type as a quantization label (Q4_K_M, Q8_0 ...)."""
        return quant_label(self.file_type) if self.file_type else None

    def buffers_of(self, kind: BufferKind) -> tuple[LogBuffer, ...]:
        return tuple(b for b in self.buffers if b.kind is kind)

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        """GPUs that hold a buffer, by llama.cpp's index (CUDA1 -> 1)."""
        found = {int(b.device[4:]) for b in self.buffers if b.device and b.device[:4] == "gpu:"}
        return tuple(sorted(found))


# ------------------------------------------------------------------ names and labels

# ggml backend names for GPUs (GGML_CUDA_NAME is "ROCm" in HIP builds, "MUSA" for Moore
# Threads; Metal names its device MTL0; Apple's old builds say "Metal").
_GPU_BACKENDS = (
    "CUDA",
    "ROCm",
    "HIP",
    "MUSA",
    "Vulkan",
    "SYCL",
    "CANN",
    "OpenCL",
    "MTL",
    "Metal",
    "WebGPU",
    "Kompute",
)
_REPACK_NAMES = ("CPU_REPACK", "CPU_AARCH64", "AMX")


def buffer_device(name: str) -> str | None:
    """RigSpark's device for a llama.cpp buffer name: pinned host (`CUDA_Host`), mapped
    and repacked CPU buffers are `cpu`; `CUDA1`, `ROCm0`, `Vulkan2` are `gpu:N`."""
    if name.startswith(("CPU", "AMX")) or name.endswith("_Host"):
        return "cpu"
    for backend in _GPU_BACKENDS:
        if name.startswith(backend):
            tail = name[len(backend) :].split("_", 1)[0]
            if tail == "":
                return "gpu:0"
            if tail.isdigit() and len(tail) <= 3:
                return f"gpu:{int(tail)}"
    return None


_FTYPE_SIZE = {"Small": "_S", "Medium": "_M", "Large": "_L"}
_QUANT_HEAD = re.compile(r"(?:I?Q\d\w*|TQ\d\w*|B?F16|F32|MXFP4)\Z")


def quant_label(text: str) -> str | None:
    """A llama.cpp file type name as a quantization label: 'Q4_K - Medium' -> Q4_K_M,
    'mostly Q4_0' -> Q4_0, 'all F32' -> F32, 'IQ4_XS - 4.25 bpw' -> IQ4_XS, and the same
    inside llama-bench's model column ('qwen2 7B Q4_K - Medium')."""
    words = text.replace("(guessed)", "").split()
    for i, w in enumerate(words):
        if not _QUANT_HEAD.match(w):
            continue
        if i + 2 < len(words) and words[i + 1] == "-" and words[i + 2] in _FTYPE_SIZE:
            if w == "Q2_K" and words[i + 2] == "Medium":
                return "Q2_K"  # llama-quantize's Q2_K is the 'Medium' mix
            return w + _FTYPE_SIZE[words[i + 2]]
        return w
    return None


# ------------------------------------------------------------------ line tools

_NUMBER = r"(\d{1,12}(?:\.\d{1,9})?)"
_MIB_VALUE = re.compile(r"\s*=\s*" + _NUMBER + r"\s*MiB")
_IDENT = re.compile(r"~?[A-Za-z_][A-Za-z0-9_]{0,79}\Z")
_ANSI = re.compile(r"\x1b\[[0-9;]{0,16}[A-Za-z]")
_CELLS = re.compile(r"\(\s*(\d{1,10}) cells,\s*(\d{1,6}) layers,\s*(\d{1,5})(?:/(\d{1,5}))? seqs\)")
_KV_TYPE = re.compile(r"([KV]) \(([a-z0-9_]{1,12})\):")
_OLD_KV_TYPE = re.compile(r"type_([kv]) = '([a-z0-9_]{1,12})'")
_OFFLOADED = re.compile(r"offloaded (\d{1,5})/(\d{1,5}) layers to GPU")
_ASSIGNED = re.compile(r"layer\s{0,8}(\d{1,5}) assigned to device ([A-Za-z0-9_]{1,40})")
_CUDA_DEVICE = re.compile(r"\s*Device (\d{1,3}): ([^,]{1,200}), compute capability")
_USING_DEVICE = re.compile(
    r"using device ([A-Za-z0-9_]{1,40}) \(([^()]{1,200})\)[^-]{0,60}- (\d{1,9}) MiB free"
)
_COPIES = re.compile(r"n_copies\s*=\s*(\d{1,3})")
_SWA_CELLS = re.compile(r"creating\s{1,8}(non-SWA|SWA) KV cache, size = (\d{1,10}) cells")

# Functions whose `key = value` lines carry the context settings, across versions.
_CONTEXT_FNS = {"llama_context", "llama_new_context_with_model", "llama_init_from_model"}
_META_FNS = {"print_info", "llm_load_print_meta"}
_TENSOR_FNS = {"load_tensors", "llm_load_tensors"}
_BUFFER_KINDS = {
    "model": BufferKind.MODEL,
    "KV": BufferKind.KV,
    "RS": BufferKind.KV,
    "compute": BufferKind.COMPUTE,
    "output": BufferKind.OUTPUT,
}


def _statement(line: str) -> tuple[str, str] | None:
    """(function, rest) of a llama.cpp line `fn: rest`, past any prefix a log collector
    put before it (journald's 'Feb 28 12:44:32 host ollama[854770]: ', a timestamp)."""
    start = 0
    for _ in range(8):
        i = line.find(": ", start)
        if i < 0:
            return None
        word_start = max(line.rfind(" ", 0, i), line.rfind("\t", 0, i)) + 1
        word = line[word_start:i]
        if _IDENT.match(word):
            return word, line[i + 2 :]
        start = i + 2
    return None


def _key_value(rest: str) -> tuple[str, str] | None:
    i = rest.find("=")
    if i <= 0:
        return None
    return rest[:i].strip(), rest[i + 1 :].strip()


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    t = text.strip().split(" ", 1)[0]
    if t.startswith("-") and t[1:].isdigit() and len(t) < 20:
        return int(t)
    return int(t) if t.isdigit() and len(t) < 20 else None


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        v = float(text.strip())
    except ValueError:
        return None
    return v if v == v and abs(v) != float("inf") else None


def _flag(value: str) -> bool | None:
    v = value.strip().lower()
    if v in ("1", "true", "enabled", "on", "yes"):
        return True
    if v in ("0", "false", "disabled", "off", "no"):
        return False
    return None


def _flash(value: str) -> FlashAttn | None:
    v = value.strip().lower()
    if v in ("auto", "-1"):
        return FlashAttn.AUTO
    on = _flag(v)
    return None if on is None else FlashAttn.ON if on else FlashAttn.OFF


# ------------------------------------------------------------------ one model load


@dataclass
class _Load:
    """Mutable state of one model load while its lines are read."""

    values: dict[str, Any] = field(default_factory=dict)
    buffers: list[LogBuffer] = field(default_factory=list)
    kv_cells: list[int] = field(default_factory=list)
    layer_devices: dict[int, str] = field(default_factory=dict)

    def set(self, key: str, value: Any) -> None:
        if value is not None:
            self.values[key] = value

    @property
    def has_context(self) -> bool:
        return any(
            b.kind is not BufferKind.MODEL and b.kind is not BufferKind.REPACK for b in self.buffers
        )


class _Reader:
    def __init__(self) -> None:
        self.loads: list[_Load] = [_Load()]
        self.globals: dict[str, Any] = {}
        self.devices: dict[str, LogDevice] = {}
        self.md_header: list[str] | None = None
        self.bench: list[BenchRow] = []
        self.used = 0

    @property
    def load(self) -> _Load:
        return self.loads[-1]

    def new_load(self) -> None:
        if self.load.buffers or self.load.values:
            self.loads.append(_Load())

    def line(self, n: int, raw: str) -> None:
        if len(raw) > MAX_LINE_CHARS:
            return
        line = _ANSI.sub("", raw) if "\x1b" in raw else raw
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            return
        if stripped.startswith("|"):
            self.used += self._markdown(stripped)
            return
        self.md_header = None
        if self._read(n, line):
            self.used += 1

    # --------------------------------------------------------------- dispatch

    def _read(self, n: int, line: str) -> bool:
        st = _statement(line)
        fn, rest = st if st is not None else ("", line.strip())
        fn = fn.lstrip("~")
        if " buffer size" in rest:
            return self._buffer(n, fn, rest)
        if "failed to allocate" in rest or "cudaMalloc failed" in rest:
            failures = self.globals.setdefault("failures", [])
            if len(failures) < 8:
                failures.append(f"{fn}: {rest.strip()}"[:200] if fn else rest.strip()[:200])
            return True
        if "Flash Attention " in rest:
            # 'Flash Attention was auto, set to enabled', 'Flash Attention enabled'
            on = "enabled" in rest and "not supported" not in rest
            self.load.set("flash_attn", FlashAttn.ON if on else FlashAttn.OFF)
            self.load.set("flash_attn_was_auto", True)
            return True
        if "Device " in line and "compute capability" in line:
            return self._cuda_device(line)
        if "= 1 |" in line:  # system_info: 'CPU : SSE3 = 1 | AVX2 = 1 | ...'
            return self._features(line)
        if fn == "llama_model_loader":
            return self._loader(rest)
        if fn in _META_FNS:
            return self._meta(rest)
        if fn in _TENSOR_FNS:
            return self._tensors(rest)
        if fn in _CONTEXT_FNS:
            return self._context(rest)
        if fn.startswith(("llama_kv_cache", "llama_memory")):
            return self._kv(rest)
        if fn == "llama_model_load_from_file_impl" or fn == "llama_load_model_from_file":
            return self._using_device(rest)
        if fn == "build" or (fn == "main" and rest.startswith("build")):
            self.globals["build"] = rest.removeprefix("build = ").split(" with ", 1)[0].strip()
            return True
        return False

    def _buffer(self, n: int, fn: str, rest: str) -> bool:
        i = rest.find(" buffer size")
        m = _MIB_VALUE.match(rest, i + len(" buffer size"))
        words = rest[:i].split()
        if m is None or not words or len(words) > 6:
            return False
        name = words[0]
        kind_word = words[-1] if len(words) > 1 else None
        if kind_word is None:  # older builds: '      CUDA0 buffer size = ...' under load_tensors
            kind = BufferKind.MODEL if fn in _TENSOR_FNS else BufferKind.OTHER
            if fn.startswith("llama_kv_cache"):
                kind = BufferKind.KV
        else:
            kind = _BUFFER_KINDS.get(kind_word, BufferKind.OTHER)
        if kind is BufferKind.MODEL and name.startswith(_REPACK_NAMES):
            kind = BufferKind.REPACK
        if kind is BufferKind.MODEL and self.load.has_context:
            self.new_load()  # weights after a context: the next load began
        mib = float(m.group(1))
        self.load.buffers.append(
            LogBuffer(
                name=name,
                kind=kind,
                device=buffer_device(name),
                mib=mib,
                bytes=round(mib * MIB),
                origin=fn,
                line=n,
            )
        )
        return True

    def _cuda_device(self, line: str) -> bool:
        m = _CUDA_DEVICE.match(line, line.find("Device "))
        if m is None:
            return False
        name = f"CUDA{int(m.group(1))}"
        self.devices.setdefault(name, LogDevice(name=name, description=m.group(2).strip()))
        return True

    def _using_device(self, rest: str) -> bool:
        i = rest.find("using device ")
        m = _USING_DEVICE.match(rest, i) if i >= 0 else None
        if m is None:
            return False
        name = m.group(1)
        self.devices[name] = LogDevice(
            name=name, description=m.group(2).strip(), free_mib=float(m.group(3))
        )
        return True

    def _features(self, line: str) -> bool:
        flags = []
        for part in line.split("|")[:200]:
            kv = _key_value(part)
            if kv is None:
                continue
            key = kv[0].rsplit(":", 1)[-1].strip()
            if kv[1] == "1" and _IDENT.match(key):
                flags.append(key.lower())
        if not flags:
            return False
        self.globals["cpu_features"] = tuple(dict.fromkeys(flags))
        return True

    def _loader(self, rest: str) -> bool:
        if rest.startswith("loaded meta data"):
            self.new_load()
            i, j = rest.find(" from "), rest.rfind(" (version")
            if i >= 0:
                path = rest[i + 6 : j if j > i else len(rest)].strip()
                self.load.set("model_path", path)
            return True
        if rest.startswith("- kv"):
            kv = _key_value(rest)
            if kv is None:
                return False
            words = kv[0].split()
            if len(words) >= 2 and words[-2] in ("general.name", "general.architecture"):
                key = "model_name" if words[-2] == "general.name" else "architecture"
                self.load.values.setdefault(key, kv[1])
                return True
        return False

    def _meta(self, rest: str) -> bool:
        kv = _key_value(rest)
        if kv is None:
            return False
        key, value = kv
        if key == "arch":
            self.load.set("architecture", value)
        elif key == "general.name":
            self.load.set("model_name", value)
        elif key in ("file type", "model ftype", "ftype"):
            self.load.set("file_type", value)
        elif key in ("n_layer", "n_ctx_train"):
            self.load.set(key, _int(value))
        else:
            return False
        return True

    def _tensors(self, rest: str) -> bool:
        m = _OFFLOADED.search(rest)
        if m is not None:
            self.load.set("offloaded_layers", int(m.group(1)))
            self.load.set("offload_slots", int(m.group(2)))
            return True
        m = _ASSIGNED.match(rest)
        if m is not None:
            self.load.layer_devices[int(m.group(1))] = m.group(2)
            return True
        if rest.startswith("loading model tensors"):
            self.load.set("mmap", "mmap = true" in rest or "load_mode = mmap" in rest)
            return True
        return False

    def _context(self, rest: str) -> bool:
        if "n_copies" in rest:
            m = _COPIES.search(rest)
            self.load.set("pipeline_copies", int(m.group(1)) if m else None)
            return m is not None
        if rest.lstrip().startswith("KV self size"):
            return self._kv_types(rest)
        kv = _key_value(rest)
        if kv is None:
            return False
        key, value = kv
        if key in ("n_ctx", "n_seq_max", "n_batch", "n_ubatch"):
            self.load.set(key, _int(value))
        elif key in ("n_ctx_per_seq", "n_ctx_seq"):
            self.load.set("n_ctx_per_seq", _int(value))
        elif key == "flash_attn":
            if not self.load.values.get("flash_attn_was_auto"):
                self.load.set("flash_attn", _flash(value))
        elif key in ("kv_unified", "swa_full"):
            self.load.set(key, _flag(value))
        else:
            return False
        return True

    def _kv_types(self, rest: str) -> bool:
        found = False
        for m in _KV_TYPE.finditer(rest):
            self.load.set("type_k" if m.group(1) == "K" else "type_v", m.group(2))
            found = True
        return found

    def _kv(self, rest: str) -> bool:
        if rest.startswith("size ="):
            m = _CELLS.search(rest)
            if m is not None:
                self.load.kv_cells.append(int(m.group(1)))
                if m.group(4) is not None:
                    self.load.set("n_seq_max", int(m.group(3)))
                    self.load.set("kv_streams", int(m.group(4)))
                else:  # builds before per-sequence streams kept one unified cache
                    self.load.set("kv_streams", 1)
            return self._kv_types(rest) or m is not None
        if "full-size SWA cache" in rest:
            self.load.set("swa_full", True)
            return True
        m = _SWA_CELLS.search(rest)
        if m is not None:
            if m.group(1) == "SWA":
                self.load.set("swa_cells", int(m.group(2)))
            return True
        if rest.startswith("kv_size"):
            for t in _OLD_KV_TYPE.finditer(rest):
                self.load.set("type_" + t.group(1), t.group(2))
            size = _key_value(rest.split(",", 1)[0])
            cells = _int(size[1]) if size else None
            if cells:
                self.load.kv_cells.append(cells)
            self.load.set("kv_streams", 1)  # one cache for every sequence back then
            return True
        return False

    # --------------------------------------------------------------- llama-bench

    def _markdown(self, stripped: str) -> int:
        cells = [c.strip() for c in stripped.strip("|").split("|")]
        if len(cells) > 64:
            return 0
        if "model" in cells and "t/s" in cells and "test" in cells:
            self.md_header = cells
            return 1
        if self.md_header is None or len(cells) != len(self.md_header):
            return 0
        if all(set(c) <= set("-: ") for c in cells):
            return 1
        row = _bench_from_markdown(dict(zip(self.md_header, cells, strict=True)))
        if row is None:
            return 0
        self.bench.append(row)
        return 1

    # --------------------------------------------------------------- result

    def result(self, n_lines: int, bench: list[BenchRow], bench_format: str | None) -> LlamaLog:
        loads = [ld for ld in self.loads if ld.buffers or ld.values]
        last = next((ld for ld in reversed(loads) if ld.buffers), loads[-1] if loads else _Load())
        values = dict(last.values)
        slots = values.get("offload_slots") or (
            values["n_layer"] + 1 if isinstance(values.get("n_layer"), int) else None
        )
        layer_devices: tuple[str, ...] = ()
        if last.layer_devices and slots and sorted(last.layer_devices) == list(range(slots)):
            layer_devices = tuple(last.layer_devices[i] for i in range(slots))
        rows = bench or self.bench
        return LlamaLog(
            **values,
            kv_cells=tuple(last.kv_cells),
            layer_devices=layer_devices,
            devices=tuple(self.devices.values()),
            cpu_features=self.globals.get("cpu_features", ()),
            build=self.globals.get("build"),
            failures=tuple(self.globals.get("failures", ())),
            buffers=tuple(last.buffers),
            bench=tuple(rows),
            bench_format=bench_format if bench else ("markdown" if self.bench else None),
            loads=sum(1 for ld in loads if any(b.kind is BufferKind.MODEL for b in ld.buffers)),
            lines=n_lines,
            skipped_lines=max(n_lines - self.used, 0),
        )


# ------------------------------------------------------------------ llama-bench rows


def _size_bytes(text: str) -> int | None:
    parts = text.split()
    scale = {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10}
    if len(parts) == 2 and parts[1] in scale:
        v = _float(parts[0])
        return None if v is None else round(v * scale[parts[1]])
    return None


def _params(text: str) -> int | None:
    parts = text.split()
    scale = {"B": 1e9, "M": 1e6, "K": 1e3, "T": 1e12}
    if len(parts) == 2 and parts[1] in scale:
        v = _float(parts[0])
        return None if v is None else round(v * scale[parts[1]])
    return None


_TEST_PART = re.compile(r"(pp|tg)\s?(\d{1,7})\Z")


def _test_shape(test: str) -> tuple[int, int, int] | None:
    """(n_prompt, n_gen, n_depth) of 'pp512', 'tg 128', 'pp512+tg128', 'tg128 @ d4096'."""
    head, _, depth_part = test.partition("@")
    depth = 0
    if depth_part:
        d = depth_part.strip()
        if not (d.startswith("d") and d[1:].isdigit() and len(d) < 10):
            return None
        depth = int(d[1:])
    n_prompt = n_gen = 0
    for part in head.split("+"):
        m = _TEST_PART.match(part.strip())
        if m is None:
            return None
        if m.group(1) == "pp":
            n_prompt = int(m.group(2))
        else:
            n_gen = int(m.group(2))
    return n_prompt, n_gen, depth


def _test_name(n_prompt: int, n_gen: int, n_depth: int) -> str:
    parts = ([f"pp{n_prompt}"] if n_prompt else []) + ([f"tg{n_gen}"] if n_gen else [])
    name = "+".join(parts) or "pp0"
    return f"{name} @ d{n_depth}" if n_depth else name


def _split(text: str | None) -> tuple[float, ...] | None:
    if not text:
        return None
    values = [_float(x) for x in text.replace("/", ",").split(",")[:64]]
    if any(v is None for v in values):
        return None
    out = tuple(v for v in values if v is not None)
    return out if sum(out) > 0 else None


def _bench_from_markdown(cells: dict[str, str]) -> BenchRow | None:
    shape = _test_shape(cells.get("test", ""))
    speed = cells.get("t/s", "").replace("±", " ").split()
    tok_s = _float(speed[0]) if speed else None
    if shape is None or tok_s is None:
        return None
    backend = cells.get("backend", "")
    fa = cells.get("fa")
    return BenchRow(
        model=cells.get("model", ""),
        size_bytes=_size_bytes(cells.get("size", "")),
        params=_params(cells.get("params", "")),
        backend=backend,
        ngl=_int(cells.get("ngl")),
        threads=_int(cells.get("threads")),
        n_batch=_int(cells.get("n_batch")),
        n_ubatch=_int(cells.get("n_ubatch")),
        type_k=cells.get("type_k") or None,
        type_v=cells.get("type_v") or None,
        flash_attn=_flash(fa) if fa else None,
        tensor_split=_split(cells.get("ts")),
        test=cells.get("test", ""),
        n_prompt=shape[0],
        n_gen=shape[1],
        n_depth=shape[2],
        tok_s=tok_s,
        tok_s_sd=_float(speed[1]) if len(speed) > 1 else None,
    )


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _bench_from_record(rec: dict[str, Any]) -> BenchRow | None:
    """A llama-bench JSON object or CSV row (CSV gives every value as a string)."""
    tok_s = _float(_str(rec.get("avg_ts")))
    n_prompt = _int(_str(rec.get("n_prompt"))) or 0
    n_gen = _int(_str(rec.get("n_gen"))) or 0
    n_depth = _int(_str(rec.get("n_depth"))) or 0
    if tok_s is None or (n_prompt <= 0 and n_gen <= 0):
        return None
    fa = rec.get("flash_attn")
    flash = _flash(str(fa).lower()) if fa is not None else None
    return BenchRow(
        model=str(rec.get("model_type", "")),
        model_filename=_str(rec.get("model_filename")),
        size_bytes=_int(_str(rec.get("model_size"))),
        params=_int(_str(rec.get("model_n_params"))),
        backend=str(rec.get("backends", rec.get("backend", ""))),
        ngl=_int(_str(rec.get("n_gpu_layers"))),
        threads=_int(_str(rec.get("n_threads"))),
        n_batch=_int(_str(rec.get("n_batch"))),
        n_ubatch=_int(_str(rec.get("n_ubatch"))),
        type_k=_str(rec.get("type_k")),
        type_v=_str(rec.get("type_v")),
        flash_attn=flash,
        tensor_split=_split(_str(rec.get("tensor_split"))),
        test=_test_name(n_prompt, n_gen, n_depth),
        n_prompt=n_prompt,
        n_gen=n_gen,
        n_depth=n_depth,
        tok_s=tok_s,
        tok_s_sd=_float(_str(rec.get("stddev_ts"))),
    )


def _records(value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    return [x for x in items if isinstance(x, dict) and "avg_ts" in x]


def _bench_json(text: str) -> tuple[list[BenchRow], str | None]:
    """llama-bench `-o json` (one array, possibly after log lines) or `-o jsonl`."""
    decoder = json.JSONDecoder()
    starts = [0] if text[:1] == "[" else []
    starts += [m.start() + 1 for m in re.finditer(r"\n\[", text[:MAX_LOG_BYTES])][:8]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        rows = [r for r in map(_bench_from_record, _records(value)) if r is not None]
        if rows:
            return rows, "json"
    rows = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("{") and '"avg_ts"' in s and len(s) <= MAX_LINE_CHARS:
            try:
                value = json.loads(s)
            except (ValueError, RecursionError):
                continue
            rows += [r for r in map(_bench_from_record, _records(value)) if r is not None]
    return rows, ("jsonl" if rows else None)


def _bench_csv(lines: list[str]) -> list[BenchRow]:
    """llama-bench `-o csv`: a header naming avg_ts, then one row per result."""
    for i, line in enumerate(lines):
        header = line.startswith("build_commit,") or '"avg_ts"' in line or ",avg_ts," in line
        if header and not line.lstrip().startswith(("{", "[")):
            if line.count(",") < 5 or len(line) > MAX_LINE_CHARS:
                continue
            body = [x for x in lines[i:] if len(x) <= MAX_LINE_CHARS and x.count(",") >= 5]
            reader = csv.DictReader(body)
            rows = [_bench_from_record(dict(r)) for r in reader]
            return [r for r in rows if r is not None]
    return []


# ------------------------------------------------------------------ entry points


def _text_of(data: str | bytes) -> str:
    size = len(data)
    if size > MAX_LOG_BYTES:
        raise LogReadError(
            f"the log is {size / MIB:.0f} MiB; RigSpark reads logs up to "
            f"{MAX_LOG_BYTES // MIB} MiB (keep the part around the model load)"
        )
    head = data[:_BINARY_PROBE]
    if isinstance(head, bytes):
        head = head.decode("latin-1")
    if "\x00" in head:
        what = "a GGUF model file" if head.startswith("GGUF") else "binary"
        raise LogReadError(f"the file is {what}, not a llama.cpp log")
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    if not text.strip():
        raise LogReadError("the log is empty")
    return text


def _lines(text: str) -> Iterator[str]:
    # splitlines also breaks on \x0b, \x1c ... which logs never use; \n and \r\n suffice
    for line in text.split("\n"):
        yield line.removesuffix("\r")


def parse_llama_log(data: str | bytes) -> LlamaLog:
    """Everything a llama.cpp load log or llama-bench output says; raises LogReadError
    (one sentence) when the text is empty, binary, too large or holds no buffer sizes
    and no llama-bench results."""
    text = _text_of(data)
    lines = list(_lines(text))
    reader = _Reader()
    for n, line in enumerate(lines, 1):
        reader.line(n, line)
    bench, bench_format = _bench_json(text) if "avg_ts" in text else ([], None)
    if not bench and "avg_ts" in text:
        bench, bench_format = _bench_csv(lines), "csv"
    log = reader.result(len(lines), bench, bench_format)
    if not log.buffers and not log.bench:
        raise LogReadError(
            "found no llama.cpp buffer sizes and no llama-bench results in the log "
            "(expected the output of llama-server, llama-cli, llama-cpp-python or llama-bench)"
        )
    return log


def read_log_text(path: str | os.PathLike[str]) -> str:
    """A log file's text, read up to MAX_LOG_BYTES; LogReadError when it cannot be read."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_LOG_BYTES + 1)
    except OSError as err:
        raise LogReadError(f"cannot read {p.name}: {err.strerror or err}") from None
    return _text_of(data)


def bench_models(rows: Iterable[BenchRow]) -> list[str]:
    """The distinct models of llama-bench rows, in order."""
    return list(dict.fromkeys(r.model for r in rows))
