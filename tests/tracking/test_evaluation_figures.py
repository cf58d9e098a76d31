"""The evaluation in the training run's trackers, read back by each tool's own reader: a handful of
scalars at the run's last step, the by-context buckets as one chart (a line per k, one point per
bucket), the whole report as one table, and the training's series as training left them."""

import json

import pytest

from eagle3_core.contracts.evaluation import EvaluationReport
from eagle3_core.stages.evaluate.tracking import evaluation_figures, log_evaluation
from eagle3_core.stages.train.tracking import log_record, metrics_of
from eagle3_core.tracking import RunSpec, Tracker, write_run_file
from tests.tracking.records import tensorboard_layout, tensorboard_scalars, tensorboard_texts, wandb_runs

K, SWEEP, LABELS = 3, [1, 2, 3, 4, 5], ["0-512", "512-2K", "2K-4K", "8K+"]
# a series per scalar and per chart line: 6 headline + 5 by-context lines here; with thinking on and off and vLLM's
# per-request steps (test below) 2 more scalars, a share and 2 + 2 lines by output position and phase: 18
MAX_SCALAR_SERIES = 18
HEADLINE = {
    "vllm_eval/acceptance_length",
    "vllm_eval/speedup",
    "vllm_eval/offline_acceptance_length",
    *(f"vllm_eval/acceptance_per_position/{i}" for i in range(K)),
}
CURVES = {f"vllm_eval/by_context/k{k}" for k in SWEEP}


@pytest.fixture(autouse=True)
def no_tracking_env(monkeypatch, tmp_path):
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NETRC", str(tmp_path / "home" / "no-netrc"))


def measurement(al: float, k: int = K) -> dict:
    return {
        "drafts": 100,
        "draft_tokens": 100 * k,
        "accepted_tokens": int(100 * (al - 1)),
        "accepted_per_position": [90 - 10 * i for i in range(k)],
        "acceptance_length": al,
        "acceptance_rate": (al - 1) / k,
        "acceptance_per_position": [0.9 - 0.1 * i for i in range(k)],
    }


def bucket(i: int, label: str) -> dict:
    by_k = {str(k): 1.0 + k * (0.8 - 0.1 * i) for k in SWEEP}
    if label == "8K+":
        by_k["5"] = None  # no round reached k = 5 there: no point, not a zero
    return {"label": label, "from": 0, "to": None, **measurement(by_k[str(K)]), "acceptance_length_by_k": by_k}


def evaluate_report() -> dict:
    """An evaluate report shaped as run_evaluate writes it (k = 3, the default sweep, 4 buckets)."""
    buckets = [bucket(i, label) for i, label in enumerate(LABELS)]
    return {
        "settings": {"num_speculative_tokens": K, "temperature": 0.0, "k_sweep": SWEEP, "dtype_online": "bfloat16"},
        "heldout": {"source": "prompts.jsonl", "prompts": 8, "skipped_rows": 0},
        "online": {
            "with_drafter": {**measurement(3.57), "output_tokens_per_s": 120.0},
            "without_drafter": {"output_tokens_per_s": 60.0},
            "speedup": 2.0,
            "speedup_spread": [1.9, 2.1],
            "engine": {"name": "vllm", "version": "0.32.0", "argv": ["/venv/bin/python", "-m", "vllm"]},
        },
        "offline": {
            **measurement(3.5),
            "prompts": 8,
            "k_sweep": [{"k": k, **measurement(1 + 0.8 * k, k)} for k in SWEEP],
        },
        "simulated": {"split": "heldout", "training_step": 6, "acceptance_length": 3.4},
        "by_context": {"k": K, "source": "vllm", "buckets": buckets, "total": measurement(3.3), "answers": 8},
        "definitions": {"acceptance_length": "1 + accepted / drafts"},
        "drafter": {"export_dir": "/somewhere/drafter/export"},
    }


def trained_run(out, names) -> list[dict]:
    """A training run's tracker fed metrics lines as the trainer writes them; tracking.json written."""
    records = [{"step": 0, "split": "heldout", "name": "initial", "loss": 5.0, "sim_acceptance_length": 1.0}]
    records += [{"step": s, "split": "train", "loss": 5.0 - s, "acc_k": [0.5], "lr": 0.003} for s in range(1, 7)]
    records += [{"step": 6, "split": "heldout", "name": "final", "loss": 1.0, "sim_acceptance_length": 3.57}]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    spec = RunSpec(out)
    tracker = Tracker.start(names, spec)
    for record in records:
        log_record(tracker, record)
    write_run_file(out, names, tracker.ids(), spec)
    tracker.close()
    return records


