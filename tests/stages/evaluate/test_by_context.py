"""Acceptance by context length: the one-pass replay equals the chain decoding loop, round by round."""

import pytest

from eagle3_core.stages.evaluate.buckets import ContextCounters, bucket_labels, context_block, match_runs, replay
from eagle3_core.stages.evaluate.metrics import SpecCounters
from eagle3_core.stages.evaluate.offline import ChainDecoder


def export_of(kind: str, path, target, seed: int):
    from tests.stages.evaluate.models import make_block_export, make_export

    return (
        make_export(path, target, seed=seed) if kind == "eagle3" else make_block_export(kind, path, target, seed=seed)
    )


@pytest.mark.parametrize(
    "kind,k", [("eagle3", 1), ("eagle3", 3), ("eagle3", 5), ("dflash", 1), ("dflash", 3), ("dspark", 1), ("dspark", 3)]
)
def test_the_replay_on_the_targets_own_answer_counts_what_the_chain_loop_counted(tiny_target, tmp_path, kind, k):
    """Every kind, round by round: EAGLE-3's chain, and a block drafter's block anchored at i+1 in one
    pass (``block_predictions``) against the loop's one block per round (``propose``). Drafters that
    agree with the target now and then, so accepted counts are not all zero."""
    found, M = [], 24
    for seed in range(3):
        decoder = ChainDecoder.load(tiny_target, export_of(kind, tmp_path / f"e{seed}", tiny_target, seed))
        for prompt in ([5, 17, 42, 8], [70, 3, 3, 3, 3]):
            looped = SpecCounters()
            answer = decoder.decode(prompt, k=k, max_tokens=M, counters=looped)
            # the loop counts drafts kept past max_tokens before it cuts: match against a longer answer
            longer = decoder.decode(prompt, k=1, max_tokens=M + k + 1, counters=SpecCounters())
            assert longer[:M] == answer
            runs = match_runs(decoder.drafter, decoder.target, decoder.aux_ids, prompt + longer, k)
            replayed = ContextCounters([8, 16])
            replay(runs, len(prompt), len(prompt) + M, k, replayed)
            total = replayed.total()
            assert (total.drafts, total.accepted, total.accepted_per_pos) == (
                looped.drafts,
                looped.accepted,
                looped.accepted_per_pos,
            )
            assert sum(b.drafts for b in replayed.buckets[1:]) > 0  # rounds past 8 tokens land in later buckets
            found.append(looped.accepted)
    assert any(found), "no draft was ever accepted: the comparison proved nothing"


def test_a_round_counts_in_the_bucket_of_its_context_length():
    counters = ContextCounters([512, 2048])
    for context in (1, 511, 512, 2047, 2048, 90_000):
        counters.record(context, 3, 1)
    assert [b.drafts for b in counters.buckets] == [2, 2, 2]
    assert bucket_labels([512, 2048, 4096, 8192]) == ["0-512", "512-2K", "2K-4K", "4K-8K", "8K+"]


def test_the_report_block_lists_beyond_only_when_an_answer_reached_it():
    short = {k: ContextCounters([512, 2048]) for k in (1, 3)}
    for k, c in short.items():
        c.record(100, k, 1)
        c.record(600, k, 0)
    block = context_block(short, 3, "vllm")
    assert [b["label"] for b in block["buckets"]] == ["0-512", "512-2K"]
    assert block["buckets"][0]["acceptance_length"] == 2.0 and block["buckets"][1]["acceptance_length"] == 1.0
    assert block["buckets"][0]["acceptance_length_by_k"] == {"1": 2.0, "3": 2.0}
    assert block["total"]["acceptance_length"] == 1.5
    short[3].record(5000, 3, 3)
    assert [b["label"] for b in context_block(short, 3, "vllm")["buckets"]][-1] == "2K+"


@pytest.mark.parametrize("edges", [[512, 512], [2048, 512], [], [0, 512]])
def test_context_buckets_that_do_not_increase_are_a_config_error_naming_the_field(tmp_path, edges):
    from eagle3_core.config import PipelineConfig
    from eagle3_core.errors import ConfigError

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"evaluate:\n  context_buckets: {edges}\n")
    with pytest.raises(ConfigError, match="evaluate.context_buckets"):
        PipelineConfig.from_yaml(recipe)


def test_an_evaluation_reports_acceptance_by_context_with_its_plot_and_headline(chat_target, chat_export, tmp_path):
    import json

    from eagle3_core.run.layout import RunLayout
    from eagle3_core.run.summary import headline
    from eagle3_core.stages.evaluate.config import EvaluateConfig
    from eagle3_core.stages.evaluate.stage import run_evaluate
    from eagle3_core.target.config import TargetConfig

    cfg = EvaluateConfig(
        online=False, max_tokens=24, k_sweep=[1, 2], num_speculative_tokens=2, threads=1, context_buckets=[16, 32]
    )
    layout = RunLayout(root=tmp_path)
    manifest = run_evaluate(cfg, TargetConfig(path=str(chat_target)), chat_export, layout.eval, None)
    report = json.loads((layout.eval / "report.json").read_text())
    block, offline = report["by_context"], report["offline"]
    assert block["source"] == "offline" and block["answers"] == offline["prompts"] and block["k"] == 2
    assert block["total"]["drafts"] == offline["drafts"]  # the same rounds as the loop that made the answers
    assert block["total"]["accepted_tokens"] <= offline["accepted_tokens"]  # none past an answer's end
    assert sum(b["drafts"] for b in block["buckets"]) == block["total"]["drafts"]
    assert [b["label"] for b in block["buckets"]][:2] == ["0-16", "16-32"]
    assert (layout.eval / "acceptance_by_context.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## Acceptance by context length (k = 2" in (layout.eval / "report.md").read_text()
    held = [b for b in block["buckets"] if b["drafts"]]
    assert len(held) >= 2  # the answers reach past 16 tokens of context
    first, last = manifest.details["acceptance_by_context"]["first"], manifest.details["acceptance_by_context"]["last"]
    assert first == {"label": "0-16", "acceptance_length": held[0]["acceptance_length"]}
    assert last == {"label": held[-1]["label"], "acceptance_length": held[-1]["acceptance_length"]}
    shown = headline(layout)["acceptance by context"]
    assert shown.startswith("0-16 tokens") and f"{held[-1]['label']} tokens" in shown and "k = 2" in shown


def test_the_summary_shows_only_buckets_that_hold_a_round():
    from eagle3_core.contracts.evaluation import ByContext

    block = {"buckets": [{"label": "0-512", "drafts": 9}, {"label": "512-2K", "drafts": 0}]}
    assert [b.label for b in ByContext.model_validate(block).ends()] == ["0-512"]
    assert ByContext.model_validate({"buckets": [{"label": "0-512", "drafts": 0}]}).ends() == []
