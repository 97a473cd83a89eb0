"""GGUF import: geometry, exact tensor bytes, split files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import gguf
import pytest
from importer_helpers import (
    Dims,
    T,
    Written,
    decoder_kv,
    decoder_tensors,
    deepseek2_kv,
    deepseek2_tensors,
    write_gguf,
)

from rigspark_gui.catalog.gguf_import import FILE_TYPE_LABELS, import_gguf, swa_period
from rigspark_gui.core.errors import ModelImportError
from rigspark_gui.core.model.ggml_types import tensor_bytes
from rigspark_gui.core.model.model_spec import ModelSpec, TensorGroup


def check_tensors(spec: ModelSpec, written: Written) -> None:
    """Every tensor is there with the writer's byte count, type and ggml shape."""
    assert spec.tensors is not None
    by_name = {t.name: t for t in spec.tensors}
    assert set(by_name) == set(written.tensor_bytes)
    for name, n_bytes in written.tensor_bytes.items():
        t = by_name[name]
        assert t.n_bytes == n_bytes, name
        assert t.n_bytes == tensor_bytes(t.type, t.shape), name
        assert t.type == written.tensor_types[name]
        assert t.shape == written.tensor_shapes[name]
        assert t.expert == ("_exps" in name)
        if t.group is TensorGroup.BLOCK:
            assert t.layer is not None and name.startswith(f"blk.{t.layer}.")
        else:
            assert t.layer is None


def test_llama_gqa_untied_k_quants(tmp_path: Path) -> None:
    d = Dims()
    kv = decoder_kv("llama", d, **{"general.file_type": 15})
    tensors = decoder_tensors(d, wtype="Q4_K", embd_type="Q6_K", out_type="Q8_0", ffn_type="Q5_K")
    written = write_gguf(tmp_path / "llama-tiny.gguf", "llama", kv, tensors)
    spec = import_gguf(written.path)

    g = spec.geometry
    assert g.architecture == "llama"
    assert (g.n_layer, g.n_embd, g.n_head, g.n_head_kv) == (2, 256, 4, 2)
    assert (g.head_dim_k, g.head_dim_v, g.n_ff, g.n_vocab) == (64, 64, 512, 64)
    assert g.context_length == 8192
    assert not g.tied_embeddings
    assert g.n_head_kv_per_layer is None
    assert g.sliding_window is None and g.swa_pattern is None
    assert not g.is_moe and not g.is_mla
    check_tensors(spec, written)
    assert spec.file_quant == "Q4_K_M"
    assert spec.available_quants == ("Q4_K_M",)
    assert spec.id == "file:llama-tiny"
    assert spec.name == "Tiny llama"
    assert spec.imported and spec.source == str(written.path)
    groups = {t.name: t.group for t in spec.tensors or ()}
    assert groups["token_embd.weight"] is TensorGroup.INPUT
    assert groups["output.weight"] is TensorGroup.OUTPUT
    assert groups["output_norm.weight"] is TensorGroup.OUTPUT
    assert groups["blk.1.attn_q.weight"] is TensorGroup.BLOCK
    assert sum(t.n_bytes for t in spec.tensors or ()) == sum(written.tensor_bytes.values())


def test_qwen2_tied_and_dominant_type(tmp_path: Path) -> None:
    d = Dims(n_layer=3, n_head_kv=1)
    tensors = decoder_tensors(d, tied=True, wtype="F16", embd_type="Q4_0", ffn_type="Q8_0")
    written = write_gguf(tmp_path / "qwen.gguf", "qwen2", decoder_kv("qwen2", d), tensors)
    spec = import_gguf(written.path)
    assert spec.geometry.tied_embeddings
    assert spec.geometry.architecture == "qwen2"
    check_tensors(spec, written)
    weight: Counter[str] = Counter()
    for name, n in written.tensor_bytes.items():
        weight[written.tensor_types[name]] += n
    assert spec.file_quant == weight.most_common(1)[0][0] == "Q8_0"


def test_vocab_from_key_or_embedding(tmp_path: Path) -> None:
    d = Dims()
    kv = decoder_kv("llama", d, **{"llama.vocab_size": 64})
    del kv["tokenizer.ggml.tokens"]
    spec = import_gguf(write_gguf(tmp_path / "a.gguf", "llama", kv, decoder_tensors(d)).path)
    assert spec.geometry.n_vocab == 64
    del kv["llama.vocab_size"]
    spec = import_gguf(write_gguf(tmp_path / "b.gguf", "llama", kv, decoder_tensors(d)).path)
    assert spec.geometry.n_vocab == 64  # from token_embd.weight's ne[1]


