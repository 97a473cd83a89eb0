"""Launch commands: exact flags per engine, refusals, quoting, and the llama.cpp round trip."""

import shlex
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rigspark_gui.core.launch import (
    Engine,
    apply_llama_args,
    koboldcpp_command,
    launch_command,
    launch_commands,
    llama_server_command,
    ollama_command,
    parse_llama_args,
    visible_from_env,
    vllm_command,
)
from rigspark_gui.core.memory import weights_layout
from rigspark_gui.core.model.ggml_types import KvCacheType
from rigspark_gui.core.model.model_spec import ModelSpec
from rigspark_gui.core.placement import (
    CPU,
    Placement,
    auto_place,
    even_split,
    fill_fastest_first,
    move_experts,
    move_layers,
    uniform_placement,
)
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import Backend, PlanSettings
from tests.conftest import LLAMA_31_8B, make_rig, spec_of

MOE = replace(LLAMA_31_8B, n_ff=0, n_expert=8, n_expert_used=2, n_ff_expert=4096)
S = PlanSettings()


def _flag(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _round_trip(p: Placement, rig: Rig, s: PlanSettings = S, g=LLAMA_31_8B) -> Placement:
    cmd = llama_server_command(p, spec_of(g), "Q4_K_M", s, rig)
    assert cmd.supported, cmd.explanation
    ngl, split, overrides = parse_llama_args(shlex.split(cmd.text)[1:])
    return apply_llama_args(g, rig, s, ngl, split, overrides, visible_from_env(cmd.env))


def test_single_gpu_full_offload(llama8b: ModelSpec) -> None:
    rig = make_rig(1)
    cmd = llama_server_command(auto_place(LLAMA_31_8B, rig, S), llama8b, "Q4_K_M", S, rig)
    assert cmd.argv[:3] == ("llama-server", "-m", "llama-3.1-8b-Q4_K_M.gguf")
    assert _flag(cmd.argv, "-ngl") == "33" and _flag(cmd.argv, "-c") == "8192"
    assert "--tensor-split" not in cmd.argv and "-ot" not in cmd.argv
    assert _flag(cmd.argv, "-ctk") == "f16" and _flag(cmd.argv, "-fa") == "off"
    assert _flag(cmd.argv, "-np") == "1"
    assert cmd.env == ()


def test_two_gpus_write_the_split_as_layer_counts(llama8b: ModelSpec, rig2x3090: Rig) -> None:
    p = auto_place(LLAMA_31_8B, rig2x3090, S, tensor_split=[3.0, 1.0])
    cmd = llama_server_command(p, llama8b, "Q4_K_M", S, rig2x3090)
    assert _flag(cmd.argv, "--tensor-split") == "25,8"
    assert dict(cmd.env) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert cmd.text.startswith("CUDA_DEVICE_ORDER=PCI_BUS_ID llama-server")
    assert _round_trip(p, rig2x3090) == p


def test_partial_offload_uses_ngl(llama8b: ModelSpec) -> None:
    rig = make_rig(1)
    p = auto_place(LLAMA_31_8B, rig, S, ngl=20)
    cmd = llama_server_command(p, llama8b, "Q4_K_M", S, rig)
    assert _flag(cmd.argv, "-ngl") == "20" and "-ot" not in cmd.argv
    assert _round_trip(p, rig) == p


def test_hand_moved_layers_become_ot_rules(llama8b: ModelSpec, rig2x3090: Rig) -> None:
    p = auto_place(LLAMA_31_8B, rig2x3090, S)
    p = move_layers(p, ["blk.3", "blk.4"], CPU)
    p = move_layers(p, ["blk.30"], "gpu:0")
    cmd = llama_server_command(p, llama8b, "Q4_K_M", S, rig2x3090)
    rules = [cmd.argv[i + 1] for i, a in enumerate(cmd.argv) if a == "-ot"]
    assert r"^blk\.(3|4)\.=CPU" in rules and r"^blk\.30\.=CUDA0" in rules
    assert any("KV cache" in n and "blk.3" in n for n in cmd.notes)
    assert _round_trip(p, rig2x3090) == p


def test_experts_to_cpu_rules_come_before_layer_rules() -> None:
    rig = make_rig(2, vram_gib=80)
    spec = spec_of(MOE)
    p = auto_place(MOE, rig, S)
    p = move_experts(p, ["blk.3", "blk.4"], CPU)
    p = move_layers(p, ["blk.5"], "gpu:1")
    p = move_experts(p, ["blk.5"], CPU)
    cmd = llama_server_command(p, spec, "Q4_K_M", S, rig)
    rules = [cmd.argv[i + 1] for i, a in enumerate(cmd.argv) if a == "-ot"]
    assert rules[0] == r"^blk\.(3|4|5)\.ffn_.*_exps\.=CPU"
    assert r"^blk\.5\.=CUDA1" in rules
    assert _round_trip(p, rig, g=MOE) == p


def test_n_cpu_moe_parses_as_expert_rules() -> None:
    rig = make_rig(1, vram_gib=80)
    ngl, split, ot = parse_llama_args(["-ngl", "99", "--n-cpu-moe", "2"])
    p = apply_llama_args(MOE, rig, S, ngl, split, ot)
    assert p.unit("blk.1").experts_device == CPU and p.unit("blk.2").experts_device is None


def test_quantized_kv_comes_with_flash_attention(llama8b: ModelSpec) -> None:
    rig = make_rig(1)
    s = PlanSettings(kv_k=KvCacheType.Q8_0, kv_v=KvCacheType.Q8_0, flash_attn=True, parallel=4)
    cmd = llama_server_command(auto_place(LLAMA_31_8B, rig, s), llama8b, "Q4_K_M", s, rig)
    assert _flag(cmd.argv, "-ctv") == "q8_0" and _flag(cmd.argv, "-fa") == "on"
    assert _flag(cmd.argv, "-np") == "4"
    kobold = launch_command(
        Engine.KOBOLDCPP, auto_place(LLAMA_31_8B, rig, s), llama8b, "Q4_K_M", s, rig
    )
    assert not kobold.supported  # koboldcpp has no parallel sequences
    s1 = replace(s, parallel=1)
    kobold = launch_command(
        Engine.KOBOLDCPP, auto_place(LLAMA_31_8B, rig, s1), llama8b, "Q4_K_M", s1, rig
    )
    assert "--flashattention" in kobold.argv and _flag(kobold.argv, "--quantkv") == "1"


def test_swa_full_and_ubatch_flags(llama8b: ModelSpec) -> None:
    rig = make_rig(1)
    s = PlanSettings(swa_full=True, n_ubatch=1024)
    cmd = llama_server_command(auto_place(LLAMA_31_8B, rig, s), llama8b, "Q4_K_M", s, rig)
    assert "--swa-full" in cmd.argv and _flag(cmd.argv, "-ub") == "1024"


def test_koboldcpp_split_and_overrides(llama8b: ModelSpec, rig2x3090: Rig) -> None:
    p = move_layers(auto_place(LLAMA_31_8B, rig2x3090, S), ["blk.7"], CPU)
    cmd = launch_command(Engine.KOBOLDCPP, p, llama8b, "Q4_K_M", S, rig2x3090)
    i = cmd.argv.index("--tensor_split")
    assert cmd.argv[i + 1 : i + 3] == ("16", "16")
    assert _flag(cmd.argv, "--overridetensors") == r"^blk\.7\.=CPU"
    ngl, split, ot = parse_llama_args(cmd.argv)
    assert apply_llama_args(LLAMA_31_8B, rig2x3090, S, ngl, split, ot) == p


def test_ollama_modelfile_and_refusals(llama8b: ModelSpec) -> None:
    rig = make_rig(1)
    s = PlanSettings(kv_k=KvCacheType.Q8_0, kv_v=KvCacheType.Q8_0, flash_attn=True, parallel=2)
    p = auto_place(LLAMA_31_8B, rig, s, ngl=20)
    cmd = ollama_command(p, llama8b, "Q4_K_M", s, rig)
    assert cmd.supported
    assert "PARAMETER num_gpu 20" in cmd.text and "PARAMETER num_ctx 4096" in cmd.text
    # Ollama >= 0.30: KV type and sequences differ from its defaults, flash attention is
    # its own (auto) and is never forced
    assert dict(cmd.env) == {"OLLAMA_KV_CACHE_TYPE": "q8_0", "OLLAMA_NUM_PARALLEL": "2"}
    mixed = replace(s, kv_k=KvCacheType.F16)
    refused = ollama_command(p, llama8b, "Q4_K_M", mixed, rig)
    assert not refused.supported and "one type to K and V" in refused.explanation
    hand = ollama_command(move_layers(p, ["blk.31"], CPU), llama8b, "Q4_K_M", s, rig)
    assert not hand.supported and "-ot" in hand.explanation
    assert "cannot run" in hand.text


def test_vllm_pipeline_tensor_parallel_and_refusals(llama8b: ModelSpec, rig2x3090: Rig) -> None:
    s = PlanSettings(backend=Backend.VLLM, kv_k=KvCacheType.FP8, kv_v=KvCacheType.FP8)
    even = even_split(LLAMA_31_8B, rig2x3090, s)
    cmd = vllm_command(even, llama8b, s, rig2x3090)
    assert _flag(cmd.argv, "--tensor-parallel-size") == "2"
    assert _flag(cmd.argv, "--kv-cache-dtype") == "fp8"
    assert _flag(cmd.argv, "--max-model-len") == "8192"
    assert _flag(cmd.argv, "--gpu-memory-utilization") == "0.90"
    uneven = auto_place(LLAMA_31_8B, rig2x3090, s, tensor_split=[3.0, 1.0])
    cmd = vllm_command(uneven, llama8b, s, rig2x3090)
    assert _flag(cmd.argv, "--pipeline-parallel-size") == "2"
    assert dict(cmd.env)["VLLM_PP_LAYER_PARTITION"] == "25,7"
    offload = auto_place(LLAMA_31_8B, rig2x3090, s, ngl=20)
    refused = vllm_command(offload, llama8b, s, rig2x3090)
    assert not refused.supported and "cannot offload single layers" in refused.explanation
    q8 = launch_command(
        Engine.VLLM,
        even,
        llama8b,
        "Q4_K_M",
        replace(S, kv_v=KvCacheType.Q8_0, flash_attn=True),
        rig2x3090,
    )
    assert not q8.supported and "auto" in q8.explanation


def test_lm_studio_fraction(llama8b: ModelSpec) -> None:
    rig = make_rig(1)
    cmd = launch_command(
        Engine.LM_STUDIO, auto_place(LLAMA_31_8B, rig, S, ngl=11), llama8b, "Q4_K_M", S, rig
    )
    assert _flag(cmd.argv, "--gpu") == "0.3333" and _flag(cmd.argv, "--context-length") == "8192"
    full = launch_command(
        Engine.LM_STUDIO, auto_place(LLAMA_31_8B, rig, S), llama8b, "Q4_K_M", S, rig
    )
    assert _flag(full.argv, "--gpu") == "max"


def test_hostile_model_names_stay_one_quoted_word() -> None:
    evil = "$(rm -rf ~)"
    spec = ModelSpec(id=evil, name=evil, geometry=LLAMA_31_8B, quants=("Q4_K_M",))
    rig = make_rig(1)
    p = auto_place(LLAMA_31_8B, rig, S)
    for cmd in launch_commands(p, spec, "Q4_K_M", S, rig):
        if not cmd.supported:
            continue
        for line in cmd.text.splitlines():
            if line.startswith(("#", "FROM", "PARAMETER")) or not line:
                continue
            for word in shlex.split(line):
                if "$(" in word:  # only ever a whole, single-quoted argument
                    assert word in cmd.argv and shlex.quote(word) in line
    path = "/tmp/`reboot`; x.gguf"
    cmd = llama_server_command(p, spec, "Q4_K_M", S, rig, model_path=path)
    assert shlex.split(cmd.text)[2] == path
    ollama = ollama_command(p, spec, "Q4_K_M", S, rig)
    assert "ollama create rm-rf-q4_k_m" in ollama.text


def test_strategies_are_llama_shaped(llama8b: ModelSpec, rig2x3090: Rig) -> None:
    layout = weights_layout(llama8b, "Q4_K_M")
    p = fill_fastest_first(LLAMA_31_8B, layout, rig2x3090, S)
    cmd = llama_server_command(p, llama8b, "Q4_K_M", S, rig2x3090)
    assert "-ot" not in cmd.argv
    cpu = llama_server_command(
        uniform_placement(LLAMA_31_8B, rig2x3090, S, CPU), llama8b, "Q4_K_M", S, rig2x3090
    )
    assert _flag(cpu.argv, "-ngl") == "0"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ngl=st.integers(0, 33),
    split=st.lists(st.integers(0, 5), min_size=2, max_size=2).filter(any),
    moves=st.lists(
        st.tuples(st.integers(0, 32), st.sampled_from([CPU, "gpu:0", "gpu:1"])), max_size=6
    ),
    experts=st.lists(st.integers(0, 31), max_size=4),
)
def test_round_trip_through_llama_cpp_rule(
    ngl: int, split: list[int], moves: list[tuple[int, str]], experts: list[int]
) -> None:
    rig = make_rig(2, vram_gib=80)
    p = auto_place(MOE, rig, S, ngl=ngl, tensor_split=[float(x) for x in split])
    for slot, dev in moves:
        p = move_layers(p, ["output" if slot == 32 else f"blk.{slot}"], dev)
    if experts:
        p = move_experts(p, [f"blk.{i}" for i in experts], CPU)
    assert _round_trip(p, rig, g=MOE) == p


