"""The rows of data/perf.json as the speed fit reads them: each published result with
the bytes and weights a token reads, the device's bandwidth and compute, and why a row
is skipped (validation/speed_fit.py fits and judges them)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rigspark_gui.core.rig import Vendor
from rigspark_gui.core.speed import CpuIsa, DeviceClass, GpuBackend, QuantFamily, quant_family
from rigspark_gui.core.speed.devices import NATIVE_BACKEND, class_of, geforce_accumulate_factor

ROOT = Path(__file__).resolve().parents[1]
PERF_PATH = ROOT / "data" / "perf.json"
GPUS_PATH = ROOT / "data" / "gpus.json"
GIB = 1 << 30


@dataclass(frozen=True)
class Arch:
    """What a benchmarked model reads per token. Sources: each model's config.json on
    Hugging Face (num_hidden_layers, vocab_size, hidden_size, num_key_value_heads,
    head_dim, tie_word_embeddings) and the parameter counts llama-bench prints."""

    key: str
    n_layer: int
    n_vocab: int
    n_embd: int
    kv_values_per_token: int  # K + V values per token over all layers (f16 cache: x2 bytes)
    params_b: float
    active_params_b: float | None = None  # MoE
    tied: bool = False
    # hybrid models: recurrent-state bytes a decoded token reads and writes back
    # (rigspark_gui.core.speed.placed.state_traffic), whatever the depth
    state_bytes: float = 0.0


# Patterns are matched against the model column (lower case) of each row.
ARCHS: tuple[tuple[str, Arch], ...] = (
    (r"gpt-?oss.?120b", Arch("gpt-oss-120b", 36, 201088, 2880, 36 * 2 * 8 * 64, 116.83, 5.13)),
    (r"gpt-?oss.?20b", Arch("gpt-oss-20b", 24, 201088, 2880, 24 * 2 * 8 * 64, 20.91, 3.61)),
    (
        r"qwen3.?moe.*30b|qwen3.?30b.?a3b",
        Arch("qwen3-30b-a3b", 48, 151936, 2048, 48 * 2 * 4 * 128, 30.53, 3.34),
    ),
    (
        r"qwen3.?moe.*235b|235b\.a22b",
        Arch("qwen3-235b-a22b", 94, 151936, 4096, 94 * 2 * 4 * 128, 235.09, 22.14),
    ),
    (r"mixtral|8x7b", Arch("mixtral-8x7b", 32, 32000, 4096, 32 * 2 * 8 * 128, 46.70, 12.88)),
    (
        r"deepseek2.*16b|deepseek.?v2.?lite",
        Arch("deepseek-v2-lite", 27, 102400, 2048, 27 * 576, 15.71, 2.66),
    ),
    (
        r"glm4.?moe.*106b|glm.?4\.5.?air",
        Arch("glm-4.5-air", 46, 151552, 4096, 46 * 2 * 8 * 128, 110.47, 12.1),
    ),
    (
        r"llama.?4.*scout|17b\.16e",
        Arch("llama-4-scout", 48, 202048, 5120, 48 * 2 * 8 * 128, 107.77, 17.17),
    ),
    (
        r"(meta-)?llama.?3(\.\d)?.?70b|llama 70b",
        Arch("llama-3-70b", 80, 128256, 8192, 80 * 2 * 8 * 128, 70.55),
    ),
    (r"llama.?2.?70b", Arch("llama-2-70b", 80, 32000, 8192, 80 * 2 * 8 * 128, 68.98)),
    (
        r"(meta-)?llama.?3(\.\d)?.?8b|llama 8b",
        Arch("llama-3-8b", 32, 128256, 4096, 32 * 2 * 8 * 128, 8.03),
    ),
    (
        r"llama.?3\.2.?3b|llama 3b",
        Arch("llama-3.2-3b", 28, 128256, 3072, 28 * 2 * 8 * 128, 3.21, None, True),
    ),
    (
        r"llama.?3\.2.?1b|llama 1b",
        Arch("llama-3.2-1b", 16, 128256, 2048, 16 * 2 * 8 * 64, 1.24, None, True),
    ),
    (r"llama.?(v?2.?)?13b|llama 13b", Arch("llama-2-13b", 40, 32000, 5120, 40 * 2 * 5120, 13.02)),
    (
        r"llama.?(v?2.?)?7b|llama 7b|mistral.?7b",
        Arch("llama-2-7b", 32, 32000, 4096, 32 * 2 * 4096, 6.74),
    ),
    (
        r"qwen2(\.5)?.?1\.5b",
        Arch("qwen2-1.5b", 28, 151936, 1536, 28 * 2 * 2 * 128, 1.54, None, True),
    ),
    (r"qwen2(\.5)?.?32b|qwen3.?32b", Arch("qwen-32b", 64, 152064, 5120, 64 * 2 * 8 * 128, 32.76)),
    (r"qwen2(\.5)?.?14b|qwen3.?14b", Arch("qwen-14b", 48, 152064, 5120, 48 * 2 * 8 * 128, 14.77)),
    (r"qwen2(\.5)?.?7b|qwen3.?8b", Arch("qwen-7b", 28, 152064, 3584, 28 * 2 * 4 * 128, 7.62)),
    (r"gemma.?3.?27b", Arch("gemma-3-27b", 62, 262208, 5376, 62 * 2 * 16 * 128, 27.01, None, True)),
    (r"gemma.?2.?9b", Arch("gemma-2-9b", 42, 256000, 3584, 42 * 2 * 8 * 256, 9.24, None, True)),
)

# Bits per weight of the token-embedding table in each file type (llama-quantize keeps
# it at the file's base type; ggml block sizes, DESIGN §3).
_EMBD_BPW = {
    "F32": 32.0, "F16": 16.0, "BF16": 16.0, "Q8_0": 8.5, "Q6_K": 6.5625, "Q5_K": 5.5,
    "Q5_0": 5.5, "Q5_1": 6.0, "Q4_K": 4.5, "Q4_0": 4.5, "Q4_1": 5.0, "Q3_K": 3.4375,
    "Q2_K": 2.625, "IQ4_XS": 4.25, "IQ4_NL": 4.5, "MXFP4": 16.0,
}  # fmt: skip


# GPU cores of the bin whose TFLOPS data/gpus.json gives (Apple press releases cited there).
APPLE_GPU_CORES = {
    "Apple M1": 8, "Apple M1 Pro": 16, "Apple M1 Max": 32, "Apple M1 Ultra": 64,
    "Apple M2": 10, "Apple M2 Pro": 19, "Apple M2 Max": 38, "Apple M2 Ultra": 76,
}  # fmt: skip


# Whole-file bits per weight of llama-quantize's mixes, measured on Llama-3.1-8B
# (DESIGN §3), for rows whose source did not print llama-bench's size column.
_FILE_BPW = {
    "Q2_K": 3.16, "Q3_K_S": 3.64, "Q4_K_S": 4.67, "Q4_K_M": 4.89, "Q5_K_M": 5.70,
    "Q6_K": 6.56, "Q8_0": 8.50, "F16": 16.0, "BF16": 16.0, "IQ4_XS": 4.46,
}  # fmt: skip


# Bits per weight of each ggml base type (block bytes x 8 / block elements, ggml-common.h):
# a file whose printed size needs more than MAX_BPW_OVER x its type's bits per weight
# cannot be that model in that type, so the bytes it reads per token are unknown.
_BASE_BPW = {
    "F32": 32.0, "F16": 16.0, "BF16": 16.0, "Q8_0": 8.5, "Q6_K": 6.5625, "Q5_K": 5.5,
    "Q5_0": 5.5, "Q5_1": 6.0, "Q4_K": 4.5, "Q4_0": 4.5, "Q4_1": 5.0, "Q3_K": 3.4375,
    "Q2_K": 2.625, "IQ4_XS": 4.25, "IQ4_NL": 4.5, "IQ3_XXS": 3.0625, "IQ3_S": 3.4375,
    "IQ2_XXS": 2.0625, "IQ2_XS": 2.3125, "IQ2_S": 2.5, "IQ1_S": 1.5625, "IQ1_M": 1.75,
    "MXFP4": 4.25,
}  # fmt: skip
# llama-quantize's mixes keep some tensors (output, embeddings, attention V) a type or two
# up: whole files run to about 1.3x the base type's bits on small models
MAX_BPW_OVER = 1.5


def size_inconsistent(quant: str, size_bytes: float, params: float) -> str | None:
    """Why a row's file size cannot be its model in its type, or None."""
    q = quant.upper()
    base = next((v for k, v in sorted(_BASE_BPW.items(), key=lambda kv: -len(kv[0]))
                 if q.startswith(k)), None)  # fmt: skip
    if base is None or params <= 0:
        return None
    bpw = size_bytes * 8 / params
    if bpw > MAX_BPW_OVER * base:
        return (
            f"file size gives {bpw:.1f} bits per weight, {bpw / base:.1f}x what {q} stores: "
            "the size column does not describe this model (bytes read per token unknown)"
        )
    return None


