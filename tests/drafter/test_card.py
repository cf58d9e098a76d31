"""The model card drafter/export/README.md, parsed the way a hub parses it (huggingface_hub's
ModelCard, offline): its metadata, launch lines with the export's real path and k, figures."""

import json
import re
import shlex

import pytest

from eagle3_core.contracts.evaluation import EvaluationReport
from eagle3_core.drafter.card import CARD_FILE, launch_lines, read_meta, update_card, write_card
from eagle3_core.drafter.model import Eagle3Drafter
from tests.drafter.test_model import tiny_config

FACTS = {
    "recipe_hash": "8c10e107fea8de9c",
    "train_config_hash": "0123456789abcdef",
    "eagle3_version": "0.1.0",
    "mode": "offline",
    "hidden_state_engine": "transformers (extract stage, hidden/)",
    "target": "moonshotai/Kimi-K2.5",
    "target_path": "/models/kimi k2.5",
    "data": {
        "samples": 1000,
        "tokens": 81234,
        "reasoning_share": 0.987,
        "families": ["kimi_k2_5"],
        "source": "served",
        "served_model": "moonshotai/Kimi-K2.5",
        "datasets": ["mlabonne/open-perfectblend"],
        "generated": "2026-12-01",
    },
}
TRAINING = {"steps": 116, "ttt_steps": 3, "heldout_sim_acceptance_length": 3.63}


@pytest.fixture
def export(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    Eagle3Drafter(tiny_config()).save_export(tmp_path / "export")
    return tmp_path / "export"


def report(export, k=4) -> dict:
    """The fields of an evaluate report the card reads, as run_evaluate writes them."""
    spec = json.dumps({"method": "eagle3", "model": str(export.resolve()), "num_speculative_tokens": k})
    argv = ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/kimi k2.5"]
    argv += ["--port", "8011", "--speculative-config", spec]
    return {
        "settings": {"num_speculative_tokens": k, "temperature": 0.0},
        "heldout": {"source": "/data/heldout.jsonl", "prompts": 100},
        "online": {
            "with_drafter": {"acceptance_length": 3.44, "acceptance_per_position": [0.9, 0.8, 0.7, 0.5]},
            "speedup": 1.8,
            "engine": {"name": "vllm", "version": "0.32.0", "argv": argv},
        },
        "offline": {"acceptance_length": 3.41, "acceptance_per_position": [0.9, 0.8, 0.7, 0.4]},
        "simulated": {"acceptance_length": 3.63},
    }


def test_the_export_card_has_the_metadata_a_hub_reads(export):
    from huggingface_hub import ModelCard

    write_card(export, FACTS, TRAINING)
    card = ModelCard.load(export / CARD_FILE)
    assert card.data.base_model == "moonshotai/Kimi-K2.5"
    assert card.data.library_name == "vllm"
    assert {"eagle3", "speculative-decoding", "kimi_k2_5"} <= set(card.data.tags)
    assert card.data.datasets == ["mlabonne/open-perfectblend"]
    for shown in ("8c10e107fea8de9c", "0.1.0", "81234", "98.7%", "served", "2026-12-01", "Not evaluated yet"):
        assert shown in card.text, shown
    assert "| num_key_value_heads | 2 |" in card.text and "| variant | eagle3 (1 decoder layer) |" in card.text


def test_before_evaluation_the_launch_lines_name_the_hub_repository_the_target_and_the_default_k(export):
    write_card(export, FACTS | {"hub_repo": "acme/kimi-k2.5-eagle3"}, TRAINING)
    vllm, sglang = launch_lines(export, read_meta(export / CARD_FILE))
    words = shlex.split(vllm)
    assert words[:3] == ["vllm", "serve", "moonshotai/Kimi-K2.5"]
    spec = json.loads(words[words.index("--speculative-config") + 1])
    assert spec == {"method": "eagle3", "model": "acme/kimi-k2.5-eagle3", "num_speculative_tokens": 3}
    assert "--speculative-draft-model-path acme/kimi-k2.5-eagle3" in sglang
    assert "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4" in sglang
    assert vllm in (export / CARD_FILE).read_text() and sglang in (export / CARD_FILE).read_text()


def test_without_a_hub_repository_the_card_names_a_placeholder_and_says_to_replace_it(export):
    write_card(export, FACTS, TRAINING)
    text = (export / CARD_FILE).read_text()
    assert "--speculative-draft-model-path YOUR-ORG/eagle3-drafter" in text
    assert "Replace `YOUR-ORG/eagle3-drafter` with the repository this folder is uploaded to" in text


# an absolute POSIX path: a slash after a space, a quote, `=` or the line's start, then a name (no URL's //)
ABSOLUTE_PATH = re.compile(r"(?:^|[\s\"'=(])/(?!/)[\w.-]+", re.M)


def test_the_card_travels_no_absolute_path_of_this_machine_is_in_it(export):
    """Uploaded to a hub, a card with /models/... or the run's export folder is wrong for every reader."""
    from huggingface_hub import ModelCard

    write_card(export, FACTS, TRAINING)
    update_card(export, EvaluationReport.of(report(export)))
    text = (export / CARD_FILE).read_text()
    assert ABSOLUTE_PATH.findall(text) == [], ABSOLUTE_PATH.findall(text)
    for local in ("/models/kimi k2.5", str(export.resolve()), "/venv/bin/python", "/data/heldout.jsonl"):
        assert local not in text, local
    assert ModelCard.load(export / CARD_FILE).data.base_model == "moonshotai/Kimi-K2.5"  # huggingface_hub parses it


def test_evaluate_puts_its_figures_and_the_command_it_ran_into_the_card(export):
    from huggingface_hub import ModelCard

    write_card(export, FACTS, TRAINING)
    ran = report(export)
    update_card(export, EvaluationReport.of(ran))
    card = ModelCard.load(export / CARD_FILE)
    assert card.data.base_model == "moonshotai/Kimi-K2.5"  # the export's facts survive the update
    vllm, sglang = launch_lines(export, card.data.eagle3)
    words = shlex.split(vllm)
    assert words[2] == "moonshotai/Kimi-K2.5"
    spec = json.loads(words[words.index("--speculative-config") + 1])
    assert spec == {"method": "eagle3", "model": "YOUR-ORG/eagle3-drafter", "num_speculative_tokens": 4}
    assert "--speculative-num-steps 4" in sglang
    # the command it ran, marked as that machine's, its paths replaced by the names the card uses
    ran_here = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "moonshotai/Kimi-K2.5"]
    assert shlex.join(ran_here) in card.text and "on the machine that evaluated this drafter" in card.text
    for shown in ("k = 4", "temperature = 0.0", "heldout.jsonl", "vLLM 0.32.0", "3.44", "0.9, 0.8, 0.7, 0.5"):
        assert shown in card.text, shown


