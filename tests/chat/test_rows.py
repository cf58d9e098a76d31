"""Input rows become prompt messages, or a rejection with a reason code; never an exception."""

import pytest

from eagle3_core.chat.rows import RowRejection, normalize
from eagle3_core.contracts.generations import sent_messages, stored_messages


def test_prompt_string_becomes_one_user_turn():
    assert normalize({"prompt": "Hi"}) == [{"role": "user", "content": "Hi"}]


def test_sharegpt_conversations_map_roles_and_drop_the_trailing_answer():
    row = {
        "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": "2+2?"},
            {"from": "gpt", "value": "4"},
        ]
    }
    assert normalize(row) == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]


def test_openai_messages_keep_earlier_turns_and_drop_only_trailing_assistant_turns():
    row = {
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": " c\n"},
            {"role": "assistant", "content": "d"},
        ]
    }
    assert normalize(row) == row["messages"][:3]


@pytest.mark.parametrize(
    "row, reason",
    [
        ({"text": "no known field"}, "unknown_shape"),
        (["not", "an", "object"], "unknown_shape"),
        ({"messages": "a string"}, "unknown_shape"),
        ({"prompt": ""}, "empty_prompt"),
        ({"prompt": "   \n"}, "empty_prompt"),
        ({"messages": [{"role": "assistant", "content": "only an answer"}]}, "empty_prompt"),
        ({"prompt": 7}, "non_string_content"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}, "non_string_content"),
        ({"conversations": [{"from": "robot", "value": "x"}]}, "unknown_role"),
        ({"messages": [{"role": "user"}]}, "unknown_shape"),
    ],
)
def test_a_row_that_cannot_be_sent_is_a_rejection_with_a_reason(row, reason):
    result = normalize(row)
    assert isinstance(result, RowRejection)
    assert result.reason == reason and result.detail


CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 3}'}}
AGENT_HISTORY = [
    {"role": "user", "content": "Add 1 and 3."},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "4"},
    {"role": "assistant", "content": "It is 4."},
]


def test_an_agents_history_keeps_its_tool_calls_and_results_and_ends_with_the_tool_turn():
    messages = normalize({"messages": AGENT_HISTORY})

    assert messages == [
        {"role": "user", "content": "Add 1 and 3."},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},  # OpenAI's null content beside calls
        {"role": "tool", "content": "4", "tool_call_id": "c1", "name": "add"},
    ]  # the final answer is dropped: the target answers the tool's result itself
    assert sent_messages(stored_messages(messages)) == messages  # what a record holds renders the same prompt


def test_a_plain_prompt_keeps_its_sample_id_now_that_turns_may_carry_tool_fields():
    plain = normalize({"messages": [{"role": "user", "content": "x"}]})
    assert plain == [{"role": "user", "content": "x"}]  # no empty tool fields that would change its key
    assert sent_messages(stored_messages(plain)) == plain


def test_an_empty_tool_calls_list_is_no_tool_calls_on_any_turn():
    exported = [  # as some OpenAI-format exports write every turn
        {"role": "system", "content": "s", "tool_calls": []},
        {"role": "user", "content": "x", "tool_calls": []},
    ]
    plain = [{"role": "system", "content": "s"}, {"role": "user", "content": "x"}]
    assert normalize({"messages": exported}) == plain  # the same prompt, so the same sample id


@pytest.mark.parametrize(
    "turn",
    [
        {"role": "user", "content": "x", "tool_calls": [CALL]},  # only an assistant calls tools
        {"role": "assistant", "content": None, "tool_calls": "add(1, 3)"},
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"arguments": "{}"}}]},  # no name
    ],
)
def test_tool_calls_that_are_not_an_assistants_openai_calls_are_rejected(turn):
    result = normalize({"messages": [{"role": "user", "content": "q"}, turn, {"role": "user", "content": "q2"}]})
    assert isinstance(result, RowRejection) and result.reason == "invalid_tool_calls" and "turn 1" in result.detail


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_an_earlier_turns_reasoning_is_kept_and_sent_under_both_names(field):
    row = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", field: "r"}]}
    messages = normalize(row | {"messages": row["messages"] + [{"role": "user", "content": "c"}]})
    assert messages[1] == {"role": "assistant", "content": "b", "reasoning": "r", "reasoning_content": "r"}
    assert stored_messages(messages)[1]["reasoning"] == "r"
    assert sent_messages(stored_messages(messages)) == messages
