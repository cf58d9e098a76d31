"""train.mode is decided once (``train.plan``): the DAG, the CLI and the stage read one TrainPlan."""

from __future__ import annotations

import re
from pathlib import Path

from eagle3_core.run.manifest import StageManifest, write_manifest
from eagle3_core.stages.train.plan import decide

ROOT = Path(__file__).resolve().parents[3]


def test_an_explicit_mode_is_kept_and_says_so():
    plan = decide("online", "/nowhere/hidden")
    assert (plan.mode, plan.chosen, plan.why) == ("online", False, "train.mode is online")


def test_auto_trains_offline_on_extracts_complete_folder_and_streams_otherwise(tmp_path):
    write_manifest(tmp_path / "hidden", StageManifest(stage="extract", status="complete", config_hash="x"))
    write_manifest(tmp_path / "running", StageManifest(stage="extract", status="running", config_hash="x"))
    write_manifest(tmp_path / "sequences", StageManifest(stage="reconstruct", status="complete", config_hash="x"))
    assert decide("auto", tmp_path / "hidden").mode == "offline"
    for other in ("running", "sequences", "absent"):
        plan = decide("auto", tmp_path / other)
        assert plan.mode == "online-vllm" and plan.chosen and "no complete hidden/" in plan.why


def test_the_dag_reads_hidden_only_offline_and_offers_hidden_while_auto_is_undecided():
    offline, online, undecided = decide("offline"), decide("online-vllm"), decide("auto", None)
    assert undecided.mode == "online-vllm"  # the stage itself, with no hidden/: streamed
    assert offline.stage_inputs() == {"hidden_dir": "extract", "vocab_dir": "vocab"}
    assert online.stage_inputs() == {"vocab_dir": "vocab", "sequences_dir": "reconstruct"}
    seq, hidden = Path("run/sequences"), Path("run/hidden")
    assert offline.other_folders(seq, hidden) == {"sequences_dir": "run/sequences"}
    assert online.other_folders(seq, hidden) == {"hidden_dir": None}
    from eagle3_core.stages.train.plan import TrainPlan

    assert TrainPlan("auto", "before sequences/").other_folders(seq, hidden) == {"hidden_dir": "run/hidden"}


def test_train_mode_is_branched_on_in_train_plan_alone():
    """A comparison with a mode string elsewhere is a second decision."""
    pattern = re.compile(r"\.mode ==|mode != |mode in ")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("eagle3_core", "flows", "tasks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    others = [f for f in found if not f.startswith("eagle3_core/stages/train/plan.py")]
    assert others == [] and any(f.startswith("eagle3_core/stages/train/plan.py") for f in found)