def arch_of(model: str) -> Arch | None:
    """The table's entry for a benchmarked model; None when its geometry is not known
    (then the bytes it reads per token are not known either and the row is skipped)."""
    m = model.lower()
    for pattern, arch in ARCHS:
        if re.search(pattern, m):
            return arch
    return None


def _embd_bpw(quant: str) -> float:
    q = quant.upper()
    for key, bpw in _EMBD_BPW.items():
        if q.startswith(key):
            return bpw
    return 4.5


def attention_flops(n_layer: int, width: int, tokens: int, depth: float) -> float:
    """FLOPs of the attention products of a prompt of `tokens` after `depth` tokens of
    context (causal: each token attends to depth + its position)."""
    return 4.0 * n_layer * width * tokens * (depth + tokens / 2)


def parse_test(test: str) -> tuple[str, int] | None:
    """("tg"|"pp", tokens) from a llama-bench test name like tg128 or pp512."""
    m = re.fullmatch(r"(tg|pp)(\d+)(?:@d\d+)?", test.strip().lower())
    return (m.group(1), int(m.group(2))) if m else None


@dataclass
class Row:
    """One published measurement with the quantities the model needs."""

    raw: dict[str, Any]
    device_key: str  # the device held out together in leave-one-device-out
    kind: str  # "tg" or "pp"
    tokens: int
    measured: float  # tok/s
    is_cpu: bool
    cls: DeviceClass
    backend: str  # cuda | rocm | vulkan | metal | sycl | cpu
    backend_factor_key: str | None  # None = the vendor's own backend
    family: QuantFamily
    isa: CpuIsa
    bandwidth_gbps: float
    flops: float | None  # dense FP16 FLOP/s (GPU) or None
    cores: int | None  # CPU: threads that compute (at most the physical cores)
    n_devices: int
    n_layer: int
    attn_flops: float  # prefill: QK and PV products of the prompt over its context
    weight_read_bytes: float  # per token, weights actually read
    kv_read_bytes: float  # per token at the row's mean depth
    elements: float  # weight elements read per token
    active_params: float
    moe: bool
    notes: list[str] = field(default_factory=list)
    threads: int | None = None  # CPU: threads the run used (hyperthreads included)
    old_build: bool = False  # CPU: a llama.cpp build before the repacked kernels (Nov 2024)
    measured_bw: bool = False  # CPU: bandwidth_gbps is a measured read stream, not a spec
    vcpu: bool = False  # CPU: a virtual machine's vCPUs (threads of a host, maybe siblings)
    # CPU: each counted core's share of a whole core, where the vCPUs were timed together
    # (the app's core probe: compute_cores / cores); None: the fitted vCPU share applies
    share: float | None = None

    @property
    def fitted_vcpu(self) -> bool:
        return self.vcpu and self.share is None

    @property
    def core_share(self) -> float:
        return self.share if self.share is not None else 1.0