def test_the_evaluation_is_a_handful_of_scalars_one_chart_and_one_table():
    report = evaluate_report()
    figures = evaluation_figures(EvaluationReport.of(report))
    assert set(figures.scalars) == HEADLINE and len(figures.scalars) + len(SWEEP) <= MAX_SCALAR_SERIES
    assert figures.scalars["vllm_eval/acceptance_length"] == 3.57 and figures.scalars["vllm_eval/speedup"] == 2.0
    curve = figures.curves["vllm_eval/by_context"]
    assert curve.ticks == LABELS and list(curve.lines) == [f"k{k}" for k in SWEEP]
    assert [x for x, _ in curve.lines["k3"]] == [0, 1, 2, 3] and [x for x, _ in curve.lines["k5"]] == [0, 1, 2]
    assert curve.lines["k3"][0][1] == report["by_context"]["buckets"][0]["acceptance_length"]
    ((name, table),) = figures.tables.items()
    rows = dict(table.rows)
    assert name == "vllm_eval/report" and len(rows) <= 30  # the headline: report.json holds every figure
    assert rows["vLLM acceptance length"] == "3.57" and rows["vLLM acceptance per position"] == "0.9, 0.8, 0.7"
    assert rows["speed-up"] == "2" and rows["offline acceptance length"] == "3.5"
    assert rows["held-out prompts"] == "8 from prompts.jsonl"  # the file's name, no path of this machine
    assert rows["by context 512-2K (k = 3)"] == f"{report['by_context']['buckets'][1]['acceptance_length']:.4g}"
    assert not [v for v in rows.values() if "/somewhere" in v or "/venv" in v]
    assert "0 = 0-512, 1 = 512-2K, 2 = 2K-4K, 3 = 8K+" in table.note


def steps(al: float, phases: dict[str, float]) -> dict:
    """A per_request block as evaluate writes it: two output-position buckets, the given phases."""
    rows = [{"label": "0-256", "from": 0, "to": 256}, {"label": "256-1K", "from": 256, "to": 1024}]
    return {
        "acceptance_length": al,
        "by_position": [{**r, "drafts": 10, "acceptance_length": al - i * 0.5} for i, r in enumerate(rows)],
        "by_phase": {name: {"drafts": 10, "accepted_tokens": 5, "acceptance_length": v} for name, v in phases.items()},
        "spread": {"requests": 8, "p10": al - 0.5, "p50": al, "p90": al + 0.5},
    }


def test_thinking_on_and_off_are_a_scalar_each_and_a_line_each_by_output_position_and_by_phase():
    report = evaluate_report()
    on = {
        "acceptance_length": 3.57,
        "acceptance_per_position": [0.9],
        "per_request": steps(3.57, {"reasoning": 3.5, "answer": 3.9}),
    }
    off = {"acceptance_length": 2.1, "acceptance_per_position": [0.5], "per_request": steps(2.1, {"answer": 2.1})}
    report["online"]["with_drafter"]["per_request"] = on["per_request"]
    report["online"]["lossless"] = {
        "greedy": {"identical_share": 0.875},
        "line": "Lossless (greedy): 7 of 8 outputs identical",
    }
    report["thinking"] = {"switch": "thinking", "trained_in": "on", "modes": {"on": on, "off": off}}
    figures = evaluation_figures(EvaluationReport.of(report))
    assert figures.scalars["vllm_eval/thinking_off/acceptance_length"] == 2.1
    assert figures.scalars["vllm_eval/identical_outputs_share"] == 0.875
    positions, phases = figures.curves["vllm_eval/by_output_position"], figures.curves["vllm_eval/by_phase"]
    assert positions.ticks == ["0-256", "256-1K"] and positions.lines["thinking_off"] == [(0, 2.1), (1, 1.6)]
    assert phases.ticks == ["reasoning", "answer"] and phases.lines == {
        "thinking_on": [(0, 3.5), (1, 3.9)],
        "thinking_off": [(1, 2.1)],  # no reasoning with thinking off: no point, not a zero
    }
    lines = sum(len(c.lines) for c in figures.curves.values())
    assert len(figures.scalars) + lines <= MAX_SCALAR_SERIES
    rows = dict(figures.tables["vllm_eval/report"].rows)
    assert rows["thinking off: acceptance length"] == "2.1" and rows["trained with thinking"] == "on"
    assert rows["by phase reasoning"] == "3.5" and rows["per-request spread p10 / p50 / p90"] == "3.07 / 3.57 / 4.07"
    assert rows["lossless"] == "Lossless (greedy): 7 of 8 outputs identical"


def test_without_vllm_the_offline_loop_gives_the_figures_per_position():
    report = {**evaluate_report(), "online": None, "by_context": None}
    figures = evaluation_figures(EvaluationReport.of(report))
    assert set(figures.scalars) == {"vllm_eval/offline_acceptance_length"} | {
        f"vllm_eval/offline_acceptance_per_position/{i}" for i in range(K)
    }
    assert figures.curves == {} and list(figures.tables) == ["vllm_eval/report"]


def test_the_final_heldout_figure_is_also_a_series_of_one_point():
    final = {"step": 6, "split": "heldout", "name": "final", "loss": 1.0, "sim_acceptance_length": 3.57}
    assert metrics_of(final)["heldout/final_sim_acceptance_length"] == 3.57
    assert "heldout/final_sim_acceptance_length" not in metrics_of({**final, "name": "step-4"})


