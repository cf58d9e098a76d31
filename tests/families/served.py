"""What the real-vLLM family tests share (tests/families/test_*_on_real_vllm.py): the rows a family is
taken through (plain, system, a two-turn history with earlier reasoning, a row with tools, a tool loop;
thinking off: plain and tools), one generate -> reconstruct run of them, and the strict probe."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from eagle3_core.prompts.source import PromptSource
from eagle3_core.stages.generate.config import GenerateConfig
from eagle3_core.stages.generate.stage import run_generate
from eagle3_core.stages.reconstruct.stage import run_reconstruct
from eagle3_core.target.config import TargetConfig

HISTORY_REASONING = "The user greets me; greet back."
LOOP_REASONING = "Rome's weather needs the tool."
WEATHER = {
    "name": "get_weather",
    "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TOOLS = [{"type": "function", "function": WEATHER}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}

PLAIN = {"prompt": "What is 2 + 2?"}
SYSTEM = {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a prime."}]}
HISTORY = {
    "messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello.", "reasoning": HISTORY_REASONING},
        {"role": "user", "content": "What is 3 + 4?"},
    ]
}
WITH_TOOLS = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "tools": TOOLS}
TOOL_LOOP = {
    "messages": [
        {"role": "user", "content": "Weather in Rome, then?"},
        {"role": "assistant", "content": None, "reasoning": LOOP_REASONING, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny"},
    ],
    "tools": TOOLS,
}
THINKING_ROWS = [PLAIN, SYSTEM, HISTORY, WITH_TOOLS, TOOL_LOOP]
CHAT_ROWS = [PLAIN, WITH_TOOLS]


@dataclass(frozen=True)
class Run:
    """One generate run and what reconstruct made of it."""

    target: TargetConfig
    generated: object  # the generations manifest
    rows: dict[str, dict]  # first user question -> accepted generation row
    rebuilt: object  # the sequences manifest
    sequences: dict[str, dict]  # sample_id -> sequences row
    out: Path


@dataclass(frozen=True)
class Served:
    tokenizer: object
    target: TargetConfig
    thinking: Run
    chat: Run
    vocab: object  # the vocab manifest (over the thinking run's sequences)
    probe: str | Exception  # `eagle3 probe --recipe`'s report on this server, or what it raised


def first_question(row: dict) -> str:
    return next(m["content"] for m in row["messages"] if m["role"] == "user")


def question(row: dict) -> str:
    return row["prompt"] if "prompt" in row else first_question(row)


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def generate_and_rebuild(
    server, recipe, target: TargetConfig, rows: list[dict], out: Path, max_tokens: int, **settings
) -> Run:
    """generate ``rows`` on ``server`` with ``target.chat``, then reconstruct them with ``target``."""
    out.mkdir(parents=True, exist_ok=True)
    source = write_rows(out / "in.jsonl", rows)
    cfg = GenerateConfig(
        prompts=PromptSource(input=str(source)),
        base_urls=[server.base_url],
        model=server.model,
        max_tokens=max_tokens,
        temperature=0.0,
        request_timeout=120,
        max_retries=1,
        concurrency=4,
        chat=target.chat,
        **settings,
    )
    generated = run_generate(cfg, out / "generations")
    accepted = pl.concat([pl.read_parquet(f) for f in sorted((out / "generations" / "accepted").glob("*.parquet"))])
    rebuilt = run_reconstruct(recipe.reconstruct, target, out / "generations", out / "sequences")
    seqs = pl.concat([pl.read_parquet(f) for f in sorted((out / "sequences").glob("part-*.parquet"))])
    return Run(
        target,
        generated,
        {first_question(r): r for r in accepted.to_dicts()},
        rebuilt,
        {s["sample_id"]: s for s in seqs.to_dicts()},
        out,
    )


def probe_report(server, target: TargetConfig, max_tokens: int, **settings) -> str | Exception:
    """`eagle3 probe --recipe`'s suite (strict) against the server, as a report line or the error."""
    from eagle3_core.errors import Eagle3Error
    from eagle3_core.preflight.suite import preflight

    gen = GenerateConfig(
        model=server.model, max_tokens=max_tokens, temperature=0.0, request_timeout=120, chat=target.chat, **settings
    )
    try:
        return preflight(target, gen, server.base_url, strict=True).line()
    except Eagle3Error as exc:
        return exc