def test_head_dims_other_than_embd_over_heads(tmp_path: Path) -> None:
    d = Dims(head_dim=128)  # 4 heads x 128 = 512 != 256
    written = write_gguf(tmp_path / "m.gguf", "qwen3", decoder_kv("qwen3", d), decoder_tensors(d))
    g = import_gguf(written.path).geometry
    assert (g.head_dim_k, g.head_dim_v) == (128, 128)


def test_per_layer_kv_heads_and_ff(tmp_path: Path) -> None:
    d = Dims(n_layer=4, n_head_kv=[2, 1, 2, 1])
    kv = decoder_kv("llama", d, **{"llama.feed_forward_length": [512, 512, 256, 512]})
    written = write_gguf(tmp_path / "m.gguf", "llama", kv, decoder_tensors(d))
    g = import_gguf(written.path).geometry
    assert g.n_head_kv_per_layer == (2, 1, 2, 1)
    assert g.n_head_kv == 2
    assert [g.kv_heads(i) for i in range(4)] == [2, 1, 2, 1]
    assert g.n_ff == 512


def test_per_layer_array_of_wrong_length(tmp_path: Path) -> None:
    d = Dims(n_layer=2)
    kv = decoder_kv("llama", d, **{"llama.attention.head_count_kv": [2, 2, 2]})
    written = write_gguf(tmp_path / "m.gguf", "llama", kv, decoder_tensors(d))
    with pytest.raises(ModelImportError, match="head_count_kv"):
        import_gguf(written.path)


def test_gemma2_sliding_window(tmp_path: Path) -> None:
    d = Dims(n_layer=4, n_head_kv=4)
    kv = decoder_kv("gemma2", d, **{"gemma2.attention.sliding_window": 4096})
    written = write_gguf(tmp_path / "g2.gguf", "gemma2", kv, decoder_tensors(d, tied=True))
    g = import_gguf(written.path).geometry
    assert (g.sliding_window, g.swa_pattern) == (4096, 2)
    assert [g.is_sliding(i) for i in range(4)] == [True, False, True, False]
    assert g.tied_embeddings
    # llama.cpp presets gemma2's window when the key is absent
    del kv["gemma2.attention.sliding_window"]
    written = write_gguf(tmp_path / "g2b.gguf", "gemma2", kv, decoder_tensors(d, tied=True))
    assert import_gguf(written.path).geometry.sliding_window == 4096


def test_gemma3_pattern_default_int_and_flags(tmp_path: Path) -> None:
    d = Dims(n_layer=12)
    base = decoder_kv("gemma3", d, **{"gemma3.attention.sliding_window": 1024})
    tensors = decoder_tensors(d, tied=True)
    g = import_gguf(write_gguf(tmp_path / "a.gguf", "gemma3", base, tensors).path).geometry
    assert (g.sliding_window, g.swa_pattern) == (1024, 6)
    assert [i for i in range(12) if not g.is_sliding(i)] == [5, 11]

    kv = base | {"gemma3.attention.sliding_window_pattern": 4}
    g = import_gguf(write_gguf(tmp_path / "b.gguf", "gemma3", kv, tensors).path).geometry
    assert g.swa_pattern == 4

    flags = [i % 3 < 2 for i in range(12)]
    kv = base | {"gemma3.attention.sliding_window_pattern": flags}
    g = import_gguf(write_gguf(tmp_path / "c.gguf", "gemma3", kv, tensors).path).geometry
    assert g.swa_pattern == 3
    assert [g.is_sliding(i) for i in range(12)] == flags

    kv = base | {"gemma3.attention.sliding_window_pattern": [True] * 12}
    g = import_gguf(write_gguf(tmp_path / "d.gguf", "gemma3", kv, tensors).path).geometry
    assert all(g.is_sliding(i) for i in range(12))

    irregular = [True, False, False, True] + [True] * 8
    kv = base | {"gemma3.attention.sliding_window_pattern": irregular}
    with pytest.raises(ModelImportError, match="periodic"):
        import_gguf(write_gguf(tmp_path / "e.gguf", "gemma3", kv, tensors).path)

    kv = dict(base)
    del kv["gemma3.attention.sliding_window"]
    with pytest.raises(ModelImportError, match=r"gemma3\.attention\.sliding_window"):
        import_gguf(write_gguf(tmp_path / "f.gguf", "gemma3", kv, tensors).path)