def test_tensorboard_shows_the_evaluation_at_a_glance_beside_training_untouched(tmp_path):
    trained_run(tmp_path, ["tensorboard"])
    before = tensorboard_scalars(tmp_path / "tensorboard")
    lines = []
    report = evaluate_report()
    log_evaluation(tmp_path, EvaluationReport.of(report), lines.append)
    after = tensorboard_scalars(tmp_path / "tensorboard")
    assert lines == ["evaluate: figures logged to the training run (tensorboard)"]
    assert {t: v for t, v in after.items() if t in before} == before  # training's series as they were
    assert before["heldout/sim_acceptance_length"] == [(6, pytest.approx(3.57))]
    assert before["heldout/initial/sim_acceptance_length"] == [(0, 1.0)]
    assert before["heldout/final_sim_acceptance_length"] == [(6, pytest.approx(3.57))]
    added = set(after) - set(before)
    assert added == HEADLINE | CURVES and len(added) <= MAX_SCALAR_SERIES
    assert all(after[t] == [(6, pytest.approx(after[t][0][1]))] for t in HEADLINE)  # one point, the last step
    assert after["vllm_eval/acceptance_length"][0][1] == pytest.approx(3.57)
    buckets = report["by_context"]["buckets"]
    for k in SWEEP:  # one point per bucket per k, x = the bucket's index
        expected = [(i, b["acceptance_length_by_k"][str(k)]) for i, b in enumerate(buckets)]
        assert after[f"vllm_eval/by_context/k{k}"] == [(i, pytest.approx(v)) for i, v in expected if v is not None]
    chart = tensorboard_layout(tmp_path / "tensorboard")["vllm_eval"]
    ((title, tags),) = chart.items()
    assert title.startswith("vllm_eval/by_context (x: bucket, 0 = 0-512") and len(tags) == len(SWEEP)
    text = tensorboard_texts(tmp_path / "tensorboard")["vllm_eval/report/text_summary"]
    assert "| figure | value |" in text and "| vLLM acceptance length | 3.57 |" in text


def test_mlflow_shows_the_same_shape_and_the_report_as_one_markdown_artifact(tmp_path):
    from mlflow.tracking import MlflowClient

    trained_run(tmp_path, ["mlflow"])
    ids = json.loads((tmp_path / "tracking.json").read_text())["ids"]["mlflow"]
    client = MlflowClient(tracking_uri=ids["tracking_uri"])
    before = set(client.get_run(ids["run_id"]).data.metrics)
    log_evaluation(tmp_path, EvaluationReport.of(evaluate_report()), print)
    run = client.get_run(ids["run_id"])
    added = set(run.data.metrics) - before
    assert added == HEADLINE | CURVES and len(added) <= MAX_SCALAR_SERIES
    assert [m.step for m in client.get_metric_history(run.info.run_id, "vllm_eval/acceptance_length")] == [6]
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "vllm_eval/by_context/k3")) == [0, 1, 2, 3]
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "vllm_eval/by_context/k5")) == [0, 1, 2]
    history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss"))
    assert history == [(s, 5.0 - s) for s in range(1, 7)]  # training's as it was
    (tmp_path / "got").mkdir()
    path = client.download_artifacts(run.info.run_id, "vllm_eval/report.md", str(tmp_path / "got"))
    assert "| vLLM acceptance length | 3.57 |" in open(path).read()


def test_wandb_shows_the_same_shape_summary_scalars_one_line_chart_and_one_table(tmp_path):
    trained_run(tmp_path, ["wandb"])
    log_evaluation(tmp_path, EvaluationReport.of(evaluate_report()), print)
    training, evaluation = wandb_runs(tmp_path)
    assert training["id"] == evaluation["id"]
    assert [row["_step"] for row in training["history"]] == list(range(7))  # training's as it was
    tables = ("vllm_eval/report/", "vllm_eval/by_context_table/")
    scalars = {k for k in evaluation["summary"] if k.startswith("vllm_eval/") and not k.startswith(tables)}
    assert scalars == HEADLINE and evaluation["summary"]["vllm_eval/acceptance_length"] == 3.57
    (row,) = evaluation["history"]
    folder = next(p for p in (tmp_path / "wandb").glob("offline-run-*") if (p / "files" / "media").is_dir())
    chart = json.loads((folder / "files" / row["vllm_eval/by_context_table/path"]).read_text())
    assert chart["columns"] == ["bucket", "tick", "line", "acceptance_length"]
    points = {(line, x) for x, _, line, _ in chart["data"]}
    assert points == {(f"k{k}", i) for k in SWEEP for i in range(len(LABELS))} - {("k5", 3)}
    table = json.loads((folder / "files" / row["vllm_eval/report/path"]).read_text())
    assert table["columns"] == ["figure", "value"] and ["speed-up", "2"] in table["data"]