def test_an_export_without_a_card_gets_one_from_evaluate(export):
    update_card(export, EvaluationReport.of(report(export, k=2)))
    meta = read_meta(export / CARD_FILE)
    assert meta["evaluation"]["k"] == 2 and meta["drafter"]["draft_vocab_size"] == 20


def test_the_card_names_the_variant_the_export_config_holds():
    from eagle3_core.drafter.card import variant_name

    assert variant_name({"fc_norm": True, "norm_output": True, "num_hidden_layers": 2}) == "eagle3.1 (2 decoder layers)"
    assert variant_name({"norm_before_fc": True, "num_hidden_layers": 1}) == "eagle3 + norm_before_fc (1 decoder layer)"


def test_the_card_shows_acceptance_by_context_bucket_when_the_report_has_them(export):
    from huggingface_hub import ModelCard

    ran = report(export)
    bucket = {"drafts": 40, "acceptance_length": 3.25, "acceptance_length_by_k": {"4": 3.25}}
    empty = {**bucket, "label": "512-2K", "drafts": 0, "acceptance_length": None}
    ran["by_context"] = {"source": "vllm", "buckets": [{**bucket, "label": "0-512"}, empty]}
    write_card(export, FACTS, TRAINING)
    update_card(export, EvaluationReport.of(ran))
    text = ModelCard.load(export / CARD_FILE).text
    assert "greedy replay of the target's answers from vllm" in text and "| 0-512 | 40 | 3.25 |" in text
    assert "512-2K" not in text  # a bucket no round fell in has no figure to show


def test_where_vllm_refused_the_drafter_the_card_quotes_it_and_says_the_offline_figure_stands(export):
    from huggingface_hub import ModelCard

    refused = {**report(export, k=3), "online": None}
    refused["offline"] = {**refused["offline"], "prompts": 32}
    argv = ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/kimi k2.5"]
    message = "Model Runner V1 does not support: dspark speculative decoding"
    refused["vllm_refusal"] = {"message": message, "vllm_version": "0.32.0", "device": "cpu", "argv": argv}
    write_card(export, FACTS, TRAINING)
    update_card(export, EvaluationReport.of(refused))
    card = ModelCard.load(export / CARD_FILE)
    evaluation = card.data.eagle3["evaluation"]
    assert evaluation["vllm_refused"] == message and evaluation["acceptance_measured_by"] == "offline"
    assert (
        f"The acceptance figure is the offline transformers loop's: vLLM 0.32.0 refused this drafter on the "
        f"evaluating machine (`{message}`), so it was measured offline at the same k on 32 of those held-out prompts"
    ) in card.text
    assert (
        "| vLLM 0.32.0 | refused on the evaluating machine |" in card.text
        and "| offline transformers loop | 3.41 |" in card.text
    )
    assert "on the machine that evaluated this drafter" not in card.text  # no command ran there to show
    assert ABSOLUTE_PATH.findall(card.text) == []
    vllm, _ = launch_lines(export, card.data.eagle3)  # the launch line keeps the evaluated k
    assert json.loads(shlex.split(vllm)[-1])["num_speculative_tokens"] == 3


def test_where_vllm_ran_the_card_says_its_figure_stands(export):
    write_card(export, FACTS, TRAINING)
    update_card(export, EvaluationReport.of(report(export)))
    assert "The acceptance figure is vLLM's" in (export / CARD_FILE).read_text()
