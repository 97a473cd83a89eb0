"""Every name a user types resolves to the model they mean (catalog/resolve.py)."""

from __future__ import annotations

import pytest

from rigspark_gui.catalog.models import load_catalog, resolve_model
from rigspark_gui.catalog.resolve import quant_in, resolve, words
from rigspark_gui.core.errors import CatalogError


@pytest.fixture(scope="module")
def specs():
    return load_catalog().specs()


@pytest.mark.parametrize(
    ("typed", "model_id", "quant"),
    [
        # catalog ids and names, case, spaces and punctuation ignored
        ("llama-3.1-8b-instruct", "llama-3.1-8b-instruct", None),
        ("Llama 3.1 8B Instruct", "llama-3.1-8b-instruct", None),
        ("llama 3.1 8b", "llama-3.1-8b-instruct", None),
        ("LLAMA_3.1__8B", "llama-3.1-8b-instruct", None),
        ("llama-3.1-8b", "llama-3.1-8b-instruct", None),
        ("qwen3 32", "qwen3-32b", None),
        # Ollama tags, with their default sizes and quantization suffixes
        ("llama3.1:8b", "llama-3.1-8b-instruct", None),
        ("llama3.1", "llama-3.1-8b-instruct", None),
        ("llama3.1:latest", "llama-3.1-8b-instruct", None),
        ("llama3.1:8b-instruct-q4_K_M", "llama-3.1-8b-instruct", "Q4_K_M"),
        ("llama3.3", "llama-3.3-70b-instruct", None),
        ("qwen3:30b", "qwen3-30b-a3b", None),
        ("qwen3:30b-a3b", "qwen3-30b-a3b", None),
        ("qwen3", "qwen3-8b", None),
        ("gpt-oss:20b", "gpt-oss-20b", None),
        ("gpt-oss:120b", "gpt-oss-120b", None),
        ("gemma3:27b", "gemma-3-27b-it", None),
        ("mixtral:8x22b", "mixtral-8x22b-instruct-v0.1", None),
        # tags as Ollama's library serves them today (data/models.json "ollama")
        ("deepseek-r1:671b", "deepseek-r1-0528", None),
        ("deepseek-r1:8b", "deepseek-r1-0528-qwen3-8b", None),
        ("deepseek-r1:latest", "deepseek-r1-0528-qwen3-8b", None),
        ("deepseek-r1:8b-0528-qwen3-q4_K_M", "deepseek-r1-0528-qwen3-8b", "Q4_K_M"),
        ("gemma3:270m", "gemma-3-270m-it", None),
        ("glm-4.7-flash", "glm-4.7-flash", None),
        ("glm-4.7-flash:q4_K_M", "glm-4.7-flash", "Q4_K_M"),
        ("ministral-3:14b", "ministral-3-14b-instruct-2512", None),
        ("qwen3-vl:4b", "qwen3-vl-4b-instruct", None),
        ("olmo-3:7b-think", "olmo-3-7b-think", None),
        ("gpt-oss-safeguard:120b", "gpt-oss-safeguard-120b", None),
        ("zai-org/GLM-4.7-Flash", "glm-4.7-flash", None),
        ("moonshotai/Kimi-K2.5", "kimi-k2.5", None),
        ("mistral-nemo:12b", "mistral-nemo-instruct-2407", None),
        ("phi4:14b", "phi-4", None),
        ("mistral", "mistral-7b-instruct-v0.3", None),
        # Hugging Face ids: base repos, GGUF repos and llama.cpp's -hf repo:QUANT
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b-instruct", None),
        ("hf:meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b-instruct", None),
        ("https://huggingface.co/Qwen/Qwen3-8B", "qwen3-8b", None),
        ("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M", "llama-3.1-8b-instruct", "Q4_K_M"),
        ("unsloth/Qwen3-30B-A3B-GGUF:IQ4_XS", "qwen3-30b-a3b", "IQ4_XS"),
        ("unsloth/gpt-oss-20b-GGUF:UD-Q4_K_XL", "gpt-oss-20b", "UD-Q4_K_XL"),
        # LM Studio keys and file names
        ("lmstudio-community/Qwen3-30B-A3B-GGUF", "qwen3-30b-a3b", None),
        ("qwen/qwen3-30b-a3b", "qwen3-30b-a3b", None),
        ("Meta-Llama-3.1-8B-Instruct-Q5_K_S.gguf", "llama-3.1-8b-instruct", "Q5_K_S"),
    ],
)
def test_each_form_resolves(specs, typed: str, model_id: str, quant: str | None) -> None:
    found = resolve(specs, typed)
    assert (found.spec.id, found.quant) == (model_id, quant)


