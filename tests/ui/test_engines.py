"""The engine as a first-class choice: picking one offers only what it can run, says
what it changed, and the Layers tab's launch command follows."""

from __future__ import annotations

import pytest

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.model.ggml_types import KvCacheType
from rigspark_gui.core.plan.paths import PathName
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.settings import Backend, PlanSettings, make_settings
from tests.conftest import LLAMA_31_8B, simple_speed_model, spec_of


@pytest.fixture
def window(window):
    window.session.set_model("llama-3.1-8b-instruct")
    return window


def _choose(window, label: str) -> None:
    combo = window.controls.backend
    combo.setCurrentIndex(combo.findText(label))


def test_every_engine_is_in_one_list(window) -> None:
    combo = window.controls.backend
    labels = [combo.itemText(i) for i in range(combo.count())]
    assert labels == ["llama.cpp", "Ollama", "LM Studio", "koboldcpp", "vLLM", "SGLang", "MLX"]


def test_ollama_offers_only_its_kv_types_and_fixes_mixed_ones(qtbot, window) -> None:
    window.session.update_settings(kv_k=KvCacheType.F32, kv_v=KvCacheType.Q8_0, flash_attn=True)
    messages: list[str] = []
    window.controls.message.connect(messages.append)
    _choose(window, "Ollama")

    s = window.session.settings
    assert s.backend is Backend.OLLAMA and s.kv_k == s.kv_v == KvCacheType.F16
    assert messages and "one KV type for K and V" in messages[-1]
    c = window.controls
    hidden = {c.kv_k.itemData(i) for i in range(c.kv_k.count()) if c.kv_k.view().isRowHidden(i)}
    assert hidden == {"f32", "bf16", "q5_1", "q5_0", "q4_1", "iq4_nl", "fp8"}
    assert c.kv_link.isChecked() and not c.kv_link.isEnabled() and not c.kv_v.isEnabled()
    assert window.layers_tab.engine_combo.currentData() == "ollama"


def test_vllm_gets_its_own_cache_and_gpu_paths_only(qtbot, window) -> None:
    window.session.update_settings(kv_k=KvCacheType.Q8_0, kv_v=KvCacheType.Q8_0, flash_attn=True)
    _choose(window, "vLLM")
    s = window.session.settings
    assert s.backend is Backend.VLLM and s.kv_k in Backend.VLLM.kv_types
    assert window.controls.backend.currentText() == "vLLM"  # no silent jump back
    paths = {p.path for p in window.session.plan.paths}
    assert paths <= {PathName.GPU, PathName.MULTI_GPU, PathName.UNIFIED}
    assert window.layers_tab.engine_combo.currentData() == "vllm"


def test_mlx_on_a_pc_says_why_where_it_is_chosen(qtbot, window) -> None:
    _choose(window, "MLX")
    assert window.problem.isVisible() or window.problem.isVisibleTo(window)
    assert "Apple silicon" in window.problem.text()


def test_the_engine_rules_hold_in_the_engine_itself() -> None:
    with pytest.raises(InvalidSettingsError, match="one KV type"):
        make_settings(backend="ollama", kv_k=KvCacheType.F32, kv_v=KvCacheType.Q8_0,
                      flash_attn=True)  # fmt: skip
    with pytest.raises(InvalidSettingsError, match="takes f16, q8_0, q4_0"):
        make_settings(backend="koboldcpp", kv_k=KvCacheType.Q5_1, kv_v=KvCacheType.Q5_1,
                      flash_attn=True)  # fmt: skip
    with pytest.raises(InvalidSettingsError, match="fp8"):
        make_settings(kv_k=KvCacheType.FP8, kv_v=KvCacheType.FP8)
    from rigspark_gui.core.rig import GIB, Cpu, Rig

    cpu_rig = Rig(ram_total_bytes=32 * GIB, cpu=Cpu(cores=8, memory_bandwidth_gbps=50.0))
    with pytest.raises(InvalidSettingsError, match="vLLM runs on GPUs"):
        plan(spec_of(LLAMA_31_8B), cpu_rig, PlanSettings(backend=Backend.VLLM),
             simple_speed_model())  # fmt: skip
