"""The KV comparison compares like for like: every path at the plan's recommended
quantization, the pairs the engine runs most useful first, with their measured quality
cost and what is known of their speed; its chart names that quantization and places its
line labels clear of each other and of the curves."""

from __future__ import annotations

from itertools import combinations, pairwise

import pytest

from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.perf import load_perf
from rigspark_gui.catalog.quality import load_quality
from rigspark_gui.core.chart_spec import kv_chart_types, kv_memory_chart, place_line_labels
from rigspark_gui.core.model import KvCacheType as K
from rigspark_gui.core.plan import PathName, kv_comparison, plan
from rigspark_gui.core.plan.planner import COMMON_KV_PAIRS
from rigspark_gui.core.settings import Backend, GpuBackend, PlanSettings
from rigspark_gui.formats.jsonable import jsonable


@pytest.fixture(scope="module")
def llama70b():
    return load_catalog().find("llama-3.3-70b-instruct").to_spec()


def _plan(spec, rig, **settings):
    s = PlanSettings(context=32768, **settings)
    return plan(spec, rig, s, load_perf(), kv_pairs="all", kv_kld=load_quality().kv_kld)


def test_every_path_is_held_to_the_recommended_quantization(llama70b, rig2x3090) -> None:
    p = _plan(llama70b, rig2x3090)
    quant = next(x.quant for x in p.paths if x.path is p.recommended)
    assert {lim.quant for row in p.kv_comparison for lim in row.limits} == {quant}
    for row in p.kv_comparison:
        by_path = {lim.path: lim.max_context for lim in row.limits}
        # two GPUs hold at least what one does at the same quantization
        assert by_path[PathName.MULTI_GPU] >= by_path[PathName.GPU], (row.kv_k, row.kv_v)


def test_the_useful_pairs_come_first_and_f32_last(llama70b, rig2x3090) -> None:
    rows = _plan(llama70b, rig2x3090).kv_comparison
    pairs = [(r.kv_k, r.kv_v) for r in rows]
    assert len(pairs) == 81 and len(set(pairs)) == 81
    assert pairs[: len(COMMON_KV_PAIRS)] == list(COMMON_KV_PAIRS)
    assert pairs[:3] == [(K.F16, K.F16), (K.Q8_0, K.Q8_0), (K.Q4_0, K.Q4_0)]
    with_f32 = [i for i, pair in enumerate(pairs) if K.F32 in pair]
    assert with_f32 == list(range(81 - 17, 81))


def test_an_engine_is_compared_on_what_it_runs(llama70b, rig2x3090) -> None:
    rows = _plan(llama70b, rig2x3090, backend=Backend.OLLAMA).kv_comparison
    assert [(r.kv_k, r.kv_v) for r in rows] == [(K.F16, K.F16), (K.Q8_0, K.Q8_0), (K.Q4_0, K.Q4_0)]
    s = PlanSettings(backend=Backend.OLLAMA)
    assert K.Q5_0 not in kv_chart_types(s) and K.Q8_0 in kv_chart_types(s)


def test_quality_and_speed_are_said_where_known(llama70b, rig2x3090) -> None:
    rows = {(r.kv_k, r.kv_v): r for r in _plan(llama70b, rig2x3090).kv_comparison}
    assert rows[(K.F16, K.F16)].kv_kld == 0.0
    assert rows[(K.Q8_0, K.Q8_0)].kv_kld == pytest.approx(0.00098)
    assert rows[(K.Q4_1, K.Q4_1)].kv_kld is None  # not measured, and not guessed
    # NVIDIA with CUDA: a standard b11434 build compiles the decode kernels of K = V
    # f16/bf16/q8_0/q4_0 (ggml/CMakeLists.txt GGML_CUDA_FA_QUANTS); other pairs of its
    # types convert K and V to f16 first, and iq4_nl has no CUDA flash attention at all
    assert rows[(K.Q8_0, K.Q8_0)].speed_note == "" and rows[(K.Q8_0, K.Q8_0)].advised
    assert rows[(K.Q8_0, K.Q8_0)].fa_where == "native"
    mixed = rows[(K.F16, K.Q8_0)]
    assert mixed.fa_where == "gpu-f16" and not mixed.advised
    assert "GGML_CUDA_FA_QUANTS" in rows[(K.Q5_0, K.Q5_0)].speed_note
    iq4 = rows[(K.IQ4_NL, K.IQ4_NL)]
    assert iq4.fa_where == "cpu" and "runs on the CPU" in iq4.speed_note
    vulkan = _plan(llama70b, rig2x3090, gpu_backend=GpuBackend.VULKAN).kv_comparison
    assert all(r.speed_note == "" for r in vulkan if K.BF16 not in (r.kv_k, r.kv_v))
    # Vulkan pairs bf16 only with bf16 (ggml_backend_vk_device_supports_op)
    mixed_bf16 = [r for r in vulkan if (r.kv_k is K.BF16) != (r.kv_v is K.BF16)]
    assert {r.fa_where for r in mixed_bf16 if r.flash_attn} == {"cpu"}
    assert {r.fa_where for r in mixed_bf16 if not r.flash_attn} == {""}  # off: no matter


def test_without_measurements_no_quality_is_claimed(llama8b, rig2x3090, perf) -> None:
    p = plan(llama8b, rig2x3090, PlanSettings(), perf, kv_pairs="common")
    assert all(r.kv_kld is None for r in p.kv_comparison)
    rows = kv_comparison(llama8b, rig2x3090, PlanSettings(), p.paths, recommended=p.recommended)
    assert rows == p.kv_comparison


def test_the_json_carries_the_new_fields(llama70b, rig2x3090) -> None:
    data = jsonable(_plan(llama70b, rig2x3090))
    row = data["kv_comparison"][1]
    assert set(row) == {
        "kv_k", "kv_v", "flash_attn", "bytes_per_token", "kv_bytes", "limits", "kv_kld",
        "speed_note", "fa_where", "advised", "state_bytes",
    }  # fmt: skip
    assert set(row["limits"][0]) == {"path", "quant", "max_context"}


def test_the_chart_names_its_quantization(llama70b, rig2x3090) -> None:
    p = _plan(llama70b, rig2x3090)
    quant = next(x.quant for x in p.paths if x.path is p.recommended)
    chart = kv_memory_chart(llama70b, p, kv_chart_types(p.settings))
    assert chart.quant == quant and quant in chart.title


def _boxes(lines, widths, height, where):
    return [
        (x, y if above else y - height, x + w, (y + height) if above else y)
        for y, w, (x, above) in zip(lines, widths, where, strict=True)
    ]


def test_line_labels_stay_clear_of_each_other_and_the_curves() -> None:
    lines = (0.10, 0.33, 0.45, 0.90)  # two lines closer than a label is tall
    widths = (0.17, 0.22, 0.25, 0.17)
    height = 0.14
    flat = ((0.0, 0.12), (0.5, 0.16), (1.0, 0.95))  # under the lowest line, then rising
    where = place_line_labels(lines, widths, height, (flat,))
    boxes = _boxes(lines, widths, height, where)
    for a, b in combinations(boxes, 2):
        assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)
    for box in boxes:
        assert min(box[0], box[1]) >= 0.0 and max(box[2], box[3]) <= 1.0
        for (x0, y0), (x1, y1) in pairwise(flat):
            for i in range(41):
                t = i / 40
                x, y = x0 + (x1 - x0) * t, y0 + (y1 - y0) * t
                assert not (box[0] <= x <= box[2] and box[1] <= y <= box[3]), (box, x, y)
