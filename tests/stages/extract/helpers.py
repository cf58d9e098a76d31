"""Local test material for extraction: a tiny random Llama and sequences/ written per the contract."""

from __future__ import annotations

import random
from pathlib import Path


def build_tiny_llama(path: Path, layers: int = 6, hidden: int = 64, vocab: int = 256, seed: int = 0) -> Path:
    """A random LlamaForCausalLM saved as a Hugging Face directory (no tokenizer: ids only)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # a non-trivial final norm, so "after the norm" is tested for real
        model.model.norm.weight.uniform_(0.5, 1.5)
    model.save_pretrained(path)
    return path


def write_sequences(path: Path, lengths_per_part: list[list[int]], vocab: int = 256, seed: int = 0) -> list[dict]:
    """sequences/part-*.parquet with the contract's columns (``contracts.sequences``); returns the rows."""
    import pyarrow.parquet as pq

    from eagle3_core.contracts import sequences

    rng = random.Random(seed)
    path.mkdir(parents=True, exist_ok=True)
    every: list[dict] = []
    for p, lengths in enumerate(lengths_per_part):
        rows = []
        for n in lengths:
            ids = [rng.randrange(vocab) for _ in range(n)]
            mask = [0] * (n // 3) + [1] * (n - n // 3)
            rows.append(
                {
                    "sample_id": f"s{len(every) + len(rows):04d}",
                    "input_ids": ids,
                    "loss_mask": mask,
                    "num_tokens": n,
                    "num_supervised": sum(mask),
                    "source": "server",
                }
            )
        pq.write_table(sequences.rows_table(rows), path / f"part-{p:05d}.parquet")
        every += rows
    return every


def read_hidden(out: Path) -> dict[str, dict]:
    """sample_id -> {aux, final, input_ids, loss_mask} read back through index.parquet."""
    import pyarrow.parquet as pq
    from safetensors.torch import load_file

    index = pq.read_table(out / "index.parquet").to_pylist()
    shards = {name: load_file(out / name) for name in {r["shard"] for r in index}}
    found = {}
    for r in index:
        s, a, b = shards[r["shard"]], r["offset"], r["offset"] + r["length"]
        found[r["sample_id"]] = {
            "aux": s["aux_hidden_states"][a:b],
            "final": s["final_hidden_states"][a:b],
            "input_ids": s["input_ids"][a:b],
            "loss_mask": s["loss_mask"][a:b],
        }
    return found