def test_unused_gpus_are_hidden_from_llama_cpp(llama8b: ModelSpec, rig2x3090: Rig) -> None:
    """A GPU llama.cpp sees gets a context, and two seen turn on pipeline copies: a
    command shows it only the GPUs the placement uses, numbered as the backend sees them."""
    only_second = auto_place(LLAMA_31_8B, rig2x3090, S, tensor_split=[0.0, 1.0])
    cmd = llama_server_command(only_second, llama8b, "Q4_K_M", S, rig2x3090)
    assert dict(cmd.env) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}
    assert "--tensor-split" not in cmd.argv
    assert cmd.text.startswith("CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1 llama-")
    moved = move_layers(only_second, ["blk.3"], CPU)
    rules = [a for a in llama_server_command(moved, llama8b, "Q4_K_M", S, rig2x3090).argv]
    assert r"^blk\.3\.=CPU" in rules
    moved_back = move_layers(moved, ["output"], CPU)
    argv = llama_server_command(moved_back, llama8b, "Q4_K_M", S, rig2x3090).argv
    assert "^output=CPU" in argv
    assert _round_trip(moved_back, rig2x3090) == moved_back
    kobold = koboldcpp_command(only_second, llama8b, "Q4_K_M", S, rig2x3090)
    assert dict(kobold.env)["CUDA_VISIBLE_DEVICES"] == "1" and "--tensor_split" not in kobold.argv
    both = auto_place(LLAMA_31_8B, rig2x3090, S)
    assert "CUDA_VISIBLE_DEVICES" not in dict(
        llama_server_command(both, llama8b, "Q4_K_M", S, rig2x3090).env
    )