def serve_family(
    recipe_path: Path,
    model: Path,
    root: Path,
    thinking_off: dict,
    budget: int,
    max_tokens: int,
    probe_extra=None,
    target_update: dict | None = None,
) -> Served:
    """The family's recipe on ``model`` served by real vLLM as eagle3 starts it (``VLLMServer.for_target``:
    its tokenizer mode, reasoning and tool parsers), one server for both generate runs and the probe;
    then vocab on the thinking run's sequences. ``thinking_off``: the chat_template_kwargs that switch
    thinking off; ``budget``: the reasoning tokens before vLLM forces the close (a random model never
    writes it); ``probe_extra``: more of the probe's extra_body (a random model's answer restricted);
    ``target_update``: recipe target fields set for the test (Kimi-K2.5's ``trust_remote_code: true``)."""
    from eagle3_core.config import PipelineConfig
    from eagle3_core.serve import ServeConfig, VLLMServer
    from eagle3_core.stages.vocab.stage import run_vocab
    from eagle3_core.target.tokenizer import load_tokenizer
    from tests.fixtures.requirements import require_vllm
    from tests.fixtures.vllm import machine_vllm_lock

    require_vllm()
    recipe = PipelineConfig.from_yaml(recipe_path)
    target = recipe.target.model_copy(update={**(target_update or {}), "path": str(model)})
    # thinking off: the recipe's chat settings (its detokenizer flags too) with the switch turned off
    chat_target = target.model_copy(
        update={"chat": target.chat.model_copy(update={"chat_template_kwargs": thinking_off})}
    )
    # a tools section is some 350 prompt tokens; 64 MiB of KV cache keeps the server near 2 GB
    serve = ServeConfig(log_dir=str(root / "vllm"), max_model_len=2048, kv_cache_bytes=64 << 20, startup_timeout=300)
    forced = {"thinking_token_budget": budget}
    with machine_vllm_lock(), VLLMServer.for_target(target, serve) as server:
        on = generate_and_rebuild(server, recipe, target, THINKING_ROWS, root / "on", max_tokens, extra_body=forced)
        off = generate_and_rebuild(
            server, recipe, chat_target, CHAT_ROWS, root / "off", max_tokens, require_reasoning=False
        )
        probe = probe_report(server, target, max_tokens, extra_body={**forced, **(probe_extra or {})})
    vocab = run_vocab(
        recipe.vocab.model_copy(update={"draft_vocab_size": 64}), target, root / "on" / "sequences", root / "vocab"
    )
    return Served(load_tokenizer(model, target.trust_remote_code), target, on, off, vocab, probe)


def check_recorded_ids(served: Served) -> None:
    """What reconstruct verified against the tokenizer and recorded before any work: the recipe's ids."""
    target = served.target
    for run in (served.thinking, served.chat):
        recorded = run.rebuilt.details["token_ids"]
        assert (recorded["think_open_ids"], recorded["think_close_ids"]) == (
            [target.think_open_id],
            [target.think_close_id],
        )
        assert recorded["end_of_turn_id"] == target.end_of_turn_id


def check_run_trains_on_the_servers_ids(run: Run, rows: list[dict]) -> None:
    """Every row of the run answered, and each sequence exactly the server's prompt + completion ids."""
    assert run.generated.counts["accepted"] == len(rows), run.generated.counts
    assert set(run.rows) == {question(r) for r in rows}
    assert run.rebuilt.status == "complete" and len(run.sequences) == len(rows), run.rebuilt.counts
    for row in run.rows.values():
        seq = run.sequences[row["sample_id"]]
        assert seq["input_ids"] == list(row["prompt_token_ids"]) + list(row["completion_token_ids"])
        assert seq["source"] == "server" and sum(seq["loss_mask"]) > 0


def check_rows_train_on_the_servers_ids(served: Served) -> None:
    """Both runs' rows (thinking and not) train on the server's ids (``check_run_trains_on_the_servers_ids``)."""
    for run, rows in ((served.thinking, THINKING_ROWS), (served.chat, CHAT_ROWS)):
        check_run_trains_on_the_servers_ids(run, rows)


def check_text_rebuild_where_the_ids_are_canonical(served: Served) -> None:
    """The completion rebuilt from the server's text equals its ids wherever those are the tokenizer's
    own reading of their text. A random model also writes ids that are not: another split of the same
    text (``preflight.suite._same_text``), or a character the normaliser reads back as another; there
    the rebuild is the tokenizer's reading of the server's text. Which rows those are depends on the
    random model's arithmetic (a CPU without bf16 kernels serves it in fp32), never on the family."""
    from eagle3_core.rebuild.build import Reconstructor
    from eagle3_core.stages.reconstruct.config import ReconstructConfig
    from eagle3_core.target.tokenizer import token_facts

    tok, facts = served.tokenizer, token_facts(served.tokenizer, served.target, served.target.path)
    for run in (served.thinking, served.chat):
        counts, mismatches = run.rebuilt.counts, {m["sample_id"]: m for m in run.rebuilt.details["mismatches"]}
        assert counts["server_checked"] == len(run.rows), counts
        assert counts["server_checked"] - counts.get("server_matched", 0) == len(mismatches), counts
        for q, row in run.rows.items():
            completion = list(row["completion_token_ids"])
            canonical = tok.encode(tok.decode(completion, skip_special_tokens=False), add_special_tokens=False)
            if canonical == completion:
                assert row["sample_id"] not in mismatches, (q, mismatches.get(row["sample_id"]))
                continue
            if row["sample_id"] not in mismatches:  # the rebuild may still agree (parts encoded apart)
                continue
            # the prompt is vLLM's (rendered alike, or its ids)
            assert mismatches[row["sample_id"]]["where"] == "completion", q
            cfg = ReconstructConfig(prefer="text", max_length=1 << 30)
            rebuilt = Reconstructor(tok, facts, cfg, run.target.chat, run.target).run([row]).rows["input_ids"][0]
            assert rebuilt[: len(row["prompt_token_ids"])] == list(row["prompt_token_ids"]), q
            assert rebuilt[len(row["prompt_token_ids"]) :] == canonical, q
