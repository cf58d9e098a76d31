"""The headline figures are read back from what the stages wrote, and never invented."""

import json

from eagle3_core.run.layout import RunLayout
from eagle3_core.run.manifest import StageManifest, write_manifest
from eagle3_core.run.summary import headline


def test_headline_reads_each_figure_from_its_stages_files(tmp_path):
    layout = RunLayout(root=tmp_path)
    write_manifest(
        layout.generations,
        StageManifest(
            stage="generate",
            status="complete",
            config_hash="h",
            counts={"accepted": 98, "rejected": 2},
            details={"reasoning_sources": {"reasoning": 98}},
        ),
    )
    write_manifest(
        layout.sequences,
        StageManifest(
            stage="reconstruct",
            status="complete",
            config_hash="h",
            details={"server_check": {"checked": 98, "matched": 98, "match_rate": 1.0}},
        ),
    )
    layout.drafter.mkdir(parents=True)
    (layout.drafter / "metrics.jsonl").write_text(
        '{"step": 1, "loss": 3.5}\n{"step": 2, "loss": 2.25}\n{"step": 2, "split": "heldout", "loss": 2.9}\n'
    )
    layout.eval.mkdir(parents=True)
    (layout.eval / "report.json").write_text(
        json.dumps({"online": {"with_drafter": {"acceptance_length": 2.4}}, "offline": {"acceptance_length": 2.5}})
    )

    figures = headline(layout)

    assert figures == {
        "samples accepted": 98,
        "samples rejected": 2,
        "reasoning present": "98 of 98 (98 in `reasoning`)",
        "token-exact reconstruction": "100.0% of samples match the server's token ids",
        "training loss": 2.25,
        "acceptance length (vLLM)": 2.4,
        "acceptance length (offline)": 2.5,
    }  # offline training: no engine row


def test_a_match_rate_under_99_percent_reads_as_a_warning_in_the_headline(tmp_path):
    from collections import Counter

    from eagle3_core.stages.reconstruct.server_check import server_check

    layout = RunLayout(root=tmp_path)
    check = server_check(Counter(server_checked=18, server_matched=17), "server")
    write_manifest(
        layout.sequences,
        StageManifest(stage="reconstruct", status="complete", config_hash="h", details={"server_check": check}),
    )

    assert headline(layout)["token-exact reconstruction"] == (
        "94.4% of samples match the server's token ids (under 99%: check the recipe's tokenizer and chat template)"
    )


def test_figures_of_stages_that_did_not_run_are_absent_not_guessed(tmp_path):
    assert set(headline(RunLayout(root=tmp_path)).values()) == {None}


def test_the_summary_names_the_engine_online_training_read_its_states_from(tmp_path):
    layout = RunLayout(root=tmp_path)
    online = {"engine": "vllm", "endpoint": "http://10.0.0.7:8790", "engine_tokens": 1200}
    write_manifest(
        layout.drafter, StageManifest(stage="train", status="complete", config_hash="h", details={"online": online})
    )
    assert headline(layout)["hidden-state engine"] == "standing engine at http://10.0.0.7:8790"
    write_manifest(
        layout.drafter,
        StageManifest(
            stage="train", status="complete", config_hash="h", details={"online": {**online, "endpoint": None}}
        ),
    )
    assert headline(layout)["hidden-state engine"] == "vllm engine started by the stage"


def test_where_vllm_refused_the_drafter_the_headline_quotes_it_beside_the_offline_figure(tmp_path):
    layout = RunLayout(root=tmp_path)
    layout.eval.mkdir(parents=True)
    message = "Model Runner V1 does not support: dspark speculative decoding"
    (layout.eval / "report.json").write_text(
        json.dumps({"online": None, "vllm_refusal": {"message": message}, "offline": {"acceptance_length": 2.2}})
    )
    figures = headline(layout)
    assert figures["acceptance length (vLLM)"] == (
        f"refused by vLLM on this machine: {message} (the offline figure stands)"
    )
    assert figures["acceptance length (offline)"] == 2.2


def test_thinking_on_and_off_and_the_lossless_line_are_in_the_headline_where_evaluate_measured_them(tmp_path):
    layout = RunLayout(root=tmp_path)
    layout.eval.mkdir(parents=True)
    line = "Lossless (greedy): 16 of 16 outputs identical with and without the drafter."
    modes = {"on": {"acceptance_length": 3.14159}, "off": {"acceptance_length": 2.5}}
    report = {
        "online": {"with_drafter": {"acceptance_length": 3.14159}, "lossless": {"line": line}},
        "thinking": {"switch": "enable_thinking", "trained_in": "on", "modes": modes},
    }
    (layout.eval / "report.json").write_text(json.dumps(report))
    figures = headline(layout)
    assert figures["acceptance by thinking mode"] == "on 3.142, off 2.5 (trained with thinking on)"
    assert figures["lossless"] == line