def test_a_cpu_placement_hides_the_gpus(llama8b: ModelSpec, rig2x3090: Rig) -> None:
    """With a GPU in sight llama.cpp runs large batches on it (and allocates a compute
    buffer there) even at -ngl 0: the CPU path's command shows it none."""
    cpu = auto_place(LLAMA_31_8B, rig2x3090, S, ngl=0)
    cmd = llama_server_command(cpu, llama8b, "Q4_K_M", S, rig2x3090)
    assert dict(cmd.env)["CUDA_VISIBLE_DEVICES"] == ""
    assert "CUDA_VISIBLE_DEVICES='' llama-server" in cmd.text
    assert _flag(cmd.argv, "-ngl") == "0" and "--tensor-split" not in cmd.argv
    assert any("GPUs are hidden" in n for n in cmd.notes)
    assert _round_trip(cpu, rig2x3090) == cpu
    kobold = koboldcpp_command(cpu, llama8b, "Q4_K_M", S, rig2x3090)
    assert dict(kobold.env)["CUDA_VISIBLE_DEVICES"] == ""
    assert any("GPUs are hidden" in n for n in kobold.notes)


# ---------------------------------------------------------------- as each tool's users type it


def _hf_spec(quant: str = "Q4_K_M") -> ModelSpec:
    """A model read from a GGUF repository by name (`--model hf:REPO:QUANT`)."""
    return replace(
        spec_of(LLAMA_31_8B, "file:x"),
        source=f"hf:bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:{quant}",
        hf_repo="bartowski/Meta-Llama-3.1-8B-Instruct-GGUF",
    )