def test_swa_period_helper() -> None:
    assert swa_period([True, False] * 3) == 2
    assert swa_period([False] * 4) == 1
    assert swa_period([True] * 4) == 5
    assert swa_period([False, True]) is None


@pytest.mark.parametrize(
    ("arch", "extra", "expected"),
    [
        ("cohere2", {"cohere2.attention.sliding_window": 4096}, (4096, 4)),
        ("gpt-oss", {"gpt-oss.attention.sliding_window": 128}, (128, 2)),
        ("phi3", {"phi3.attention.sliding_window": 2047}, (None, None)),  # disabled in llama.cpp
        ("qwen2", {"qwen2.attention.sliding_window": 4096}, (None, None)),
        ("starcoder2", {"starcoder2.attention.sliding_window": 4096}, (None, None)),
    ],
)
def test_sliding_window_per_architecture(
    tmp_path: Path, arch: str, extra: dict[str, Any], expected: tuple[int | None, int | None]
) -> None:
    d = Dims(n_layer=4)
    written = write_gguf(
        tmp_path / "m.gguf", arch, decoder_kv(arch, d, **extra), decoder_tensors(d)
    )
    g = import_gguf(written.path).geometry
    assert (g.sliding_window, g.swa_pattern) == expected


def test_mixtral_style_moe(tmp_path: Path) -> None:
    d = Dims()
    kv = decoder_kv("llama", d, **{"llama.expert_count": 4, "llama.expert_used_count": 2})
    tensors = decoder_tensors(d, wtype="Q4_0", n_expert=4, n_ff_exp=512, exp_type="Q4_K")
    written = write_gguf(tmp_path / "mixtral.gguf", "llama", kv, tensors)
    spec = import_gguf(written.path)
    g = spec.geometry
    assert (g.n_expert, g.n_expert_used, g.n_ff_expert, g.n_ff) == (4, 2, 512, 0)
    assert g.n_shared_expert == 0
    check_tensors(spec, written)
    experts = sorted(t.name for t in spec.tensors or () if t.expert)
    assert experts == sorted(
        f"blk.{i}.ffn_{k}_exps.weight" for i in range(2) for k in ("gate", "up", "down")
    )
    assert not any(t.expert for t in spec.tensors or () if "ffn_gate_inp" in t.name)


def test_qwen3moe_mxfp4(tmp_path: Path) -> None:
    d = Dims(head_dim=128)
    kv = decoder_kv(
        "qwen3moe",
        d,
        **{
            "qwen3moe.expert_count": 8,
            "qwen3moe.expert_used_count": 2,
            "qwen3moe.expert_feed_forward_length": 256,
            "general.file_type": 38,
        },
    )
    tensors = decoder_tensors(d, wtype="Q8_0", n_expert=8, n_ff_exp=256, exp_type="MXFP4")
    written = write_gguf(tmp_path / "q3.gguf", "qwen3moe", kv, tensors)
    spec = import_gguf(written.path)
    g = spec.geometry
    assert (g.n_expert, g.n_expert_used, g.n_ff_expert, g.n_ff) == (8, 2, 256, 0)
    assert spec.file_quant == "MXFP4_MOE"
    check_tensors(spec, written)


def test_deepseek2_mla(tmp_path: Path) -> None:
    tensors = deepseek2_tensors(2, 256, 4, q_lora=128, kv_lora=64, rope=32, nope=96, v=80)
    written = write_gguf(tmp_path / "ds.gguf", "deepseek2", deepseek2_kv(True), tensors)
    spec = import_gguf(written.path)
    g = spec.geometry
    assert g.is_mla
    assert (g.head_dim_k, g.head_dim_v) == (128, 80)
    assert (g.kv_lora_rank, g.q_lora_rank, g.rope_head_dim) == (64, 128, 32)
    assert g.n_head_kv == 4  # logical heads, as config.json has them
    assert (g.n_expert, g.n_expert_used, g.n_ff_expert) == (4, 2, 256)
    assert (g.n_shared_expert, g.n_ff_shared_expert) == (2, 512)
    assert g.n_dense_lead == 1 and g.n_ff == 512
    assert [g.is_moe_layer(i) for i in range(2)] == [False, True]
    assert g.context_length == 163840
    check_tensors(spec, written)


