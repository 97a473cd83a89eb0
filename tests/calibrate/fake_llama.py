"""Stand-ins for llama.cpp's llama-bench and llama-quantize, for calibration tests.

llama-quantize rewrites a GGUF with its 2-D weights quantized by the gguf package
(Q8_0 and Q4_0); llama-bench reports speeds that fall with the file's size, so a test
knows what a calibration must have measured:

    tg tok/s = 2e9 / file bytes,  pp tok/s = 40 x tg
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

TG_BYTES_PER_S = 2e9
PP_FACTOR = 40.0


def quantize(src: str, dst: str, quant: str) -> None:
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter, quants

    qtype = {"Q8_0": GGMLQuantizationType.Q8_0, "Q4_0": GGMLQuantizationType.Q4_0}.get(quant)
    if qtype is None:
        sys.stderr.write(f"main: invalid ftype '{quant}'\n")
        raise SystemExit(1)
    r = GGUFReader(src)
    w = GGUFWriter(dst, "llama")
    for field in r.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        value = field.contents()
        vtype = field.types[0]
        if vtype.name == "ARRAY":
            w.add_array(field.name, value)
        else:
            w.add_key_value(field.name, value, vtype)
    for t in r.tensors:
        data = np.array(t.data)
        if len(t.shape) >= 2:
            w.add_tensor(t.name, quants.quantize(data.astype(np.float32), qtype), raw_dtype=qtype)
        else:
            w.add_tensor(t.name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def bench(argv: list[str]) -> None:
    model = argv[argv.index("-m") + 1]
    ngl = int(argv[argv.index("-ngl") + 1])
    if os.environ.get("FAKE_LLAMA_FAIL"):
        sys.stderr.write("llama_model_load: error loading model: tensor data out of bounds\n")
        raise SystemExit(1)
    size = Path(model).stat().st_size
    tg = TG_BYTES_PER_S / size
    gpu = "Fake GPU" if ngl > 0 and os.environ.get("CUDA_VISIBLE_DEVICES") else ""
    common = {"build_commit": "fake123", "build_number": 4242, "gpu_info": gpu, "n_gpu_layers": ngl}
    rows = [
        {**common, "n_prompt": 64, "n_gen": 0, "avg_ts": tg * PP_FACTOR},
        {**common, "n_prompt": 0, "n_gen": 32, "avg_ts": tg},
    ]
    print(json.dumps(rows, indent=2))


def main() -> None:
    tool = Path(sys.argv[0]).name
    if tool == "llama-quantize":
        quantize(sys.argv[1], sys.argv[2], sys.argv[3])
    elif "--version" in sys.argv:
        # as the real llama-bench: no such flag
        sys.stderr.write("error: invalid parameter for argument: --version\n")
        raise SystemExit(1)
    else:
        bench(sys.argv[1:])


if __name__ == "__main__":
    main()
