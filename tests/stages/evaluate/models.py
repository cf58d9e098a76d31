"""Small local models for the evaluate tests: a random 4-layer Llama target and drafter exports
in the contract format (config.json + model.safetensors), built in seconds, never downloaded."""

from __future__ import annotations

import json
from pathlib import Path

TINY = dict(
    vocab_size=96,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=4,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    max_position_embeddings=256,
)


def make_target(path: Path, **over) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**{**TINY, **over}, eos_token_id=None, bos_token_id=None))
    model.save_pretrained(path)
    return path


def make_export(path: Path, target_dir: Path, draft_vocab_size: int = 48, aux=(1, 2, 3), seed: int = 0) -> Path:
    """A random-weight drafter for ``target_dir`` in the export format (the training stage's code)."""
    import torch

    from eagle3_core.drafter.model import DrafterConfig, Eagle3Drafter

    torch.manual_seed(seed)
    target = json.loads((target_dir / "config.json").read_text())
    drafter = Eagle3Drafter(DrafterConfig.from_target(target, draft_vocab_size, list(aux)))
    return save_with_even_vocab(drafter, path, target["vocab_size"], draft_vocab_size)


def save_with_even_vocab(drafter, path: Path, vocab_size: int, draft_vocab_size: int) -> Path:
    """Draft id d is target id 2d (a reduced draft vocab, so the mapping is exercised); the export written."""
    import torch

    d2t = torch.arange(0, 2 * draft_vocab_size, 2)[:draft_vocab_size] - torch.arange(draft_vocab_size)
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[torch.arange(draft_vocab_size) + d2t] = True
    drafter.set_vocab(d2t, t2d)
    drafter.save_export(path)
    return path


QUESTIONS = [f"What is {a} + {b}?" for a in range(3, 9) for b in range(2, 7)]


def make_chat_target(path: Path, heldout: int = 4) -> Path:
    """A random Llama with the toy tokenizer and chat template, and ``prompts_heldout.jsonl``:
    everything a served target has, untrained (built in about a second)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from eagle3_core.toy.tokenizer import IM_END, save_tokenizer, train_tokenizer

    save_tokenizer(train_tokenizer(QUESTIONS + ["user", "assistant"] * 5, 300), path, 256)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    torch.manual_seed(0)
    config = {**TINY, "vocab_size": len(tokenizer)}
    model = LlamaForCausalLM(
        LlamaConfig(**config, eos_token_id=tokenizer.convert_tokens_to_ids(IM_END), bos_token_id=None)
    )
    model.save_pretrained(path)
    with open(path / "prompts_heldout.jsonl", "w") as fh:
        for q in QUESTIONS[:heldout]:
            fh.write(json.dumps({"messages": [{"role": "user", "content": q}]}) + "\n")
    return path


def make_dflash_export(path: Path, target_dir: Path, draft_vocab_size: int = 48, seed: int = 0) -> Path:
    """A random-weight DFlash block drafter (block 4, 2 layers, mask token 1) in the export format."""
    return make_block_export("dflash", path, target_dir, draft_vocab_size, seed)


def make_block_export(kind: str, path: Path, target_dir: Path, draft_vocab_size: int = 48, seed: int = 0) -> Path:
    """A random-weight block drafter of ``kind`` (dflash: block 4; dspark: block 3, Markov rank 8, so
    k = 3 for both), 2 layers, mask/noise token 1, in the export format."""
    import torch

    from eagle3_core.drafter.dflash import DFlashConfig, DFlashDrafter
    from eagle3_core.drafter.dspark import DSparkConfig, DSparkDrafter

    torch.manual_seed(seed)
    target = json.loads((target_dir / "config.json").read_text())
    if kind == "dflash":
        section = {"block_size": 4, "mask_token_id": 1, "num_hidden_layers": 2}
        drafter = DFlashDrafter(DFlashConfig.from_target(target, draft_vocab_size, [1, 2, 3], section))
    else:
        section = {"block_size": 3, "noise_token_id": 1, "markov_rank": 8, "num_hidden_layers": 2}
        drafter = DSparkDrafter(DSparkConfig.from_target(target, draft_vocab_size, [1, 2, 3], section))
        torch.nn.init.normal_(drafter.markov_head.markov_w2.weight, std=0.02)  # zero at init: give it a bias
    return save_with_even_vocab(drafter, path, target["vocab_size"], draft_vocab_size)