def test_ollama_runs_a_tag_with_the_settings_as_ollama_takes_them(llama8b: ModelSpec) -> None:
    rig = make_rig(1)
    s = PlanSettings(kv_k=KvCacheType.Q8_0, kv_v=KvCacheType.Q8_0, flash_attn=True)
    tagged = replace(llama8b, ollama_tag="llama3.1:8b-instruct-q4_K_M")
    cmd = ollama_command(auto_place(LLAMA_31_8B, rig, s), tagged, "Q4_K_M", s, rig)
    assert cmd.supported and cmd.argv == ("ollama", "run", "llama3.1:8b-instruct-q4_K_M")
    env = dict(cmd.env)
    assert env["OLLAMA_CONTEXT_LENGTH"] == "8192"
    assert env["OLLAMA_KV_CACHE_TYPE"] == "q8_0" and "OLLAMA_FLASH_ATTENTION" not in env
    assert "OLLAMA_NUM_PARALLEL" not in env  # one sequence: Ollama's default
    lines = cmd.text.splitlines()
    assert "ollama run llama3.1:8b-instruct-q4_K_M" in lines
    assert any(
        line.endswith("ollama serve") and "OLLAMA_CONTEXT_LENGTH=8192" in line for line in lines
    )
    assert (
        "Modelfile" not in cmd.text and "FROM" not in cmd.text and "ollama create" not in cmd.text
    )
    assert "/set parameter num_gpu" not in cmd.text  # all layers on the GPU: Ollama's own choice
    assert any("/set parameter num_ctx 8192" in n for n in cmd.notes)  # for older Ollama

    partial = ollama_command(auto_place(LLAMA_31_8B, rig, s, ngl=20), tagged, "Q4_K_M", s, rig)
    assert "/set parameter num_gpu 20" in partial.text.splitlines()


