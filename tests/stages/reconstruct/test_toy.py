"""The toy target's own generations, rebuilt from their text, give back the ids the model produced.

Slow: needs the toy target (built once and cached, about 4 minutes the first time).
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from eagle3_core.stages.reconstruct.config import ReconstructConfig
from eagle3_core.stages.reconstruct.stage import run_reconstruct
from eagle3_core.target.config import TargetConfig
from tests.stages.reconstruct.records import record, write_generations

SAMPLES = 4


def toy_generations(toy_target, tokenizer) -> list[dict]:
    """Greedy completions of held-out prompts, recorded as vLLM reports them (text and ids)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(toy_target)).eval()
    lines = (toy_target / "prompts_heldout.jsonl").read_text(encoding="utf-8").splitlines()[:SAMPLES]
    records = []
    for i, line in enumerate(lines):
        messages = json.loads(line)["messages"]
        prompt = tokenizer.encode(
            tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
            add_special_tokens=False,
        )
        with torch.no_grad():
            out = model.generate(torch.tensor([prompt]), max_new_tokens=120, do_sample=False)
        completion = out[0, len(prompt) :].tolist()
        # vLLM's text skips special tokens; the kimi_k2 parser splits it at </think>.
        reasoning, _, content = tokenizer.decode(completion, skip_special_tokens=True).partition("</think>")
        stopped = completion[-1] == tokenizer.convert_tokens_to_ids("<|im_end|>")
        records.append(
            record(
                f"toy-{i}",
                messages,
                reasoning,
                content,
                finish_reason="stop" if stopped else "length",
                prompt_token_ids=prompt,
                completion_token_ids=completion,
            )
        )
    return records


@pytest.mark.slow
def test_toy_generations_are_rebuilt_exactly_as_the_toy_tokenizer_encodes_them(toy_target, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(toy_target))
    records = toy_generations(toy_target, tokenizer)
    target = TargetConfig(path=str(toy_target), family="kimi_k2_5")
    manifest = run_reconstruct(
        ReconstructConfig(prefer="text"), target, write_generations(tmp_path / "gen", records), tmp_path / "seq"
    )
    assert manifest.details["server_check"] == {"checked": SAMPLES, "matched": SAMPLES, "match_rate": 1.0}
    rows = pq.read_table(tmp_path / "seq" / "part-00000.parquet").to_pylist()
    for rec, row in zip(records, rows):
        # The whole turn as text (think tokens and end-of-turn included), encoded in one call.
        text = tokenizer.apply_chat_template(
            rec["messages"], tokenize=False, add_generation_prompt=True
        ) + tokenizer.decode(rec["completion_token_ids"], skip_special_tokens=False)
        assert row["input_ids"] == tokenizer.encode(text, add_special_tokens=False)
        assert row["source"] == "text"
