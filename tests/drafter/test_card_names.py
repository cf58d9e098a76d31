"""The model card names the target by a hub id or a name, never by a path of this machine: the
name eagle3's server gave it (its folder's name, or serve.served_model_name), a hub id in its
config.json's `_name_or_path`, and for a run an older eagle3 served by its path, that folder's name."""

import json

from eagle3_core.contracts.evaluation import EvaluationReport
from eagle3_core.drafter.card import CARD_FILE, update_card, write_card
from eagle3_core.run.manifest import StageManifest
from eagle3_core.stages.train.config import TrainConfig
from eagle3_core.stages.train.inputs import TrainInputs
from eagle3_core.stages.train.provenance import target_name
from tests.drafter.test_card import ABSOLUTE_PATH, FACTS, TRAINING, export, report  # noqa: F401 (fixture)


def named(tmp_path, served: str | None, name_or_path: str | None = None, base_model: str | None = None) -> str:
    """``target_name`` for a target folder ``tmp_path/models/Kimi-K2.5`` that generate's server called ``served``."""
    folder = tmp_path / "models" / "Kimi-K2.5"
    folder.mkdir(parents=True, exist_ok=True)
    config = {"model_type": "kimi_k25"} | ({"_name_or_path": name_or_path} if name_or_path else {})
    (folder / "config.json").write_text(json.dumps(config))
    inputs = TrainInputs(str(folder), config, "vocab.safetensors", 8, [1, 2, 3], "offline")
    generations = StageManifest(
        stage="generate", status="complete", config_hash="x", details={"model": served} if served else {}
    )
    cfg = TrainConfig.model_validate({"tracking": {"base_model": base_model}})
    return target_name(cfg, inputs, generations)


def test_the_target_is_named_by_a_hub_id_before_a_bare_name_and_never_by_a_path(tmp_path):
    folder = str(tmp_path / "models" / "Kimi-K2.5")

    assert named(tmp_path, "toy") == "toy"  # the name eagle3's server gave it
    assert named(tmp_path, "Kimi-K2.5", "moonshotai/Kimi-K2.5") == "moonshotai/Kimi-K2.5"  # a hub id wins
    assert named(tmp_path, "acme/kimi-ft", "moonshotai/Kimi-K2.5") == "acme/kimi-ft"  # the server's own hub id
    assert named(tmp_path, folder, "/data/ckpt-300") == "Kimi-K2.5"  # an older run served it by its path
    assert named(tmp_path, None, "./ckpt") == "Kimi-K2.5"  # a relative path is a path too
    assert named(tmp_path, folder, base_model="moonshotai/Kimi-K2.5") == "moonshotai/Kimi-K2.5"  # configured


def test_a_card_written_from_an_older_runs_facts_shows_no_path(export):  # noqa: F811
    """An older run recorded vLLM's default served name, the target's path: the card shows its folder's name."""
    from huggingface_hub import ModelCard

    older = FACTS | {"target": "/models/kimi k2.5", "data": FACTS["data"] | {"served_model": "/models/kimi k2.5"}}
    write_card(export, older, TRAINING)
    update_card(export, EvaluationReport.of(report(export)))
    text = (export / CARD_FILE).read_text()

    assert ABSOLUTE_PATH.findall(text) == [], ABSOLUTE_PATH.findall(text)
    assert "/models" not in text and "| served model | kimi k2.5 |" in text
    assert ModelCard.load(export / CARD_FILE).data.base_model is None  # a folder's name is no hub id: not linked


def test_the_evaluated_command_is_the_same_whatever_port_evaluate_drew():
    """Evaluate draws a free port each run: kept, it rewrote the card (and its hub commit) at every evaluation."""
    from eagle3_core.drafter.card import portable_command

    def argv(port: int) -> list[str]:
        spec = json.dumps({"method": "eagle3", "model": "/runs/x/drafter/export", "num_speculative_tokens": 3})
        server = ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/t"]
        return [*server, "--port", str(port), "--speculative-config", spec]

    names = ("org/target", "org/drafter")
    first, second = portable_command(argv(41234), names), portable_command(argv(53771), names)
    assert first == second and first[first.index("--port") + 1] == "8000"
    assert (
        "/models/t" not in first
        and json.loads(first[first.index("--speculative-config") + 1])["model"] == "org/drafter"
    )