def test_ollama_says_when_a_tag_is_not_the_planned_quantization(llama8b: ModelSpec) -> None:
    rig = make_rig(1)
    p = auto_place(LLAMA_31_8B, rig, S)
    typed = replace(llama8b, ollama_tag="llama3.1:8b")  # Ollama's default download
    same = ollama_command(p, typed, "Q4_K_M", S, rig)
    assert same.argv == ("ollama", "run", "llama3.1:8b") and "Q4_K_M" not in " ".join(same.notes)
    other = ollama_command(p, typed, "Q6_K", S, rig)
    assert other.argv == ("ollama", "run", "llama3.1:8b")
    assert any(
        "not this plan's Q6_K" in n and "ollama.com/library/llama3.1" in n for n in other.notes
    )
    named = ollama_command(
        p, replace(llama8b, ollama_tag="llama3.1:8b-instruct-q8_0"), "Q6_K", S, rig
    )
    assert any("is Q8_0, not this plan's Q6_K" in n for n in named.notes)


def test_a_model_named_by_its_gguf_repo_launches_by_that_name() -> None:
    """llama-server and llama-cli take `-hf REPO:QUANT`; Ollama `hf.co/REPO:QUANT`: no
    guessed local file name."""
    rig = make_rig(1)
    spec = _hf_spec()
    p = auto_place(LLAMA_31_8B, rig, S)
    cmd = llama_server_command(p, spec, "Q4_K_M", S, rig)
    assert cmd.argv[:3] == (
        "llama-server",
        "-hf",
        "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M",
    )
    assert "-m" not in cmd.argv and ".gguf" not in cmd.text
    assert any("huggingface.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF" in n for n in cmd.notes)
    assert _round_trip(p, rig) == p  # -hf and its value read back as no placement flag
    ollama = ollama_command(p, spec, "Q4_K_M", S, rig)
    assert ollama.argv == (
        "ollama",
        "run",
        "hf.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M",
    )
    assert "Modelfile" not in ollama.text
    # a file the user gave stays that file
    own = llama_server_command(p, spec, "Q4_K_M", S, rig, model_path="/m/x.gguf")
    assert own.argv[1:3] == ("-m", "/m/x.gguf")


