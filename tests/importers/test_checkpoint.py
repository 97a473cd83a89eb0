"""A native Hugging Face checkpoint as serving engines load it: its format from
config.json's quantization_config, its bytes from the safetensors index or the one-file
header, and the serving plan built on them; hostile headers give one clear line."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from rigspark_gui.catalog.hf_import import checkpoint_format, import_hf
from rigspark_gui.cli_speed import speed_model
from rigspark_gui.core.errors import ModelImportError
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import GIB, Gpu, Rig, Vendor
from rigspark_gui.core.settings import make_settings
from tests.importers.test_hf_import import CONFIGS, LLAMA, write_config

AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}


def _one_file(folder: Path, ends: list[int]) -> None:
    """A model.safetensors whose header lists tensors ending at `ends` (no tensor data:
    only the header is read)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    start = 0
    for i, end in enumerate(ends):
        header[f"t{i}"] = {"dtype": "BF16", "shape": [1], "data_offsets": [start, end]}
        start = end
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)


@pytest.mark.parametrize(
    ("qc", "fmt"),
    [
        (None, "BF16"),
        (AWQ, "AWQ"),
        ({"quant_method": "gptq", "bits": 4}, "GPTQ"),
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "FP8"),
        (
            {"quant_method": "compressed-tensors",
             "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "int"}}}},
            "INT8",
        ),
        (
            {"quant_method": "compressed-tensors",
             "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}}},
            "FP8",
        ),
    ],
)  # fmt: skip
def test_the_format_comes_from_the_config(qc: dict[str, object] | None, fmt: str) -> None:
    config = dict(CONFIGS[LLAMA], **({"quantization_config": qc} if qc else {}))
    assert checkpoint_format(config) == fmt


def test_an_awq_checkpoint_is_served_at_its_real_size(tmp_path: Path) -> None:
    folder = write_config(tmp_path, LLAMA, dict(CONFIGS[LLAMA], quantization_config=AWQ))
    real = int(5.73 * GIB)  # the folder's bytes win over the estimate (5.33 GiB)
    _one_file(folder, [real // 2, real])
    spec = import_hf(folder).spec
    assert spec.checkpoint is not None
    assert (spec.checkpoint.format, spec.checkpoint.total_bytes) == ("AWQ", real)
    gpu = Gpu(name="RTX 3090", vendor=Vendor.NVIDIA, memory_total_bytes=24 * GIB,
              bandwidth_gbps=936.2, fp16_tflops=71.0)  # fmt: skip
    rig = Rig(gpus=(gpu,), ram_total_bytes=64 * GIB)
    p = plan(spec, rig, make_settings(backend="vllm", context=8192), speed_model())
    sp = p.serving
    assert sp is not None and sp.format == "AWQ"  # what the folder holds, not Auto's pick
    rope = 131072 * 128 * 2
    assert sp.weights_bytes == pytest.approx(real + rope, rel=0.001)
    assert p.paths[0].file_bytes == real


def test_a_sharded_checkpoint_uses_its_index(tmp_path: Path) -> None:
    folder = write_config(tmp_path, LLAMA, CONFIGS[LLAMA])
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 16060522496}, "weight_map": {}})
    )
    spec = import_hf(folder).spec
    assert spec.checkpoint is not None and spec.checkpoint.total_bytes == 16060522496


@pytest.mark.parametrize(
    ("blob", "why"),
    [
        (b"\x01\x00", "truncated header"),
        (struct.pack("<Q", 1 << 40), "implausible header size"),
        (struct.pack("<Q", 4) + b"nope", "not valid JSON"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
        (struct.pack("<Q", 28) + b'{"w": {"data_offsets": [5]}}', "has no byte range"),
    ],
)
def test_hostile_headers_are_one_line(tmp_path: Path, blob: bytes, why: str) -> None:
    folder = write_config(tmp_path, LLAMA, CONFIGS[LLAMA])
    (folder / "model.safetensors").write_bytes(blob)
    with pytest.raises(ModelImportError) as err:
        import_hf(folder)
    assert why in str(err.value) and "\n" not in str(err.value)


def test_an_imported_folder_is_what_vllm_serves(tmp_path: Path) -> None:
    folder = write_config(tmp_path, LLAMA, dict(CONFIGS[LLAMA], quantization_config=AWQ))
    spec = import_hf(folder).spec
    gpu = Gpu(name="RTX 3090", vendor=Vendor.NVIDIA, memory_total_bytes=24 * GIB,
              bandwidth_gbps=936.2, fp16_tflops=71.0)  # fmt: skip
    p = plan(spec, Rig(gpus=(gpu,), ram_total_bytes=64 * GIB), make_settings(backend="vllm"),
             speed_model())  # fmt: skip
    assert p.launch is not None
    text = p.launch.scripts[0].text
    assert str(folder.resolve()) in text and "hf:" not in text
    assert not any("pre-quantized" in n for n in p.launch.notes)  # it is that checkpoint


def test_eight_bit_gptq_is_a_byte_a_weight() -> None:
    config = dict(CONFIGS[LLAMA], quantization_config={"quant_method": "gptq", "bits": 8})
    assert checkpoint_format(config) == "INT8"
