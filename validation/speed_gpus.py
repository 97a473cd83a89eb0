"""The GPUs data/gpus.json holds for llama.cpp's performance threads (Apple M-series
#4167, CUDA #15013, Vulkan #10879, ROCm #15021 in ggml-org/llama.cpp's discussions) that
it lacked before: each with its memory, bandwidth and compute as its vendor's spec sheet
gives them (the source is in the entry), and the held-out decode error of the published
rows that now resolve to them.

    .venv/bin/python validation/speed_gpus.py            # markdown tables for the doc
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from validation.speed_fit import quantile  # noqa: E402
from validation.speed_rows import GPUS_PATH, norm_name  # noqa: E402

SCOREBOARD_GPUS: tuple[str, ...] = (
    "Intel(R) Arc(TM) A770M Graphics",
    "Intel(R) Arc(TM) A730M Graphics",
    "Intel(R) Arc(TM) A550M Graphics",
    "Intel(R) Arc(TM) A370M Graphics",
    "Intel(R) Arc(TM) A310 Graphics",
    "Intel(R) Arc(TM) Pro B50 Graphics",
    "Intel(R) Arc(TM) Pro B60 Graphics",
    "Intel(R) Arc(TM) 140V GPU (16GB)",
    "Intel(R) Arc(TM) 130V GPU (16GB)",
    "Intel(R) Data Center GPU Max 1100",
    "Apple M5",
    "Apple M5 Pro",
    "Apple M5 Max",
    "AMD Radeon RX 580",
    "AMD Radeon RX 570",
    "AMD Radeon RX 5700 XT",
    "AMD Radeon RX 5700",
    "AMD Radeon RX Vega 64",
    "AMD Radeon RX Vega 56",
    "AMD Radeon Pro VII",
    "AMD Radeon RX 6750 XT",
    "AMD Radeon RX 6700",
    "AMD Radeon RX 6650 XT",
    "AMD Radeon RX 6500 XT",
    "AMD Radeon RX 9060 XT",
    "AMD Radeon AI PRO R9700",
    "AMD Radeon PRO W7800",
    "AMD Radeon PRO W6800",
    "AMD Instinct MI300A",
    "NVIDIA GeForce GTX 1080",
    "NVIDIA GeForce GTX 1070 Ti",
    "NVIDIA GeForce GTX 1060 6GB",
    "NVIDIA GeForce GTX 1050 Ti",
    "NVIDIA GeForce GTX 1650",
    "NVIDIA GeForce GTX 1650 SUPER",
    "NVIDIA TITAN Xp",
    "NVIDIA GeForce RTX 4090 Laptop GPU",
    "NVIDIA GeForce RTX 4080 Laptop GPU",
    "NVIDIA GeForce RTX 4070 Laptop GPU",
    "NVIDIA GeForce RTX 4060 Laptop GPU",
    "NVIDIA GeForce RTX 4050 Laptop GPU",
    "NVIDIA GeForce RTX 3070 Laptop GPU",
    "NVIDIA GeForce RTX 3060 Laptop GPU",
    "NVIDIA GeForce RTX 5090 Laptop GPU",
    "NVIDIA GeForce RTX 4090 D",
    "NVIDIA RTX A4500",
    "NVIDIA RTX 2000 Ada Generation",
    "NVIDIA RTX 4500 Ada Generation",
    "NVIDIA RTX PRO 4000 Blackwell",
    "NVIDIA RTX PRO 4500 Blackwell",
    "NVIDIA RTX PRO 5000 Blackwell",
    "Quadro RTX 8000",
    "Quadro RTX 6000",
    "Quadro P6000",
    "NVIDIA A30",
    "NVIDIA L20",
    "Tesla V100S-PCIE-32GB",
)


def entries() -> list[dict[str, object]]:
    by_name = {g["name"]: g for g in json.loads(GPUS_PATH.read_text())["gpus"]}
    return [by_name[n] for n in SCOREBOARD_GPUS]


def table() -> list[str]:
    out = ["| GPU | vendor | memory | bandwidth | FP16 dense | source |",
           "|---|---|---|---|---|---|"]  # fmt: skip
    for g in entries():
        fp16 = f"{g['fp16_tflops']:g} TFLOPS" if g.get("fp16_tflops") else "unknown"
        src = str(g["source"]).split("; fp16_tflops")[0]
        out.append(
            f"| {g['name']} | {g['vendor']} | {int(g['memory_bytes']) / (1 << 30):g} GiB | "  # type: ignore[call-overload]
            f"{g['memory_bandwidth_gbps']:g} GB/s | {fp16} | {src} |"
        )
    return out


def held_out_rows() -> list[str]:
    from validation.speed_report import calibrate

    keys = {norm_name(n) for n in SCOREBOARD_GPUS}
    cal = calibrate()
    out = [
        "| device | backend | held-out tg rows | median \\|error\\| | worst |",
        "|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], list[float]] = {}
    for h in cal.held:
        if h.row.kind == "tg" and not h.row.is_cpu and h.ratio and h.row.device_key in keys:
            groups.setdefault((h.row.raw["device"], h.row.backend), []).append(1 / h.ratio - 1)
    for (dev, backend), errs in sorted(groups.items()):
        worst = max(errs, key=abs)
        med = statistics.median(abs(e) for e in errs)
        out.append(f"| {dev} | {backend} | {len(errs)} | {med:.1%} | {worst:+.0%} |")
    all_errs = [abs(e) for v in groups.values() for e in v]
    if all_errs:
        out.append(
            f"| all | | {len(all_errs)} | {statistics.median(all_errs):.1%} | "
            f"p90 {quantile(all_errs, 0.9):.0%} |"
        )
    return out


def main() -> int:
    print("\n".join(table()))
    print()
    print("\n".join(held_out_rows()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
