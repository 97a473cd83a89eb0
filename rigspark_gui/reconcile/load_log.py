"""The load-log reader: llama.cpp's model-load lines (llama-server, llama-cli,
llama-cpp-python, inside Ollama's server log) read one at a time into the settings,
devices and buffers of each model load, with llama-bench markdown tables met on the way.

Lines are taken apart with `str.find` / `split` and anchored patterns without nested
repetition, so the time is linear in the input; lines it does not understand are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rigspark_gui.reconcile.bench_log import bench_from_markdown
from rigspark_gui.reconcile.log_records import (
    MAX_LINE_CHARS,
    MIB,
    BenchRow,
    BufferKind,
    FlashAttn,
    LlamaLog,
    LogBuffer,
    LogDevice,
    buffer_device,
    parse_flag,
    parse_flash,
    parse_int,
)

__all__ = ["LoadLogReader"]

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
_REPACK_NAMES = ("CPU_REPACK", "CPU_AARCH64", "AMX")
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


class LoadLogReader:
    """Reads a log line by line (`line`), then gives the LlamaLog of its last model load
    (`result`); each model load's state is kept apart from the next."""

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
            self.load.set(key, parse_int(value))
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
            self.load.set(key, parse_int(value))
        elif key in ("n_ctx_per_seq", "n_ctx_seq"):
            self.load.set("n_ctx_per_seq", parse_int(value))
        elif key == "flash_attn":
            if not self.load.values.get("flash_attn_was_auto"):
                self.load.set("flash_attn", parse_flash(value))
        elif key in ("kv_unified", "swa_full"):
            self.load.set(key, parse_flag(value))
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
            cells = parse_int(size[1]) if size else None
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
        row = bench_from_markdown(dict(zip(self.md_header, cells, strict=True)))
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
