"""Resuming never runs code from a drafter folder: no pickle payload, no path out of checkpoints/."""

import json

import pytest

from eagle3_core.errors import InputError
from eagle3_core.stages.train import checkpoint


@pytest.mark.parametrize("text", ["../../etc", "step-00000003/../../x", "/tmp/step-00000003", "latest"])
def test_a_latest_that_is_not_a_tag_is_refused(tmp_path, text):
    (tmp_path / "latest").write_text(text)
    with pytest.raises(InputError, match="not a checkpoint tag") as err:
        checkpoint.latest_tag(tmp_path)
    assert err.value.path == str(tmp_path / "latest") and "delete drafter/checkpoints/" in err.value.fix


def test_a_latest_naming_a_missing_folder_is_refused(tmp_path):
    (tmp_path / "latest").write_text("step-00000003\n")
    with pytest.raises(InputError, match="step-00000003, which is not a folder in"):
        checkpoint.latest_tag(tmp_path)
    (tmp_path / "step-00000003").mkdir()
    assert checkpoint.latest_tag(tmp_path) == "step-00000003"


class Payload:
    """Unpickling this runs ``exec``, which writes the marker file: proof that the payload ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('the payload ran')",)


@pytest.mark.slow
@pytest.mark.deepspeed
def test_resuming_from_a_checkpoint_with_a_pickle_payload_refuses_it_and_the_payload_never_runs(
    tiny_run, tmp_path, monkeypatch
):
    import torch

    from eagle3_core.stages.train.config import TrainConfig
    from eagle3_core.stages.train.stage import run_train
    from eagle3_core.target.config import TargetConfig
    from tests.stages.train.test_stage import Recorder

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    cfg = TrainConfig(max_steps=6, micro_batch_tokens=256, checkpoint_every=3, heldout_fraction=0.15)
    out, target = tmp_path / "drafter", TargetConfig(path=str(tiny_run.target))
    with pytest.raises(KeyboardInterrupt):  # killed after the step-3 checkpoint
        run_train(cfg, target, tiny_run.hidden, tiny_run.vocab, out, reporter=Recorder(stop_at=4))
    states = out / "checkpoints" / "step-00000003" / "mp_rank_00_model_states.pt"
    marker = tmp_path / "marker"
    # Our own file, trusted here: load it as DeepSpeed would, then add the payload beside the weights.
    saved = torch.load(states, weights_only=False, map_location="cpu")
    saved["client_state_extra"] = Payload(marker)
    torch.save(saved, states)

    with pytest.raises(InputError, match="checkpoint file holds exec, which eagle3 refuses to unpickle") as err:
        run_train(cfg, target, tiny_run.hidden, tiny_run.vocab, out)
    assert err.value.path == str(states)
    assert not marker.exists()
    assert json.loads((out / "manifest.json").read_text())["status"] == "failed"
