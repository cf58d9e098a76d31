"""Build train-stage inputs per the folder contracts in docs/stages/ from a tiny random LlamaForCausalLM, in seconds.

sequences/ holds the target's own greedy continuations of random prompts (loss on the
continuation), so a drafter can learn to predict them; hidden/ and vocab/ follow the contracts
byte for byte (bf16 states, int32 ids, uint8 mask, index.parquet; d2t/t2d/counts).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from eagle3_core.run.manifest import StageManifest, write_manifest

VOCAB, HIDDEN, LAYERS = 96, 64, [1, 2, 3]


@contextlib.contextmanager
def one_thread():
    """Tiny models on a shared 2-core machine: 2 threads under contention ran 30x slower than 1."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def build_target(path: Path, seed: int = 0) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.stages.evaluate.models import TINY

    torch.manual_seed(seed)
    config = LlamaConfig(
        **{**TINY, "vocab_size": VOCAB, "hidden_size": HIDDEN},
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():  # a sharper random model: greedy outputs depend on context
            if p.dim() == 2:
                p.normal_(0, 0.15)
    model.save_pretrained(path)
    return path


def build_sequences(target: Path, out: Path, samples: int = 48, seed: int = 0) -> Path:
    import pyarrow.parquet as pq
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(target).eval()
    g = torch.Generator().manual_seed(seed)
    full = torch.randint(3, VOCAB, (samples, 8), generator=g)
    with torch.no_grad(), one_thread():  # greedy, all samples at once
        for _ in range(32):
            full = torch.cat([full, model(full).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    rows = {"sample_id": [], "input_ids": [], "loss_mask": [], "num_tokens": [], "num_supervised": [], "source": []}
    for i in range(samples):
        prompt_len = int(torch.randint(4, 9, (1,), generator=g))
        ids = full[i, 8 - prompt_len : 8 + int(torch.randint(16, 33, (1,), generator=g))].tolist()
        mask = [0] * prompt_len + [1] * (len(ids) - prompt_len)
        rows["sample_id"].append(f"s{i:04d}")
        rows["input_ids"].append(ids)
        rows["loss_mask"].append(mask)
        rows["num_tokens"].append(len(ids))
        rows["num_supervised"].append(sum(mask))
        rows["source"].append("text")
    out.mkdir(parents=True, exist_ok=True)
    from eagle3_core.contracts import sequences

    pq.write_table(sequences.table(rows), out / "part-00000.parquet")  # the contract's columns
    write_manifest(
        out, StageManifest(stage="reconstruct", status="complete", config_hash="test", counts={"accepted": samples})
    )
    return out


def read_sequences(sequences: Path) -> list[tuple[str, list[int], list[int]]]:
    import pyarrow.parquet as pq

    rows = []
    for part in sorted(sequences.glob("part-*.parquet")):
        t = pq.read_table(part).to_pydict()
        rows += list(zip(t["sample_id"], t["input_ids"], t["loss_mask"]))
    return rows


def build_hidden(target: Path, sequences: Path, out: Path, layers=LAYERS, per_shard: int = 20) -> Path:
    """hidden/ as the extract stage writes it: aux = hidden_states[k] (vLLM ids), final after the norm."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(target).eval()
    rows = read_sequences(sequences)
    out.mkdir(parents=True, exist_ok=True)
    index = {"sample_id": [], "shard": [], "offset": [], "length": []}
    for s in range(0, len(rows), per_shard):
        name, parts, offset = f"shard-{s // per_shard:05d}.safetensors", [], 0
        for sid, ids, mask in rows[s : s + per_shard]:
            with torch.no_grad(), one_thread():
                o = model.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
            aux = torch.stack([o.hidden_states[k][0] for k in layers], dim=1)
            parts.append((aux, o.last_hidden_state[0], ids, mask))
            index["sample_id"].append(sid), index["shard"].append(name)
            index["offset"].append(offset), index["length"].append(len(ids))
            offset += len(ids)
        save_file(
            {
                "aux_hidden_states": torch.cat([p[0] for p in parts]).bfloat16().contiguous(),
                "final_hidden_states": torch.cat([p[1] for p in parts]).bfloat16().contiguous(),
                "input_ids": torch.tensor([t for p in parts for t in p[2]], dtype=torch.int32),
                "loss_mask": torch.tensor([t for p in parts for t in p[3]], dtype=torch.uint8),
            },
            str(out / name),
        )
    pq.write_table(pa.table(index), out / "index.parquet")
    write_manifest(
        out,
        StageManifest(
            stage="extract",
            status="complete",
            config_hash="test",
            counts={"samples": len(rows)},
            details={
                "layers": list(layers),
                "hidden_size": HIDDEN,
                "num_hidden_layers": 4,
                "vocab_size": VOCAB,
                "engine": "test",
            },
        ),
    )
    return out


def build_vocab(sequences: Path, out: Path, draft_vocab: int = 48, vocab_size: int = VOCAB) -> Path:
    """vocab/ as the vocab stage writes it: top supervised ids, d2t offsets, t2d mask, counts."""
    from safetensors.torch import save_file

    counts = torch.zeros(vocab_size, dtype=torch.long)
    for _, ids, mask in read_sequences(sequences):
        for t, m in zip(ids, mask):
            if m and t < vocab_size:
                counts[t] += 1
    top = torch.sort(torch.argsort(counts, descending=True, stable=True)[:draft_vocab]).values
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[top] = True
    out.mkdir(parents=True, exist_ok=True)
    save_file(
        {"d2t": (top - torch.arange(draft_vocab)).long(), "t2d": t2d, "counts": counts}, str(out / "vocab.safetensors")
    )
    write_manifest(
        out,
        StageManifest(
            stage="vocab",
            status="complete",
            config_hash="test",
            details={"draft_vocab_size": draft_vocab, "target_vocab_size": vocab_size},
        ),
    )
    return out
