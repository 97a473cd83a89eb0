"""The commands that run a placement: llama.cpp, Ollama, LM Studio, koboldcpp, vLLM,
SGLang, MLX, and the reverse (llama.cpp arguments read back into a placement).

The public face of launch commands; other packages import from here only."""

from rigspark_gui.core.launch.beside_args import parse_draft_devices, split_projector_flags
from rigspark_gui.core.launch.cluster import (
    ClusterLaunch,
    HostScript,
    rpc_launch,
    serving_launch,
)
from rigspark_gui.core.launch.commands import launch_command, launch_commands
from rigspark_gui.core.launch.cpu_loading import cpu_repacks, placement_gpus
from rigspark_gui.core.launch.engine import Engine, LaunchCommand
from rigspark_gui.core.launch.llama_cpp import (
    apply_llama_args,
    koboldcpp_command,
    llama_server_command,
    parse_llama_args,
)
from rigspark_gui.core.launch.llama_layout import launch_gpus, launch_split, visible_from_env
from rigspark_gui.core.launch.ollama import ollama_command
from rigspark_gui.core.launch.ollama_defaults import (
    OLLAMA_VERSIONS,
    ollama_context,
    ollama_context_fallback,
    ollama_fit_margin,
    ollama_flash_attn,
    ollama_projector_on_cpu,
    ollama_ps_processor,
    ollama_total_vram,
)
from rigspark_gui.core.launch.vllm import vllm_command

__all__ = [
    "OLLAMA_VERSIONS",
    "ClusterLaunch",
    "Engine",
    "HostScript",
    "LaunchCommand",
    "apply_llama_args",
    "cpu_repacks",
    "koboldcpp_command",
    "launch_command",
    "launch_commands",
    "launch_gpus",
    "launch_split",
    "llama_server_command",
    "ollama_command",
    "ollama_context",
    "ollama_context_fallback",
    "ollama_fit_margin",
    "ollama_flash_attn",
    "ollama_projector_on_cpu",
    "ollama_ps_processor",
    "ollama_total_vram",
    "parse_draft_devices",
    "parse_llama_args",
    "placement_gpus",
    "rpc_launch",
    "serving_launch",
    "split_projector_flags",
    "visible_from_env",
    "vllm_command",
]