def load_gpu_db(path: Path = GPUS_PATH) -> dict[str, dict[str, Any]]:
    data = json.loads(path.read_text())
    out: dict[str, dict[str, Any]] = {}
    for g in data["gpus"]:
        for n in [g["name"], *g.get("aliases", [])]:
            out[norm_name(n)] = g
    return out


def norm_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", name.lower()).strip()


def build_rows(
    perf: dict[str, Any], gpus: dict[str, dict[str, Any]]
) -> tuple[list[Row], list[str]]:
    """Rows the model can be judged on, and why the others were skipped."""
    rows: list[Row] = []
    skipped: list[str] = []
    for raw in perf["rows"]:
        why = _skip_reason(raw)
        if why:
            skipped.append(f"{raw.get('device')} {raw.get('model')} {raw.get('test')}: {why}")
            continue
        row = row_of(raw, gpus)
        if isinstance(row, str):
            skipped.append(f"{raw.get('device')} {raw.get('model')} {raw.get('test')}: {row}")
        else:
            rows.append(row)
    return rows, skipped


def _skip_reason(raw: dict[str, Any]) -> str | None:
    if not raw.get("tok_s") or raw["tok_s"] <= 0:
        return "no figure"
    if parse_test(str(raw.get("test", ""))) is None:
        return "not a tg/pp test"
    if raw.get("exclude"):
        return str(raw["exclude"])
    return None


