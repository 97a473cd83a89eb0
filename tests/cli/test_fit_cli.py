"""`rigspark-plan fit -- <command line>`: llama.cpp's --fit for a pasted command, in the
form llama-fit-params prints, and one line on stderr for anything wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rigspark_gui.cli import main
from validation.synth import MODELS, write_gguf

GIB = 1 << 30


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fit") / "llama3.gguf"
    write_gguf(MODELS[0], path)  # 6 layers, n_embd 512, trained context 32768
    return path


def rig_file(tmp_path: Path, **extra: object) -> Path:
    rig = {"ram_total_bytes": 24 * GIB, "cpu": {"features": ["avx2"]}, **extra}
    path = tmp_path / "rig.json"
    path.write_text(json.dumps(rig))
    return path


def test_a_model_that_fits_comes_back_unchanged(capsys, model: Path, tmp_path: Path) -> None:
    code, out, err = run(
        capsys, "fit", "--rig", str(rig_file(tmp_path)), "--",
        "llama-fit-params", "-m", str(model),
    )  # fmt: skip
    assert code == 0, err
    # as llama-fit-params prints it: the trained context and -ngl left at "auto"
    assert out.strip() == "-c 32768 -ngl -1"


def test_a_tight_margin_shrinks_the_context(capsys, model: Path, tmp_path: Path) -> None:
    rig = rig_file(tmp_path)
    # leave only ~150 MiB of the 24 GiB for the model: the context must shrink
    code, out, _ = run(
        capsys, "fit", "--rig", str(rig), "--", "llama-fit-params", "-m", str(model),
        "-fitt", str(24 * 1024 - 150),
    )  # fmt: skip
    assert code == 0
    c = int(out.split()[1])
    assert 4096 <= c < 32768 and c % 256 == 0
    code, out, _ = run(
        capsys, "fit", "--rig", str(rig), "--json", "--", "llama-server", "-m", str(model),
        "-fitt", str(24 * 1024 - 150),
    )  # fmt: skip
    data = json.loads(out)
    assert data["status"] == "fitted" and data["command"].startswith("-c ")
    assert {"context", "ngl", "tensor_split", "overrides", "devices", "reason"} <= set(data)
    # `rigspark-plan schema fit` describes exactly what was written
    from rigspark_gui.cli_schema import SCHEMAS

    model = SCHEMAS["fit"].load()
    assert model.model_validate(data).model_dump(mode="json") == data


def test_no_room_even_at_the_minimum_context_gives_up(capsys, model, tmp_path) -> None:
    code, out, err = run(
        capsys, "fit", "--rig", str(rig_file(tmp_path)), "--", "llama-fit-params",
        "-m", str(model), "-fitt", str(24 * 1024),
    )  # fmt: skip
    assert code == 1 and out == ""
    assert "gives up" in err and "system memory" in err


def test_flags_it_does_not_model_are_named(capsys, model: Path, tmp_path: Path) -> None:
    code, _, err = run(
        capsys, "fit", "--rig", str(rig_file(tmp_path)), "--", "llama-server", "-m",
        str(model), "--lora", "a.gguf", "-t", "8", "--port", "8080",
    )  # fmt: skip
    assert code == 0
    assert "--lora" in err and "--port" not in err  # (--mmproj is modelled)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["llama-server", "-m", "MODEL", "--frobnicate"], "not a llama.cpp flag"),
        (["llama-server", "-m", "MODEL", "-c"], "-c needs a value"),
        (["llama-server", "-m", "MODEL", "-fitt", "-5"], "negative"),
        (["llama-server", "-m", "MODEL", "-fitt", "100,200,300"], "margins for 0 devices"),
        (["llama-server", "-m", "/nonexistent/x.gguf"], "no such model file"),
        (["llama-server", "-m", "MODEL", "--rpc", "10.0.0.9:50052"], "no host of the rig"),
        (["python", "-m", "MODEL"], "expected one of"),
        (["llama-server", "-c", "4096"], "no model"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys, model: Path, tmp_path: Path, argv: list[str], words: str
) -> None:
    argv = [str(model) if a == "MODEL" else a for a in argv]
    code, out, err = run(capsys, "fit", "--rig", str(rig_file(tmp_path)), "--", *argv)
    assert code == 2 and out == ""
    assert words in err and len(err.strip().splitlines()) == 1


def test_rpc_addresses_name_the_rigs_hosts_in_order(capsys, model, tmp_path) -> None:
    hosts = [
        {"name": f"box{i}", "address": f"127.0.0.1:5005{i}", "ram_total_bytes": 24 * GIB}
        for i in (2, 3)
    ]
    rig = rig_file(tmp_path, hosts=hosts)
    code, out, err = run(
        capsys, "fit", "--rig", str(rig), "--json", "--", "llama-fit-params", "-m",
        str(model), "--rpc", "127.0.0.1:50053,127.0.0.1:50052",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert [d["device"] for d in data["devices"]] == ["rpc-cpu:box3", "rpc-cpu:box2"]
    assert data["status"] == "unchanged"


def test_the_fit_verb_counts_llama_servers_slots_as_the_planner_does() -> None:
    """The verb keeps its own copy of llama-server's automatic slots (so it need not
    load the planner); it must stay the planner's figure."""
    from rigspark_gui.core.fit import AUTO_SLOTS
    from rigspark_gui.core.plan import LLAMA_SERVER_SLOTS

    assert AUTO_SLOTS == LLAMA_SERVER_SLOTS
