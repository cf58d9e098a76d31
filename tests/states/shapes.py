"""Real models' config.json shapes (no weights): what the target-size estimator is checked against,
and the targets too large for this machine that extract, online training and evaluate must refuse
before any load. Each parameter count beside them is transformers' own, counted on its meta-device
model built from the same config (transformers 5, 2026-12)."""

from __future__ import annotations

import json
from pathlib import Path

LLAMA3_8B = dict(
    architectures=["LlamaForCausalLM"],
    model_type="llama",
    vocab_size=128256,
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    max_position_embeddings=8192,
    rope_theta=500000.0,
    tie_word_embeddings=False,
    torch_dtype="bfloat16",
)
LLAMA3_70B = {
    **LLAMA3_8B,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
}
QWEN3_30B_A3B = dict(
    architectures=["Qwen3MoeForCausalLM"],
    model_type="qwen3_moe",
    vocab_size=151936,
    hidden_size=2048,
    intermediate_size=6144,
    moe_intermediate_size=768,
    num_experts=128,
    num_experts_per_tok=8,
    num_hidden_layers=48,
    num_attention_heads=32,
    num_key_value_heads=4,
    head_dim=128,
    decoder_sparse_step=1,
    mlp_only_layers=[],
    tie_word_embeddings=False,
)
MIXTRAL_8X7B = dict(
    architectures=["MixtralForCausalLM"],
    model_type="mixtral",
    vocab_size=32000,
    hidden_size=4096,
    intermediate_size=14336,
    num_local_experts=8,
    num_experts_per_tok=2,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    tie_word_embeddings=False,
)
DEEPSEEK_V3 = dict(
    architectures=["DeepseekV3ForCausalLM"],
    model_type="deepseek_v3",
    vocab_size=129280,
    hidden_size=7168,
    intermediate_size=18432,
    moe_intermediate_size=2048,
    n_routed_experts=256,
    n_shared_experts=1,
    num_experts_per_tok=8,
    first_k_dense_replace=3,
    moe_layer_freq=1,
    num_hidden_layers=61,
    num_attention_heads=128,
    num_key_value_heads=128,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    tie_word_embeddings=False,
)
# Kimi-K2.5's language model (DeepSeek-V3's architecture, 384 experts) under a multimodal config
KIMI_K2_TEXT = {
    **DEEPSEEK_V3,
    "vocab_size": 163840,
    "n_routed_experts": 384,
    "first_k_dense_replace": 1,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
}
KIMI_K25 = {"architectures": ["KimiK25ForConditionalGeneration"], "text_config": KIMI_K2_TEXT, "vision_config": {}}

PARAMETERS = {  # transformers' count of each shape (module docstring)
    "llama3_8b": (LLAMA3_8B, 8_030_261_248),
    "llama3_70b": (LLAMA3_70B, 70_553_706_496),
    "mixtral_8x7b": (MIXTRAL_8X7B, 46_702_792_704),
    "qwen3_30b_a3b": (QWEN3_30B_A3B, 30_532_122_624),  # 12,288 of it the q/k norms, left out
    "deepseek_v3": (DEEPSEEK_V3, 671_026_404_352),
    "kimi_k25": (KIMI_K25, 1_026_408_209_408),  # its language model's
}


def config_only_target(folder: Path, config: dict = LLAMA3_70B) -> Path:
    """A model folder holding only ``config.json``: nothing a load could read, so a stage that tried
    to load it would fail with transformers' own error, never with eagle3's sizing line."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder
