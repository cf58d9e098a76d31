"""The toy target's own answers as train-stage inputs, through the real vocab and extract stages.

Greedy completions of the toy's training prompts (what the generate stage would collect from
vLLM at temperature 0), rendered in its chat template, loss on the completion; then
``run_vocab`` and ``run_extract`` write vocab/ and hidden/ exactly as the pipeline does.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tests.stages.train.builders import one_thread

MAX_NEW_TOKENS = 96


def greedy_completions(target: Path, prompts: list[list[dict]], end_id: int) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, completion ids ending with ``end_id``) per prompt; same-length prompts batched."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(target)
    model = AutoModelForCausalLM.from_pretrained(target).eval()
    encoded = [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=True) for m in prompts]
    encoded = [list(e["input_ids"]) if isinstance(e, dict) or hasattr(e, "keys") else list(e) for e in encoded]
    groups: dict[int, list[int]] = {}
    for i, ids in enumerate(encoded):
        groups.setdefault(len(ids), []).append(i)
    out: list[tuple[list[int], list[int]]] = [([], [])] * len(encoded)
    with torch.no_grad(), one_thread():
        for length, members in groups.items():
            x = torch.tensor([encoded[i] for i in members])
            for _ in range(MAX_NEW_TOKENS):
                x = torch.cat([x, model(x).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
                if bool((x[:, length:] == end_id).any(-1).all()):
                    break
            for row, i in zip(x.tolist(), members):
                completion = row[length:]
                if end_id in completion:
                    completion = completion[: completion.index(end_id) + 1]
                out[i] = (encoded[i], completion)
    return out


def write_toy_sequences(target: Path, out: Path, samples: int, end_id: int) -> Path:
    import pyarrow.parquet as pq

    from eagle3_core.contracts import sequences
    from eagle3_core.run.manifest import StageManifest, write_manifest

    lines = (target / "prompts_train.jsonl").read_text().splitlines()[:samples]
    prompts = [json.loads(line)["messages"] for line in lines]
    pairs = greedy_completions(target, prompts, end_id)
    ids = [p + c for p, c in pairs]
    masks = [[0] * len(p) + [1] * len(c) for p, c in pairs]
    out.mkdir(parents=True, exist_ok=True)
    records = [
        {"sample_id": f"toy-{i:05d}", "input_ids": x, "loss_mask": m, "source": "text"}
        for i, (x, m) in enumerate(zip(ids, masks))
    ]
    pq.write_table(sequences.rows_table(records), out / "part-00000.parquet")  # the contract's columns
    write_manifest(
        out,
        StageManifest(stage="reconstruct", status="complete", config_hash="toy-greedy", counts={"sequences": len(ids)}),
    )
    return out


def build_toy_inputs(
    target: Path, root: Path, samples: int, draft_vocab: int, layers: list[int], end_id: int
) -> tuple[Path, Path, Path]:
    """(sequences, vocab, hidden) for the toy target under ``root``."""
    from eagle3_core.stages.extract.config import ExtractConfig
    from eagle3_core.stages.extract.stage import run_extract
    from eagle3_core.stages.vocab.config import VocabConfig
    from eagle3_core.stages.vocab.stage import run_vocab
    from eagle3_core.target.config import TargetConfig

    sequences = write_toy_sequences(target, root / "sequences", samples, end_id)
    target_cfg = TargetConfig(path=str(target), aux_layer_ids=layers)
    run_vocab(VocabConfig(draft_vocab_size=draft_vocab), target_cfg, sequences, root / "vocab")
    with one_thread():
        run_extract(ExtractConfig(layers=layers, device="cpu"), target_cfg, sequences, root / "hidden")
    return sequences, root / "vocab", root / "hidden"