def row_of(raw: dict[str, Any], gpus: dict[str, dict[str, Any]]) -> Row | str:
    kind, tokens = parse_test(str(raw["test"]))  # type: ignore[misc]
    backend = str(raw["backend"]).lower()
    arch = (
        Arch(key=str(raw["model"]), **raw["arch"])
        if raw.get("arch")
        else arch_of(str(raw["model"]))
    )
    quant = str(raw.get("quant") or "")
    size_gib = raw.get("size_gib")
    if arch is None:
        return "model architecture not in the table (bytes read per token unknown)"
    params = float(raw.get("params_b") or arch.params_b) * 1e9
    if not size_gib:
        bpw = _FILE_BPW.get(quant.upper())
        if bpw is None:
            return "no file size"
        size_gib = params * bpw / 8 / GIB  # llama-bench's size column was not printed
    size = float(size_gib) * GIB
    bad_size = size_inconsistent(quant, size, params)
    if bad_size:
        return bad_size
    moe = arch.active_params_b is not None
    if moe:
        active = arch.active_params_b * 1e9  # type: ignore[operator]
        weights = size * active / params
    else:
        active = params
        embd = 0.0 if arch.tied else arch.n_vocab * arch.n_embd * _embd_bpw(quant) / 8
        weights = size - embd
    depth = float(raw.get("depth") or 0) + (tokens / 2 if kind == "tg" else 0)
    kv = arch.kv_values_per_token * 2 * depth + (arch.state_bytes if kind == "tg" else 0.0)
    attn = attention_flops(arch.n_layer, arch.n_embd, tokens, float(raw.get("depth") or 0))
    elements = params * (weights + kv) / size  # the engine counts KV reads as elements too
    is_cpu = backend == "cpu"
    family = quant_family(quant)
    if is_cpu:
        bw = raw.get("bandwidth_gbps")
        if not bw:
            return "CPU row without a memory bandwidth figure"
        feats = str(raw.get("isa") or "").lower()
        isa = CpuIsa(feats) if feats in CpuIsa.__members__.values() else CpuIsa.OTHER
        threads = raw.get("threads") or raw.get("cpu_cores")
        # hyperthreads share a core's vector units and its line-fill buffers: compute and
        # the per-core memory stream count physical cores only (llama.cpp's default -t)
        cores = min(threads, raw["cpu_cores"]) if threads and raw.get("cpu_cores") else threads
        return Row(
            raw, norm_name(str(raw["device"])), kind, tokens, float(raw["tok_s"]), True,
            DeviceClass.CPU, "cpu", None, family, isa, float(bw), None,
            int(cores) if cores else None, 1, arch.n_layer, attn, weights, kv, elements,
            active, moe, threads=int(threads) if threads else None,
            old_build=old_cpu_build(raw), measured_bw=raw.get("bandwidth_basis") == "measured",
            vcpu=bool(raw.get("vcpu")), share=_share(raw, cores),
        )  # fmt: skip
    spec = gpus.get(norm_name(str(raw["device"])))
    if spec is None:
        return "device not in the GPU database"
    vendor = Vendor(spec["vendor"])
    bw = float(raw.get("bandwidth_gbps") or spec["memory_bandwidth_gbps"])
    flops = spec.get("fp16_tflops")
    if flops and vendor is Vendor.NVIDIA:
        flops *= geforce_accumulate_factor(spec["name"])
    full_cores = APPLE_GPU_CORES.get(spec["name"])
    if raw.get("gpu_cores") and full_cores and flops:
        flops = flops * raw["gpu_cores"] / full_cores  # a smaller bin of the same chip
    try:
        gb = GpuBackend(backend)
    except ValueError:
        return f"unknown backend {backend}"
    native = NATIVE_BACKEND.get(vendor)
    factor_key = None if gb is native else f"{gb.value}:{vendor.value}"
    cls = class_of(vendor.value, spec["name"])
    return Row(
        raw, norm_name(spec["name"]), kind, tokens, float(raw["tok_s"]), False, cls, gb.value,
        factor_key, family, CpuIsa.OTHER, bw, flops * 1e12 if flops else None, None,
        int(raw.get("n_devices") or 1), arch.n_layer, attn, weights, kv, elements, active, moe,
    )  # fmt: skip


def _share(raw: dict[str, Any], cores: Any) -> float | None:
    measured = raw.get("compute_cores")
    if not measured or not cores:
        return None
    return min(float(measured) / float(cores), 1.0)


def old_cpu_build(raw: dict[str, Any]) -> bool:
    """A build before llama.cpp's CPU kernels took their current shape: the run-time
    repacking of Q4_0/IQ4_NL (ggml-org/llama.cpp#9921, build 4093, Nov 2024) and, with
    it, the threadpool and the AVX2/AVX-512 K-quant dot products of late 2024. Such
    prompt rows get a fitted era factor of their own (decode rows none: DECODE_ERA); the
    engine plans for current builds."""
    m = re.search(r"\((\d{3,5})\)", str(raw.get("build") or ""))
    if m:
        return int(m.group(1)) < 4093
    date = str(raw.get("date") or "")
    return bool(date) and date < "2024-11"


def load_inputs() -> tuple[list[Row], list[str]]:
    perf = json.loads(PERF_PATH.read_text())
    return build_rows(perf, load_gpu_db())
