"""drafter/metrics.jsonl on resume: the lines past the resumed step go, whatever state a kill left."""

from eagle3_core.stages.train.metrics import MetricsLog, read_metrics


def test_a_resume_drops_a_line_cut_by_a_kill_and_keeps_the_steps_up_to_the_checkpoint(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = MetricsLog(path)
    for step in (1, 2, 3, 4):
        log.write({"step": step, "split": "train", "loss": 1.0 / step})
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"step": 5, "split": "tra')  # the trainer was killed inside this write
    log.truncate_after(3)
    assert [r["step"] for r in read_metrics(path)] == [1, 2, 3]