def test_ambiguity_lists_three_candidates_with_what_each_is(specs) -> None:
    with pytest.raises(CatalogError) as err:
        resolve(specs, "phi3.5")
    text = str(err.value)
    assert "could be several models" in text and "add the size" in text
    assert "phi-3.5-mini-instruct (Phi-3.5 Mini Instruct, 3.8B)" in text
    assert "phi-3.5-moe-instruct" in text


def test_unknown_names_the_closest_three(specs) -> None:
    with pytest.raises(CatalogError) as err:
        resolve(specs, "qwen9:77b")
    text = str(err.value)
    assert text.startswith("unknown model 'qwen9:77b' (closest: ")
    assert text.count("B)") == 3


def test_a_size_nobody_has_never_offers_another_size(specs) -> None:
    with pytest.raises(CatalogError) as err:
        resolve(specs, "gemma3:500m")
    text = str(err.value)
    assert "no gemma 3 model of 500m" in text and "270m" in text and "27b" in text
    assert "closest" not in text  # no other size offered as if it were the one asked for


def test_the_tag_table_outranks_the_words(specs) -> None:
    # by words alone the Llama distill wins (fewer extra words); the library says 0528
    from rigspark_gui.catalog import resolve as module

    saved = dict(module._CATALOG_TAGS)
    try:
        module.set_catalog_tags({})
        assert resolve(specs, "deepseek-r1:8b").spec.id == "deepseek-r1-distill-llama-8b"
    finally:
        module.set_catalog_tags(saved)
    assert resolve(specs, "deepseek-r1:8b").spec.id == "deepseek-r1-0528-qwen3-8b"


def test_a_dynamic_quantization_says_how_it_can_be_planned(specs) -> None:
    from rigspark_gui.catalog.resolve import dynamic_quant_message

    found = resolve(specs, "unsloth/Qwen3-30B-A3B-GGUF:UD-Q4_K_XL")
    assert found.quant == "UD-Q4_K_XL" and found.quant not in found.spec.available_quants
    text = dynamic_quant_message(found.quant, found.spec.id)
    assert "hf:unsloth/REPO-GGUF:UD-Q4_K_XL" in text and "--quant Q4_K_M" in text
    assert "--quant Q2_K" in dynamic_quant_message("UD-Q2_K_XL", "x")
    assert "--quant IQ1_S" in dynamic_quant_message("UD-IQ1_S", "x")


@pytest.mark.parametrize("typed", ["", "   ", ":latest", "gguf"])
def test_nothing_to_go_on_is_a_clear_error(specs, typed: str) -> None:
    with pytest.raises(CatalogError):
        resolve(specs, typed)


def test_words_and_quantizations() -> None:
    assert words("llama3.1:8b") == ("llama", "3.1", "8b")
    assert words("Qwen2.5-Coder-7B") == ("qwen", "2.5", "coder", "7b")
    assert words("deepseek-r1") == ("deepseek", "r1")  # a single letter stays on
    assert quant_in("x-q4_k_m.gguf") == "Q4_K_M"
    assert quant_in("model:FP16") == "F16"
    assert quant_in("llama3.1:8b") is None


def test_an_exact_id_reads_only_its_entry(tmp_path) -> None:
    import json

    from rigspark_gui.resources import data_file

    raw = json.loads(data_file("models.json").read_text(encoding="utf-8"))
    good = raw["models"][0]
    raw["models"] = [good, {"id": "broken"}]  # a bad entry elsewhere costs nothing
    path = tmp_path / "models.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    assert resolve_model(good["id"], path).spec.id == good["id"]
    assert resolve_model("llama 3.1 8b").spec.id == "llama-3.1-8b-instruct"