def test_deepseek2_without_mla_keys_caches_full_kv(tmp_path: Path) -> None:
    tensors = deepseek2_tensors(2, 256, 4, q_lora=128, kv_lora=64, rope=32, nope=96, v=80)
    written = write_gguf(tmp_path / "ds-old.gguf", "deepseek2", deepseek2_kv(False), tensors)
    g = import_gguf(written.path).geometry
    assert not g.is_mla
    assert (g.head_dim_k, g.head_dim_v, g.n_head_kv) == (128, 80, 4)


def test_glm4moe_nextn_layer_has_no_kv(tmp_path: Path) -> None:
    d = Dims(n_layer=3, n_head_kv=2)
    kv = decoder_kv(
        "glm4moe",
        d,
        **{
            "glm4moe.expert_count": 4,
            "glm4moe.expert_used_count": 2,
            "glm4moe.expert_feed_forward_length": 256,
            "glm4moe.leading_dense_block_count": 1,
            "glm4moe.nextn_predict_layers": 1,
        },
    )
    # one stray block past block_count: it must not become a layer
    tensors = decoder_tensors(
        d, n_expert=4, n_ff_exp=256, dense_layers=1, extra_layers=1, wtype="Q8_0"
    )
    written = write_gguf(tmp_path / "glm.gguf", "glm4moe", kv, tensors)
    spec = import_gguf(written.path)
    g = spec.geometry
    assert g.n_layer == 3 and g.n_layer_nextn == 1  # the MTP block: a layer slot
    assert g.n_head_kv_per_layer == (2, 2, 0)
    assert g.n_ff == 512 and g.n_dense_lead == 1
    # llama.cpp b11434 skips every tensor of the MTP block unless drafting with it
    # (TENSOR_SKIP in src/models/glm4-moe.cpp), and the stray block past it too
    names = {t.name for t in spec.tensors or ()}
    assert names == {n for n in written.tensor_bytes if not n.startswith(("blk.2.", "blk.3."))}
    assert all(t.layer is None or t.layer < 2 for t in spec.tensors or ())


def test_llama4_chunked_attention_and_interleaved_moe(tmp_path: Path) -> None:
    d = Dims(n_layer=4)
    kv = decoder_kv(
        "llama4",
        d,
        **{
            "llama4.expert_count": 4,
            "llama4.expert_used_count": 1,
            "llama4.expert_feed_forward_length": 256,
            "llama4.interleave_moe_layer_step": 2,
        },
    )
    tensors = decoder_tensors(d, n_expert=4, n_ff_exp=256)
    tensors += [T(f"blk.{i}.ffn_down_shexp.weight", (256, 256), "F16") for i in range(4)]
    g = import_gguf(write_gguf(tmp_path / "l4.gguf", "llama4", kv, tensors).path).geometry
    assert (g.sliding_window, g.swa_pattern) == (8192, 4)
    assert g.moe_every == 2 and g.n_ff == 512
    assert (g.n_shared_expert, g.n_ff_shared_expert) == (1, 256)
    assert [g.is_moe_layer(i) for i in range(4)] == [False, True, False, True]


def test_split_gguf(tmp_path: Path) -> None:
    d = Dims(n_layer=3)
    kv = decoder_kv("llama", d)
    tensors = decoder_tensors(d, wtype="Q4_K")
    (tmp_path / "whole").mkdir()
    whole = write_gguf(tmp_path / "whole" / "model.gguf", "llama", kv, tensors)
    split = write_gguf(tmp_path / "model.gguf", "llama", kv, tensors, split_max_tensors=12)
    assert len(split.paths) >= 3
    assert split.paths[1].name == f"model-00002-of-{len(split.paths):05d}.gguf"

    expected = import_gguf(whole.path)
    for part in split.paths:
        spec = import_gguf(part)
        assert spec.geometry == expected.geometry
        assert spec.tensors == expected.tensors
        assert spec.id == "file:model"
        assert spec.source == str(split.paths[0])
    check_tensors(import_gguf(split.paths[-1]), split)

    split.paths[1].unlink()
    with pytest.raises(ModelImportError, match=split.paths[1].name):
        import_gguf(split.paths[0])


def test_split_part_renamed_is_refused(tmp_path: Path) -> None:
    d = Dims(n_layer=2)
    split = write_gguf(
        tmp_path / "m.gguf",
        "llama",
        decoder_kv("llama", d),
        decoder_tensors(d),
        split_max_tensors=8,
    )
    lone = split.paths[0].rename(tmp_path / "renamed.gguf")
    with pytest.raises(ModelImportError, match="split model"):
        import_gguf(lone)


