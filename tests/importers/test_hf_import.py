"""HF config.json import: one real public config per model_type, and bad configs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rigspark_gui.catalog.hf_import import SYNTHESIZED_QUANTS, import_hf, import_hf_config
from rigspark_gui.core.errors import ModelImportError

# Field names and values as published in each model's config.json (trimmed to the
# fields that matter here); the repository named in the key.
CONFIGS: dict[str, dict[str, Any]] = {
    "meta-llama/Llama-3.1-8B-Instruct": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "rope_theta": 500000.0,
    },
    "mistralai/Mistral-7B-Instruct-v0.3": {
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 32768,
        "sliding_window": None,
        "vocab_size": 32768,
        "tie_word_embeddings": False,
    },
    "mistralai/Mixtral-8x7B-Instruct-v0.1": {
        "model_type": "mixtral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 32768,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 32000,
        "tie_word_embeddings": False,
    },
    "Qwen/Qwen2.5-7B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_attention_heads": 28,
        "num_hidden_layers": 28,
        "num_key_value_heads": 4,
        "max_position_embeddings": 32768,
        "sliding_window": 131072,
        "use_sliding_window": False,
        "max_window_layers": 28,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    },
    "Qwen/Qwen1.5-MoE-A2.7B": {
        "model_type": "qwen2_moe",
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_attention_heads": 16,
        "num_hidden_layers": 24,
        "num_key_value_heads": 16,
        "max_position_embeddings": 8192,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "decoder_sparse_step": 1,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
    },
    "Qwen/Qwen3-8B": {
        "model_type": "qwen3",
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_attention_heads": 32,
        "num_hidden_layers": 36,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 40960,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
    },
    "Qwen/Qwen3-30B-A3B": {
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_attention_heads": 32,
        "num_hidden_layers": 48,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "max_position_embeddings": 40960,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
    },
    "google/gemma-2-9b-it": {
        "model_type": "gemma2",
        "hidden_size": 3584,
        "intermediate_size": 14336,
        "num_attention_heads": 16,
        "num_hidden_layers": 42,
        "num_key_value_heads": 8,
        "head_dim": 256,
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
        "vocab_size": 256000,
    },
    "google/gemma-3-4b-it": {
        "model_type": "gemma3",
        "text_config": {
            "hidden_size": 2560,
            "intermediate_size": 10240,
            "model_type": "gemma3_text",
            "num_hidden_layers": 34,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
        },
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152},
    },
    "google/gemma-3-1b-it": {
        "model_type": "gemma3_text",
        "hidden_size": 1152,
        "intermediate_size": 6912,
        "num_attention_heads": 4,
        "num_hidden_layers": 26,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "max_position_embeddings": 32768,
        "sliding_window": 512,
        "sliding_window_pattern": 6,
        "vocab_size": 262144,
    },
    "microsoft/Phi-3-mini-4k-instruct": {
        "model_type": "phi3",
        "hidden_size": 3072,
        "intermediate_size": 8192,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 32,
        "max_position_embeddings": 4096,
        "sliding_window": 2047,
        "vocab_size": 32064,
        "tie_word_embeddings": False,
    },
    "microsoft/Phi-3.5-MoE-instruct": {
        "model_type": "phimoe",
        "hidden_size": 4096,
        "intermediate_size": 6400,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "num_local_experts": 16,
        "num_experts_per_tok": 2,
        "sliding_window": 131072,
        "vocab_size": 32064,
        "tie_word_embeddings": False,
    },
    "deepseek-ai/DeepSeek-V2-Lite": {
        "model_type": "deepseek_v2",
        "hidden_size": 2048,
        "intermediate_size": 10944,
        "num_attention_heads": 16,
        "num_hidden_layers": 27,
        "num_key_value_heads": 16,
        "max_position_embeddings": 163840,
        "moe_intermediate_size": 1408,
        "n_routed_experts": 64,
        "n_shared_experts": 2,
        "num_experts_per_tok": 6,
        "first_k_dense_replace": 1,
        "kv_lora_rank": 512,
        "q_lora_rank": None,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "vocab_size": 102400,
        "tie_word_embeddings": False,
    },
    "deepseek-ai/DeepSeek-V3": {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "num_attention_heads": 128,
        "num_hidden_layers": 61,
        "num_key_value_heads": 128,
        "max_position_embeddings": 163840,
        "moe_intermediate_size": 2048,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 3,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "num_nextn_predict_layers": 1,
        "vocab_size": 129280,
        "tie_word_embeddings": False,
    },
    "moonshotai/Kimi-K2-Instruct": {
        "model_type": "kimi_k2",
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "num_attention_heads": 64,
        "num_hidden_layers": 61,
        "num_key_value_heads": 64,
        "max_position_embeddings": 131072,
        "moe_intermediate_size": 2048,
        "n_routed_experts": 384,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 1,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "vocab_size": 163840,
        "tie_word_embeddings": False,
    },
    "openai/gpt-oss-20b": {
        "model_type": "gpt_oss",
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_attention_heads": 64,
        "num_hidden_layers": 24,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "num_local_experts": 32,
        "num_experts_per_tok": 4,
        "experts_per_token": 4,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 12,
        "vocab_size": 201088,
        "tie_word_embeddings": False,
    },
    "THUDM/GLM-4-9B-0414": {
        "model_type": "glm4",
        "hidden_size": 4096,
        "intermediate_size": 13696,
        "num_attention_heads": 32,
        "num_hidden_layers": 40,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "max_position_embeddings": 32768,
        "vocab_size": 151552,
        "tie_word_embeddings": False,
    },
    "zai-org/GLM-4.5-Air": {
        "model_type": "glm4_moe",
        "hidden_size": 4096,
        "intermediate_size": 10944,
        "num_attention_heads": 96,
        "num_hidden_layers": 46,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "moe_intermediate_size": 1408,
        "n_routed_experts": 128,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 1,
        "num_nextn_predict_layers": 1,
        "vocab_size": 151552,
        "tie_word_embeddings": False,
    },
    "CohereForAI/c4ai-command-r-v01": {
        "model_type": "cohere",
        "hidden_size": 8192,
        "intermediate_size": 22528,
        "num_attention_heads": 64,
        "num_hidden_layers": 40,
        "num_key_value_heads": 64,
        "max_position_embeddings": 8192,
        "logit_scale": 0.0625,
        "vocab_size": 256000,
    },
    "CohereForAI/c4ai-command-r7b-12-2024": {
        "model_type": "cohere2",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
        "sliding_window_pattern": 4,
        "vocab_size": 256000,
    },
    "allenai/OLMo-2-1124-7B": {
        "model_type": "olmo2",
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 32,
        "max_position_embeddings": 4096,
        "vocab_size": 100352,
        "tie_word_embeddings": False,
    },
    "allenai/OLMoE-1B-7B-0924": {
        "model_type": "olmoe",
        "hidden_size": 2048,
        "intermediate_size": 1024,
        "num_attention_heads": 16,
        "num_hidden_layers": 16,
        "num_key_value_heads": 16,
        "max_position_embeddings": 4096,
        "num_experts": 64,
        "num_experts_per_tok": 8,
        "vocab_size": 50304,
        "tie_word_embeddings": False,
    },
    "ibm-granite/granite-3.1-8b-instruct": {
        "model_type": "granite",
        "hidden_size": 4096,
        "intermediate_size": 12800,
        "num_attention_heads": 32,
        "num_hidden_layers": 40,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "vocab_size": 49155,
        "tie_word_embeddings": True,
    },
    "ibm-granite/granite-3.1-3b-a800m-instruct": {
        "model_type": "granitemoe",
        "hidden_size": 1536,
        "intermediate_size": 512,
        "num_attention_heads": 24,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "num_local_experts": 40,
        "num_experts_per_tok": 8,
        "vocab_size": 49155,
        "tie_word_embeddings": True,
    },
    "tiiuae/falcon-7b": {
        "model_type": "falcon",
        "hidden_size": 4544,
        "num_attention_heads": 71,
        "num_hidden_layers": 32,
        "multi_query": True,
        "new_decoder_architecture": False,
        "parallel_attn": True,
        "vocab_size": 65024,
    },
    "tiiuae/falcon-40b": {
        "model_type": "falcon",
        "hidden_size": 8192,
        "num_attention_heads": 128,
        "num_hidden_layers": 60,
        "num_kv_heads": 8,
        "new_decoder_architecture": True,
        "vocab_size": 65024,
    },
    "bigcode/starcoder2-7b": {
        "model_type": "starcoder2",
        "hidden_size": 4608,
        "intermediate_size": 18432,
        "num_attention_heads": 36,
        "num_hidden_layers": 32,
        "num_key_value_heads": 4,
        "max_position_embeddings": 16384,
        "sliding_window": 4096,
        "vocab_size": 49152,
    },
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": {
        "model_type": "llama4",
        "text_config": {
            "model_type": "llama4_text",
            "hidden_size": 5120,
            "intermediate_size": 8192,
            "intermediate_size_mlp": 16384,
            "num_attention_heads": 40,
            "num_hidden_layers": 48,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "max_position_embeddings": 10485760,
            "num_local_experts": 16,
            "num_experts_per_tok": 1,
            "interleave_moe_layer_step": 1,
            "attention_chunk_size": 8192,
            "vocab_size": 202048,
        },
        "tie_word_embeddings": False,
    },
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": {
        "model_type": "llama4",
        "text_config": {
            "hidden_size": 5120,
            "intermediate_size": 8192,
            "intermediate_size_mlp": 16384,
            "num_attention_heads": 40,
            "num_hidden_layers": 48,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "max_position_embeddings": 1048576,
            "num_local_experts": 128,
            "num_experts_per_tok": 1,
            "interleave_moe_layer_step": 2,
            "attention_chunk_size": 8192,
            "vocab_size": 202048,
        },
    },
    "LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct": {
        "model_type": "exaone",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 32768,
        "vocab_size": 102400,
        "tie_word_embeddings": False,
    },
    "internlm/internlm2_5-7b-chat": {
        "model_type": "internlm2",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 32768,
        "vocab_size": 92544,
        "tie_word_embeddings": False,
    },
    "internlm/internlm3-8b-instruct": {
        "model_type": "internlm3",
        "hidden_size": 4096,
        "intermediate_size": 10240,
        "num_attention_heads": 32,
        "num_hidden_layers": 48,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "max_position_embeddings": 32768,
        "vocab_size": 128512,
        "tie_word_embeddings": False,
    },
}

# (arch, n_layer, n_embd, n_head, n_head_kv, head_dim_k, head_dim_v, n_ff, n_vocab, ctx, tied)
DENSE: dict[str, tuple[Any, ...]] = {
    "meta-llama/Llama-3.1-8B-Instruct": (
        "llama", 32, 4096, 32, 8, 128, 128, 14336, 128256, 131072, False,
    ),
    "mistralai/Mistral-7B-Instruct-v0.3": (
        "llama", 32, 4096, 32, 8, 128, 128, 14336, 32768, 32768, False,
    ),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (
        "llama", 32, 4096, 32, 8, 128, 128, 0, 32000, 32768, False,
    ),
    "Qwen/Qwen2.5-7B-Instruct": ("qwen2", 28, 3584, 28, 4, 128, 128, 18944, 152064, 32768, False),
    "Qwen/Qwen1.5-MoE-A2.7B": ("qwen2moe", 24, 2048, 16, 16, 128, 128, 0, 151936, 8192, False),
    "Qwen/Qwen3-8B": ("qwen3", 36, 4096, 32, 8, 128, 128, 12288, 151936, 40960, False),
    "Qwen/Qwen3-30B-A3B": ("qwen3moe", 48, 2048, 32, 4, 128, 128, 0, 151936, 40960, False),
    "google/gemma-2-9b-it": ("gemma2", 42, 3584, 16, 8, 256, 256, 14336, 256000, 8192, True),
    "google/gemma-3-4b-it": ("gemma3", 34, 2560, 8, 4, 256, 256, 10240, 262208, 131072, True),
    "google/gemma-3-1b-it": ("gemma3", 26, 1152, 4, 1, 256, 256, 6912, 262144, 32768, True),
    "microsoft/Phi-3-mini-4k-instruct": (
        "phi3", 32, 3072, 32, 32, 96, 96, 8192, 32064, 4096, False,
    ),
    "microsoft/Phi-3.5-MoE-instruct": (
        "phimoe", 32, 4096, 32, 8, 128, 128, 0, 32064, 131072, False,
    ),
    "deepseek-ai/DeepSeek-V2-Lite": (
        "deepseek2", 27, 2048, 16, 16, 192, 128, 10944, 102400, 163840, False,
    ),
    "deepseek-ai/DeepSeek-V3": (
        "deepseek2", 61, 7168, 128, 128, 192, 128, 18432, 129280, 163840, False,
    ),
    "moonshotai/Kimi-K2-Instruct": (
        "deepseek2", 61, 7168, 64, 64, 192, 128, 18432, 163840, 131072, False,
    ),
    "openai/gpt-oss-20b": ("gpt-oss", 24, 2880, 64, 8, 64, 64, 0, 201088, 131072, False),
    "THUDM/GLM-4-9B-0414": ("glm4", 40, 4096, 32, 2, 128, 128, 13696, 151552, 32768, False),
    "zai-org/GLM-4.5-Air": ("glm4moe", 47, 4096, 96, 8, 128, 128, 10944, 151552, 131072, False),
    "CohereForAI/c4ai-command-r-v01": (
        "command-r", 40, 8192, 64, 64, 128, 128, 22528, 256000, 8192, True,
    ),
    "CohereForAI/c4ai-command-r7b-12-2024": (
        "cohere2", 32, 4096, 32, 8, 128, 128, 14336, 256000, 8192, True,
    ),
    "allenai/OLMo-2-1124-7B": ("olmo2", 32, 4096, 32, 32, 128, 128, 11008, 100352, 4096, False),
    "allenai/OLMoE-1B-7B-0924": ("olmoe", 16, 2048, 16, 16, 128, 128, 0, 50304, 4096, False),
    "ibm-granite/granite-3.1-8b-instruct": (
        "granite", 40, 4096, 32, 8, 128, 128, 12800, 49155, 131072, True,
    ),
    "ibm-granite/granite-3.1-3b-a800m-instruct": (
        "granitemoe", 32, 1536, 24, 8, 64, 64, 0, 49155, 131072, True,
    ),
    "tiiuae/falcon-7b": ("falcon", 32, 4544, 71, 1, 64, 64, 18176, 65024, 2048, True),
    "tiiuae/falcon-40b": ("falcon", 60, 8192, 128, 8, 64, 64, 32768, 65024, 2048, True),
    "bigcode/starcoder2-7b": (
        "starcoder2", 32, 4608, 36, 4, 128, 128, 18432, 49152, 16384, True,
    ),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": (
        "llama4", 48, 5120, 40, 8, 128, 128, 0, 202048, 10485760, False,
    ),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": (
        "llama4", 48, 5120, 40, 8, 128, 128, 16384, 202048, 1048576, False,
    ),
    "LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct": (
        "exaone", 32, 4096, 32, 8, 128, 128, 14336, 102400, 32768, False,
    ),
    "internlm/internlm2_5-7b-chat": (
        "internlm2", 32, 4096, 32, 8, 128, 128, 14336, 92544, 32768, False,
    ),
    "internlm/internlm3-8b-instruct": (
        "llama", 48, 4096, 32, 2, 128, 128, 10240, 128512, 32768, False,
    ),
}  # fmt: skip

# (n_expert, n_expert_used, n_ff_expert, n_shared_expert, n_ff_shared_expert, n_dense_lead,
#  moe_every)
MOE: dict[str, tuple[int, ...]] = {
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (8, 2, 14336, 0, 0, 0, 1),
    "Qwen/Qwen1.5-MoE-A2.7B": (60, 4, 1408, 1, 5632, 0, 1),
    "Qwen/Qwen3-30B-A3B": (128, 8, 768, 0, 0, 0, 1),
    "microsoft/Phi-3.5-MoE-instruct": (16, 2, 6400, 0, 0, 0, 1),
    "deepseek-ai/DeepSeek-V2-Lite": (64, 6, 1408, 2, 2816, 1, 1),
    "deepseek-ai/DeepSeek-V3": (256, 8, 2048, 1, 2048, 3, 1),
    "moonshotai/Kimi-K2-Instruct": (384, 8, 2048, 1, 2048, 1, 1),
    "openai/gpt-oss-20b": (32, 4, 2880, 0, 0, 0, 1),
    "zai-org/GLM-4.5-Air": (128, 8, 1408, 1, 1408, 1, 1),
    "allenai/OLMoE-1B-7B-0924": (64, 8, 1024, 0, 0, 0, 1),
    "ibm-granite/granite-3.1-3b-a800m-instruct": (40, 8, 512, 0, 0, 0, 1),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": (16, 1, 8192, 1, 8192, 0, 1),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": (128, 1, 8192, 1, 8192, 0, 2),
}

SWA: dict[str, tuple[int, int]] = {
    "google/gemma-2-9b-it": (4096, 2),
    "google/gemma-3-4b-it": (1024, 6),
    "google/gemma-3-1b-it": (512, 6),
    "openai/gpt-oss-20b": (128, 2),
    "CohereForAI/c4ai-command-r7b-12-2024": (4096, 4),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": (8192, 4),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": (8192, 4),
}

# (kv_lora_rank, q_lora_rank, rope_head_dim)
MLA: dict[str, tuple[int, int | None, int]] = {
    "deepseek-ai/DeepSeek-V2-Lite": (512, None, 64),
    "deepseek-ai/DeepSeek-V3": (512, 1536, 64),
    "moonshotai/Kimi-K2-Instruct": (512, 1536, 64),
}


def write_config(root: Path, repo: str, config: dict[str, Any]) -> Path:
    folder = root / repo.split("/")[-1]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_every_model_type_has_a_fixture() -> None:
    from rigspark_gui.catalog.hf_import import _FAMILIES

    assert {c["model_type"] for c in CONFIGS.values()} == set(_FAMILIES)
    assert set(DENSE) == set(CONFIGS)


@pytest.mark.parametrize("repo", sorted(CONFIGS))
def test_config_maps_onto_geometry(tmp_path: Path, repo: str) -> None:
    folder = write_config(tmp_path, repo, CONFIGS[repo])
    spec = import_hf_config(folder)
    g = spec.geometry
    got = (
        g.architecture,
        g.n_layer,
        g.n_embd,
        g.n_head,
        g.n_head_kv,
        g.head_dim_k,
        g.head_dim_v,
        g.n_ff,
        g.n_vocab,
        g.context_length,
        g.tied_embeddings,
    )
    assert got == DENSE[repo]
    moe = MOE.get(repo, (0, 0, 0, 0, 0, 0, 1))
    assert (
        g.n_expert,
        g.n_expert_used,
        g.n_ff_expert,
        g.n_shared_expert,
        g.n_ff_shared_expert,
        g.n_dense_lead,
        g.moe_every,
    ) == moe
    assert (g.sliding_window, g.swa_pattern) == SWA.get(repo, (None, None))
    mla = MLA.get(repo)
    assert (g.kv_lora_rank, g.q_lora_rank, g.rope_head_dim) == (mla or (None, None, None))
    assert spec.tensors is None and spec.quants == SYNTHESIZED_QUANTS
    assert spec.id == "hf:" + folder.name and spec.imported
    assert spec.family == CONFIGS[repo]["model_type"]


def test_glm45_nextn_layer_has_no_kv(tmp_path: Path) -> None:
    folder = write_config(tmp_path, "zai-org/GLM-4.5-Air", CONFIGS["zai-org/GLM-4.5-Air"])
    g = import_hf_config(folder / "config.json").geometry
    assert g.n_layer == 47
    assert g.n_head_kv_per_layer == (8,) * 46 + (0,)


def test_gemma3_layer_types_override_the_pattern(tmp_path: Path) -> None:
    config = json.loads(json.dumps(CONFIGS["google/gemma-3-1b-it"]))
    config["layer_types"] = [
        "full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(26)
    ]
    g = import_hf_config(write_config(tmp_path, "x/g", config)).geometry
    assert g.swa_pattern == 4
    config["layer_types"] = ["full_attention"] * 26
    g = import_hf_config(write_config(tmp_path, "x/g", config)).geometry
    assert g.sliding_window is None and g.swa_pattern is None


def test_safetensors_index_total(tmp_path: Path) -> None:
    repo = "meta-llama/Llama-3.1-8B-Instruct"
    folder = write_config(tmp_path, repo, CONFIGS[repo])
    index = {"metadata": {"total_size": 16060522496}, "weight_map": {"lm_head.weight": "a"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    result = import_hf(folder)
    assert result.safetensors_total_bytes == 16060522496
    assert result.config_path == folder / "config.json"
    assert "16060522496" in result.spec.source
    assert (
        import_hf(write_config(tmp_path, "x/noindex", CONFIGS[repo])).safetensors_total_bytes
        is None
    )

    (folder / "model.safetensors.index.json").write_text('{"metadata": {"total_size": -5}}')
    with pytest.raises(ModelImportError, match=r"metadata\.total_size"):
        import_hf(folder)


def _with(repo: str, **changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(json.dumps(CONFIGS[repo]))
    for key, value in changes.items():
        if value is _DROP:
            config.pop(key, None)
        else:
            config[key] = value
    return config


_DROP = object()
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"

BAD_CONFIGS: dict[str, tuple[Any, str]] = {
    "list": ([1, 2], "JSON object"),
    "string": ("config", "JSON object"),
    "number": (3, "JSON object"),
    "no model_type": (_with(LLAMA, model_type=_DROP), "model_type"),
    "model_type not a string": (_with(LLAMA, model_type=5), "model_type"),
    "unknown model_type": (_with(LLAMA, model_type="mamba"), "not supported yet: mamba"),
    "missing hidden_size": (_with(LLAMA, hidden_size=_DROP), "hidden_size"),
    "hidden_size as text": (_with(LLAMA, hidden_size="4096"), "hidden_size must be an integer"),
    "hidden_size as bool": (_with(LLAMA, hidden_size=True), "hidden_size must be an integer"),
    "hidden_size as float": (_with(LLAMA, hidden_size=4096.0), "hidden_size must be an integer"),
    "negative heads": (_with(LLAMA, num_attention_heads=-32), "num_attention_heads"),
    "zero layers": (_with(LLAMA, num_hidden_layers=0), "num_hidden_layers"),
    "absurd layers": (_with(LLAMA, num_hidden_layers=10**15), "num_hidden_layers"),
    "absurd vocab": (_with(LLAMA, vocab_size=2**40), "vocab_size"),
    "absurd context": (_with(LLAMA, max_position_embeddings=2**62), "max_position_embeddings"),
    "indivisible heads": (_with(LLAMA, num_attention_heads=31), "divisible"),
    "tie flag as text": (_with(LLAMA, tie_word_embeddings="yes"), "tie_word_embeddings"),
    "more active experts than experts": (
        _with("mistralai/Mixtral-8x7B-Instruct-v0.1", num_experts_per_tok=9),
        "n_expert_used",
    ),
    "missing MLA field": (_with("deepseek-ai/DeepSeek-V3", kv_lora_rank=_DROP), "kv_lora_rank"),
    "text_config not an object": (_with("google/gemma-3-4b-it", text_config=[1]), "text_config"),
    "layer_types wrong length": (
        _with("openai/gpt-oss-20b", layer_types=["full_attention"]),
        "layer_types",
    ),
    "layer_types unknown": (
        _with("openai/gpt-oss-20b", layer_types=["mystery"] * 24),
        "layer_types",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_names_the_problem(tmp_path: Path, case: str) -> None:
    config, match = BAD_CONFIGS[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    start = time.perf_counter()
    with pytest.raises(ModelImportError, match=match) as err:
        import_hf_config(path)
    assert time.perf_counter() - start < 1.0
    assert str(err.value).startswith("config.json: ") and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe\x00garbage", "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
        (b'{"model_type": NaN}', "model_type"),
        (b"", "not valid JSON"),
    ],
)
def test_malformed_json(tmp_path: Path, raw: bytes, match: str) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(raw)
    with pytest.raises(ModelImportError, match=match):
        import_hf_config(path)


def test_oversized_config(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{"model_type": "llama", "pad": "' + b"x" * (10 * 1024 * 1024) + b'"}')
    start = time.perf_counter()
    with pytest.raises(ModelImportError, match="larger than 10 MB"):
        import_hf_config(path)
    assert time.perf_counter() - start < 1.0


def test_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(ModelImportError, match=r"no config\.json"):
        import_hf_config(tmp_path)
    with pytest.raises(ModelImportError, match="no such file"):
        import_hf_config(tmp_path / "absent.json")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


@settings(
    max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    repo=st.sampled_from(sorted(CONFIGS)),
    changes=st.lists(st.tuples(st.integers(0, 40), json_values), min_size=1, max_size=3),
)
def test_mutated_configs_only_raise_model_import_error(
    tmp_path: Path, repo: str, changes: list[tuple[int, Any]]
) -> None:
    config = json.loads(json.dumps(CONFIGS[repo]))
    target = config.get("text_config", config)
    keys = sorted(target)
    for index, value in changes:
        target[keys[index % len(keys)]] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    try:
        import_hf_config(path)
    except ModelImportError as err:
        assert "\n" not in str(err)