def test_a_catalog_model_downloads_the_published_file_it_cites(llama8b: ModelSpec) -> None:
    """The catalog's published file of a quantization names its GGUF repository: that
    quantization launches with -hf; another one (no repository known) keeps -m."""
    from rigspark_gui.core.model.model_spec import QuantFile

    published = QuantFile(
        file_bytes=4920739232,
        source="bartowski/Meta-Llama-3.1-8B-Instruct-GGUF@bf5b95e: "
        "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf, exact bytes",
    )
    spec = replace(llama8b, published={"Q4_K_M": published})
    rig = make_rig(1)
    p = auto_place(LLAMA_31_8B, rig, S)
    cmd = llama_server_command(p, spec, "Q4_K_M", S, rig)
    assert _flag(cmd.argv, "-hf") == "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M"
    other = llama_server_command(p, spec, "Q6_K", S, rig)
    assert _flag(other.argv, "-m") == "llama-3.1-8b-Q6_K.gguf"
    assert any("the path of your Q6_K GGUF file" in n for n in other.notes)
    ollama = ollama_command(p, spec, "Q6_K", S, rig)
    assert ollama.argv[:2] == ("ollama", "create")  # only a file: a Modelfile imports it
    assert "FROM llama-3.1-8b-Q6_K.gguf" in ollama.text.splitlines()


def test_koboldcpp_gets_no_gpu_flag_without_a_gpu(llama8b: ModelSpec, rig2x3090: Rig) -> None:
    cpu_rig = make_rig(0)
    cmd = koboldcpp_command(auto_place(LLAMA_31_8B, cpu_rig, S), llama8b, "Q4_K_M", S, cpu_rig)
    assert cmd.supported
    assert not {"--usevulkan", "--usecublas"} & set(cmd.argv)
    assert _flag(cmd.argv, "--gpulayers") == "0"
    on_cpu = koboldcpp_command(
        auto_place(LLAMA_31_8B, rig2x3090, S, ngl=0), llama8b, "Q4_K_M", S, rig2x3090
    )
    assert "--usecublas" not in on_cpu.argv  # the placement runs on no GPU
    on_gpu = koboldcpp_command(
        auto_place(LLAMA_31_8B, rig2x3090, S), llama8b, "Q4_K_M", S, rig2x3090
    )
    assert "--usecublas" in on_gpu.argv