def test_big_endian_file(tmp_path: Path) -> None:
    d = Dims()
    le = write_gguf(tmp_path / "le.gguf", "llama", decoder_kv("llama", d), decoder_tensors(d))
    be = write_gguf(
        tmp_path / "be.gguf",
        "llama",
        decoder_kv("llama", d),
        decoder_tensors(d),
        endian=gguf.GGUFEndian.BIG,
    )
    assert import_gguf(be.path).geometry == import_gguf(le.path).geometry


@pytest.mark.parametrize("arch", ["mamba", "rwkv7", "jamba"])
def test_recurrent_architectures_are_refused(tmp_path: Path, arch: str) -> None:
    d = Dims()
    written = write_gguf(tmp_path / "r.gguf", arch, decoder_kv(arch, d), decoder_tensors(d))
    with pytest.raises(ModelImportError, match=f"not supported yet: {arch}"):
        import_gguf(written.path)


def test_hybrid_detected_by_its_tensors(tmp_path: Path) -> None:
    d = Dims()
    tensors = [*decoder_tensors(d), T("blk.0.ssm_a", (16, 256))]
    written = write_gguf(tmp_path / "h.gguf", "newhybrid", decoder_kv("newhybrid", d), tensors)
    with pytest.raises(ModelImportError, match="not supported yet: newhybrid"):
        import_gguf(written.path)


@pytest.mark.parametrize(
    ("drop", "set_", "match"),
    [
        ("llama.block_count", {}, r"missing metadata llama\.block_count"),
        ("llama.context_length", {}, r"llama\.context_length"),
        ("llama.attention.head_count", {}, r"llama\.attention\.head_count"),
        (None, {"llama.block_count": "two"}, r"llama\.block_count must be an integer"),
        (None, {"llama.block_count": 100000}, r"block_count = 100000 is out of range"),
        (None, {"llama.expert_count": 4}, "n_expert_used"),
    ],
)
def test_bad_metadata_names_the_key(
    tmp_path: Path, drop: str | None, set_: dict[str, Any], match: str
) -> None:
    d = Dims()
    kv = decoder_kv("llama", d) | set_
    if drop:
        del kv[drop]
    written = write_gguf(tmp_path / "m.gguf", "llama", kv, decoder_tensors(d))
    with pytest.raises(ModelImportError, match=match) as err:
        import_gguf(written.path)
    assert "m.gguf" in str(err.value) and "\n" not in str(err.value)


def test_missing_architecture(tmp_path: Path) -> None:
    d = Dims()
    written = write_gguf(tmp_path / "m.gguf", "", decoder_kv("x", d), decoder_tensors(d))
    with pytest.raises(ModelImportError, match=r"general\.architecture"):
        import_gguf(written.path)


def test_newest_block_types_are_sized(tmp_path: Path) -> None:
    d = Dims()
    tensors = [*decoder_tensors(d), T("blk.0.extra.weight", (256, 4), "NVFP4")]
    written = write_gguf(tmp_path / "m.gguf", "llama", decoder_kv("llama", d), tensors)
    extra = next(t for t in import_gguf(written.path).tensors or () if "extra" in t.name)
    assert extra.n_bytes == 256 * 4 // 64 * 36


def test_file_type_labels_follow_llama_cpp() -> None:
    for member in gguf.LlamaFileType:
        label = FILE_TYPE_LABELS.get(int(member))
        if label is not None:
            assert member.name.endswith(label), (member, label)
    assert FILE_TYPE_LABELS[15] == "Q4_K_M" and FILE_TYPE_LABELS[38] == "MXFP4_MOE"


@pytest.mark.parametrize("endian", [gguf.GGUFEndian.LITTLE, gguf.GGUFEndian.BIG])
def test_long_tokenizer_arrays_give_the_vocabulary(tmp_path: Path, endian: gguf.GGUFEndian) -> None:
    d = Dims(n_vocab=64)
    kv = decoder_kv("llama", d)
    kv["tokenizer.ggml.tokens"] = [f"token-{i}" for i in range(5000)]
    kv["tokenizer.ggml.merges"] = [f"a{i} b{i}" for i in range(4500)]
    kv["tokenizer.ggml.token_type"] = [1] * 5000
    kv["general.file_type"] = 1
    written = write_gguf(tmp_path / "v.gguf", "llama", kv, decoder_tensors(d), endian=endian)
    spec = import_gguf(written.path)
    assert spec.geometry.n_vocab == 5000
    assert spec.file_quant == "F16"  # metadata after the long arrays still read correctly
    check_tensors(spec, written)
