"""The history rule a server's prompt ids imply, against the recipe's target.history_reasoning."""

import pytest

from eagle3_core.errors import EndpointError
from eagle3_core.preflight.history import check_rule, rule_seen


@pytest.mark.parametrize(
    ("past", "loop", "rule"),
    [(True, True, "keep"), (False, True, "interleave"), (False, False, "drop"), (False, None, "drop")],
)
def test_two_observations_name_one_rule(past, loop, rule):
    assert rule_seen(past, loop) == rule


def test_reasoning_kept_in_the_tool_loop_is_interleave_not_drop():
    """DeepSeek-V3.2's encoder, MiniMax-M2's and Qwen3's templates: dropped before the last user
    message, kept after it. A recipe that says drop is told to say interleave."""
    with pytest.raises(EndpointError) as raised:
        check_rule("drop", past_rendered=False, loop_rendered=True, url="http://h/v1")
    assert "rule for earlier reasoning is 'interleave'" in raised.value.message
    assert raised.value.fix.startswith("set target.history_reasoning: interleave")


def test_the_declared_rule_is_one_note():
    assert (
        check_rule("interleave", False, True, "u")
        == "earlier reasoning: interleave, as target.history_reasoning declares"
    )


def test_without_the_tool_case_interleave_cannot_be_told_from_drop_and_says_so():
    note = check_rule("interleave", past_rendered=False, loop_rendered=None, url="u")
    assert "tool loop was not checked" in note
    with pytest.raises(EndpointError):
        check_rule("keep", past_rendered=False, loop_rendered=None, url="u")
