"""generations/ has one home (``contracts.generations``): its columns, its rows and its sample key.

The stage writes the contract's columns exactly, the fixtures that stand in for it too (one had
drifted: ``messages`` of two fields where the writer's have six), and the sample key keeps the
bytes of every run already on disk, or a resumed run would request each of its samples again.
"""

from __future__ import annotations

import polars as pl
import pytest

from eagle3_core.chat.rows import normalize_prompt
from eagle3_core.contracts import generations
from eagle3_core.nightly.versions import current_sample_ids
from eagle3_core.stages.generate.stage import run_generate
from tests.stages.generate.helpers import accepted, config, write_jsonl

ROWS = {
    "plain": {"prompt": "What is 2 + 2?"},
    "system": {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime."}]},
    "multi_turn": {
        "conversations": [
            {"from": "human", "value": "Hi."},
            {"from": "gpt", "value": "Hello!"},
            {"from": "human", "value": "Count to three."},
            {"from": "gpt", "value": "1 2 3"},
        ]
    },
    "tools": {
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "weather",
                    "description": "Météo",  # not ASCII: the key hashes the text as UTF-8, unescaped
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ],
    },
}
# a served run's settings as GenerateConfig(model="toy").sampling_key() gave them when the keys were pinned
SERVED = {
    "model": "toy",
    "max_tokens": 4096,
    "temperature": 0.6,
    "top_p": None,
    "seed": None,
    "extra_body": {},
    "chat": {"chat_template_kwargs": {}, "skip_special_tokens": True, "spaces_between_special_tokens": True},
}
DATASET = {"source": "dataset"}
# computed with chat.rows.sample_id before the key moved into the contract: runs on disk hold these bytes
PINNED = {
    ("plain", "served"): "ca7a20055f7baac48e96562d",
    ("plain", "dataset"): "beb2938f9314d566bf2c5c0d",
    ("system", "served"): "36c2f268a3e04d606ed280d2",
    ("system", "dataset"): "4bff48048d03b2ddad458eee",
    ("multi_turn", "served"): "d23b0533ad4abc0040e25a5d",
    ("multi_turn", "dataset"): "e9a9a1fa2e46084f480687f4",
    ("tools", "served"): "9f7a81d88cd7ad6e53c14a04",
    ("tools", "dataset"): "7493ec41746ac1a5959d0706",
}


@pytest.mark.parametrize("row,settings", sorted(PINNED))
def test_a_sample_key_is_byte_identical_to_the_one_runs_on_disk_hold(row, settings):
    messages, tools = normalize_prompt(ROWS[row])

    key = generations.sample_key(messages, {"served": SERVED, "dataset": DATASET}[settings], tools)

    assert key == PINNED[row, settings]


def test_an_earlier_turns_key_is_byte_identical_to_the_one_runs_on_disk_hold():
    conversation = PINNED["multi_turn", "served"]
    assert [generations.turn_key(conversation, t) for t in (0, 1)] == [
        "9f3c1acc2ec0f38234a55be0",
        "b191c3cb7bf49e4430bf2b01",
    ]


def test_a_key_changes_with_the_prompt_the_tools_or_the_settings_and_nothing_else():
    messages, tools = normalize_prompt(ROWS["tools"])
    key = generations.sample_key(messages, SERVED, tools)

    assert key == generations.sample_key([dict(m) for m in messages], dict(SERVED), [dict(t) for t in tools])
    assert key != generations.sample_key(messages, SERVED)
    assert key != generations.sample_key([{"role": "user", "content": "Weather in Paris? "}], SERVED, tools)
    assert key != generations.sample_key(messages, SERVED | {"temperature": 0.7}, tools)


def test_the_nightly_keys_a_prompt_as_the_generate_stage_wrote_it(tmp_path, fake_server):
    src = write_jsonl(tmp_path / "in.jsonl", list(ROWS.values()))
    cfg = config(src, [fake_server.url])

    manifest = run_generate(cfg, tmp_path / "out")

    served = cfg.model_copy(update={"model": manifest.details["model"]})  # the nightly asks the served model too
    assert set(accepted(tmp_path / "out")["sample_id"]) == current_sample_ids(served)
    assert manifest.counts["accepted"] == len(ROWS)


def test_every_shard_the_generate_stage_writes_has_the_contracts_columns_exactly(tmp_path, fake_server):
    conversation = {"messages": [{"role": "user", "content": "A"}, {"role": "assistant", "content": "b"}]}
    conversation["messages"].append({"role": "user", "content": "C"})
    malformed = {"no_prompt_here": 1}
    src = write_jsonl(tmp_path / "in.jsonl", [*ROWS.values(), conversation, malformed])

    run_generate(config(src, [fake_server.url], turns="all"), tmp_path / "out")

    written = {kind: sorted((tmp_path / "out" / kind).glob("part-*.parquet")) for kind in generations.KINDS}
    assert all(written.values()), written  # a shard of each kind, or the check below is vacuous
    problems = [generations.schema_problem(part, kind) for kind, parts in written.items() for part in parts]
    assert problems == [None] * len(problems)


def test_the_dataset_source_and_the_stand_in_fixtures_write_the_contracts_columns(tmp_path):
    from eagle3_core.prompts.source import PromptSource
    from eagle3_core.stages.generate.config import GenerateConfig
    from tests.stages.reconstruct.records import record, write_generations
    from tests.test_nightly_versions import write_version

    answered = {"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]}
    src = write_jsonl(tmp_path / "in.jsonl", [answered, {"no_prompt_here": 1}])
    run_generate(GenerateConfig(prompts=PromptSource(input=str(src)), source="dataset"), tmp_path / "dataset")
    write_generations(tmp_path / "fixture", [record("a", [{"role": "user", "content": "Q"}], "r", "c")])
    write_version(tmp_path / "nightly", "2026-11-01", [["a"]], rejected=["r"])
    nightly = tmp_path / "nightly" / "versions" / "2026-11-01" / "generations"

    parts = [(p, p.parent.name) for d in ("dataset", "fixture") for p in (tmp_path / d).glob("*/part-*.parquet")]
    parts += [(p, p.parent.name) for p in nightly.glob("*/part-*.parquet")]
    assert {kind for _, kind in parts} == {generations.ACCEPTED, generations.REJECTED}
    assert [generations.schema_problem(p, kind) for p, kind in parts] == [None] * len(parts)


def test_a_shard_with_other_types_or_columns_is_named_with_how_it_differs(tmp_path):
    row = generations.rejected_row("a", 0, "{}", "empty_reasoning", "")
    generations.frame(generations.REJECTED, [row]).with_columns(pl.col("row_index").cast(pl.Int32)).write_parquet(
        tmp_path / "a.parquet"
    )
    pl.DataFrame({"sample_id": ["a"]}).write_parquet(tmp_path / "b.parquet")

    assert generations.schema_problem(tmp_path / "a.parquet", generations.REJECTED).endswith(
        "row_index is Int32, not Int64"
    )
    assert "columns ['sample_id'], the contract's are" in generations.schema_problem(
        tmp_path / "b.parquet", generations.REJECTED
    )