# ---------------------------------------------------------------- pinned and fit forms


def _forms(cmd):
    return {f.form: f for f in cmd.forms}


def _check_one_plan_one_truth(placement: Placement, rig: Rig, s: PlanSettings, g=LLAMA_31_8B):
    """The pinned form's -ngl / --tensor-split / -ot give the plan's placement; the fit
    form, run through llama.cpp's fit, gives the plan's fit outcome (`engine_fit`)."""
    from rigspark_gui.core.fit import UserFlags, llama_fit, parse_fit_command
    from rigspark_gui.core.plan import engine_fit

    spec = spec_of(g)
    cmd = llama_server_command(placement, spec, "Q4_K_M", s, rig)
    forms = _forms(cmd)
    assert set(forms) == {"pinned", "fit"} and sum(f.recommended for f in cmd.forms) == 1
    assert cmd.recommendation and any(n.startswith("recommended: ") for n in cmd.notes)
    pinned, fit = forms["pinned"], forms["fit"]
    assert pinned.argv == cmd.argv
    ngl, split, overrides = parse_llama_args(pinned.argv[1:])
    back = apply_llama_args(g, rig, s, ngl, split, overrides, visible_from_env(cmd.env))
    assert [(u.unit, u.device, u.experts_device) for u in back.units] == [
        (u.unit, u.device, u.experts_device) for u in placement.units
    ]
    for flag in ("-ngl", "--tensor-split", "-ts", "-ot", "--n-cpu-moe", "--cpu-moe"):
        assert flag not in fit.argv
    assert shlex.split(fit.text)[-len(fit.argv) :] == list(fit.argv)
    assert "CUDA_VISIBLE_DEVICES" not in fit.text  # fit chooses among all GPUs
    c = parse_fit_command(list(fit.argv))
    got = llama_fit(spec, "Q4_K_M", rig, s, user=UserFlags(context=c.context))
    assert got == engine_fit(spec, rig, s, "Q4_K_M")
    return cmd


def test_fit_form_is_recommended_when_fit_places_the_plan_itself(llama8b: ModelSpec) -> None:
    rig = make_rig(1)
    s = replace(S, context=8192)
    cmd = _check_one_plan_one_truth(auto_place(LLAMA_31_8B, rig, s), rig, s)
    assert _forms(cmd)["fit"].recommended and cmd.recommendation.startswith("let fit decide")


def test_pinned_form_is_recommended_when_fit_would_place_otherwise() -> None:
    """Half the layers on the CPU although both GPUs have room: fit would offload all."""
    rig = make_rig(2)
    placement = auto_place(LLAMA_31_8B, rig, S, ngl=16)
    cmd = _check_one_plan_one_truth(placement, rig, S)
    assert _forms(cmd)["pinned"].recommended and cmd.recommendation.startswith("pinned")


def test_fit_form_writes_only_the_settings_fit_does_not_default() -> None:
    rig = make_rig(1)
    s = replace(S, fit_target_mib=(2048,), fit_ctx=8192)
    fit = _forms(llama_server_command(auto_place(LLAMA_31_8B, rig, s), spec_of(LLAMA_31_8B),
                                      "Q4_K_M", s, rig))["fit"]  # fmt: skip
    assert _flag(fit.argv, "-fitt") == "2048" and _flag(fit.argv, "-fitc") == "8192"
    plain = _forms(llama_server_command(auto_place(LLAMA_31_8B, rig, S), spec_of(LLAMA_31_8B),
                                        "Q4_K_M", S, rig))["fit"]  # fmt: skip
    assert "-fitt" not in plain.argv and "-fitc" not in plain.argv
