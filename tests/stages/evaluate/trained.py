"""A drafter trained for a target by the project's own stages, for the online tests.

The target's own greedy answers to its training prompts (transformers, as a server at
temperature 0 would give them) become sequences/ and a generations/ folder (for the overlap
check); then the real vocab, extract and train stages (DeepSpeed on CPU) make drafter/export/.
The evaluation's held-out prompts are the toy target's ``prompts_heldout.jsonl``, disjoint from
``prompts_train.jsonl`` by construction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from eagle3_core.run.manifest import StageManifest, write_manifest
from eagle3_core.target.config import TargetConfig

AUX_LAYERS = [1, 2, 3]  # the toy recipe's: three distinct layers of 4 (vLLM's default would be 2, 2, 1)


@dataclass(frozen=True)
class TrainedDrafter:
    target: TargetConfig
    export: Path
    drafter: Path
    generations: Path


def greedy_answers(
    target_path: Path, prompts: list[list[dict]], max_new_tokens: int
) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, completion ids through the end-of-turn token) per prompt, greedy."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(target_path))
    model = AutoModelForCausalLM.from_pretrained(str(target_path), dtype=torch.float32).eval()
    eos = model.config.eos_token_id
    pairs = []
    with torch.inference_mode():
        for messages in prompts:
            ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)[
                "input_ids"
            ]
            out = model.generate(
                torch.tensor([ids]),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=eos,
                pad_token_id=model.config.pad_token_id,
            )
            pairs.append((list(ids), out[0, len(ids) :].tolist()))
    return pairs


def write_sequences(out: Path, pairs: list[tuple[list[int], list[int]]]) -> Path:
    import pyarrow.parquet as pq

    from eagle3_core.contracts import sequences

    out.mkdir(parents=True, exist_ok=True)
    records = [
        {"sample_id": f"s{i:05d}", "input_ids": p + c, "loss_mask": [0] * len(p) + [1] * len(c), "source": "text"}
        for i, (p, c) in enumerate(pairs)
    ]
    pq.write_table(sequences.rows_table(records), out / "part-00000.parquet")  # the contract's columns
    write_manifest(
        out,
        StageManifest(stage="reconstruct", status="complete", config_hash="eval-test", counts={"accepted": len(pairs)}),
    )
    return out


def write_generations(out: Path, prompts: list[list[dict]]) -> Path:
    """generations/accepted with the training prompts' messages (what the overlap check reads)."""
    from tests.stages.reconstruct.records import record
    from tests.stages.reconstruct.records import write_generations as write_accepted

    rows = [record(f"s{i:05d}", m, "", "") for i, m in enumerate(prompts)]
    write_accepted(out, rows)
    write_manifest(
        out, StageManifest(stage="generate", status="complete", config_hash="eval-test", counts={"accepted": len(rows)})
    )
    return out


def prepare_data(target: TargetConfig, root: Path, prompts: int = 240, max_new_tokens: int = 96, draft_vocab: int = 40):
    """sequences/, generations/, vocab/ and hidden/ under ``root`` from the target's greedy answers."""
    from eagle3_core.stages.extract.config import ExtractConfig
    from eagle3_core.stages.extract.stage import run_extract
    from eagle3_core.stages.vocab.config import VocabConfig
    from eagle3_core.stages.vocab.stage import run_vocab

    target_path = Path(target.require_path())
    lines = (target_path / "prompts_train.jsonl").read_text().splitlines()[:prompts]
    messages = [json.loads(line)["messages"] for line in lines]
    sequences = write_sequences(root / "sequences", greedy_answers(target_path, messages, max_new_tokens))
    write_generations(root / "generations", messages)
    vocab_size = json.loads((target_path / "config.json").read_text())["vocab_size"]
    run_vocab(VocabConfig(draft_vocab_size=min(draft_vocab, vocab_size)), target, sequences, root / "vocab")
    run_extract(ExtractConfig(layers=target.aux_layer_ids), target, sequences, root / "hidden")


TTT_STEPS = 3  # configs/toy.yaml's: the tests draft k = 3 in vLLM; 7 (the default) trained 4 more unused positions


def train_on(target: TargetConfig, root: Path, drafter_dir: Path, steps: int = 300, variant: dict | None = None):
    """The real train stage on ``prepare_data``'s folders, with a ``train.variant`` (dict) if given."""
    from eagle3_core.stages.train.config import TrainConfig
    from eagle3_core.stages.train.stage import run_train

    cfg = TrainConfig(
        max_steps=steps,
        micro_batch_tokens=2048,
        lr=3e-3,
        warmup_steps=10,
        checkpoint_every=steps,
        heldout_fraction=0.05,
        ttt_steps=TTT_STEPS,
        **({"variant": variant} if variant else {}),
    )
    run_train(cfg, target, root / "hidden", root / "vocab", drafter_dir)
    return TrainedDrafter(target, drafter_dir / "export", drafter_dir, root / "generations")
