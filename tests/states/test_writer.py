"""The one NaN/Inf refusal on hidden states (``states.writer.refuse_non_finite``): what the target has just
made is the target's fault, what is read back from a file is a damaged input; both name the sample and
the file."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from eagle3_core.errors import InputError, StageError
from eagle3_core.states.writer import refuse_non_finite

HIDDEN = 8


def states(poison: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    aux, final = torch.zeros(3, 3, HIDDEN), torch.zeros(3, HIDDEN)  # (T, 3, H), (T, H)
    if poison is not None:
        final[1, 2] = poison
    return aux, final


def test_finite_states_pass():
    refuse_non_finite(*states(), "s1", Path("hidden/shard-00000.safetensors"))


@pytest.mark.parametrize("poison", [float("nan"), float("inf"), float("-inf")])
def test_states_the_target_just_made_are_the_targets_fault(poison):
    with pytest.raises(StageError, match="the target produced NaN or Inf in the hidden states of sample s1") as err:
        refuse_non_finite(*states(poison), "s1", Path("hidden/shard-00000.safetensors"))
    assert err.value.sample_id == "s1" and err.value.path == "hidden/shard-00000.safetensors"
    assert "dtype" in err.value.fix and not isinstance(err.value, InputError)


def test_states_read_back_from_a_file_are_a_damaged_input_that_the_writing_stage_redoes():
    aux, final = states()
    aux[0, 1, 0] = float("nan")
    with pytest.raises(InputError, match="NaN or Inf in the hidden states of sample s2") as err:
        refuse_non_finite(aux, final, "s2", Path("hidden/shard-00001.safetensors"), written_by="extract")
    assert err.value.path == "hidden/shard-00001.safetensors"
    assert "rerun `eagle3 extract`" in err.value.fix


def test_there_is_one_refusal_in_eagle3_core():
    """The trainer's readers once kept a copy with another error and another fix: one definition now."""
    core = Path(__file__).resolve().parents[2] / "eagle3_core"
    defined = [p.relative_to(core) for p in core.rglob("*.py") if "def refuse_non_finite(" in p.read_text()]
    assert defined == [Path("states/writer.py")]
