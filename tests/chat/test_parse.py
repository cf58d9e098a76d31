"""Reasoning is read from the field the server used, byte-exact, never doubled."""

import pytest

from eagle3_core.chat.parse import (
    MalformedBody,
    parse_completion,
    reasoning_layout,
    split_reasoning,
    unknown_id_fields,
)


def body(message, finish="stop", **top):
    return {"choices": [{"message": message, "finish_reason": finish}], **top}


def test_reasoning_field_wins_and_is_not_added_to_reasoning_content():
    message = {"reasoning": " same\n", "reasoning_content": " same\n", "content": "\nA"}
    assert split_reasoning(message) == (" same\n", "\nA", "reasoning")
    assert reasoning_layout(message) == "both"


def test_reasoning_content_is_read_when_reasoning_is_absent_or_null():
    assert split_reasoning({"reasoning": None, "reasoning_content": "\n r", "content": "a"}) == (
        "\n r",
        "a",
        "reasoning_content",
    )


def test_inline_think_tags_are_split_byte_exact():
    message = {"content": "<think> step 1\nstep 2\n</think>\n\nThe answer."}
    assert split_reasoning(message) == (" step 1\nstep 2\n", "\n\nThe answer.", "think_tags")


def test_a_close_tag_without_open_tag_is_the_kimi_template_case():
    # the template's generation prompt ends with <think>: the model only writes the close tag
    assert split_reasoning({"content": "thinking</think>answer"}) == ("thinking", "answer", "think_tags")


def test_an_unclosed_think_tag_cut_by_length_is_all_reasoning():
    assert split_reasoning({"content": "<think>half a thou"}) == ("half a thou", "", "think_tags")


def test_no_reasoning_anywhere_says_none():
    assert split_reasoning({"content": "plain"}) == ("", "plain", None)
    assert reasoning_layout({"content": "plain", "reasoning": ""}) == "none"


def test_vllm_token_ids_and_usage_are_read_from_their_places():
    completion = parse_completion(
        body(
            {"reasoning": "r", "content": None},
            finish="length",
            prompt_token_ids=[1, 2],
            usage={"prompt_tokens": 2, "completion_tokens": 3},
        )
        | {
            "choices": [
                {"message": {"reasoning": "r", "content": None}, "finish_reason": "length", "token_ids": [5, 6, 7]}
            ]
        }
    )
    assert completion.prompt_token_ids == [1, 2] and completion.completion_token_ids == [5, 6, 7]
    assert completion.content == "" and completion.finish_reason == "length"
    assert (completion.prompt_tokens, completion.completion_tokens) == (2, 3)


@pytest.mark.parametrize("bad", [{}, {"choices": []}, {"choices": [{"text": "x"}]}, [1, 2], None])
def test_a_body_without_a_message_is_malformed(bad):
    with pytest.raises(MalformedBody):
        parse_completion(bad)


def choice_with(**ids) -> dict:
    return {"message": {"reasoning_content": "r", "content": "a"}, "finish_reason": "stop"} | ids


def test_sglang_0_5_23_response_token_ids_inside_the_choice_are_read_and_named():
    completion = parse_completion({"choices": [choice_with(prompt_token_ids=[1, 2], response_token_ids=[3, 4])]})
    assert (completion.prompt_token_ids, completion.completion_token_ids) == ([1, 2], [3, 4])
    assert completion.id_layout == "sglang"


def test_sglang_sglext_output_ids_count_as_completion_ids_where_they_are_all_it_sent():
    completion = parse_completion({"choices": [choice_with(prompt_token_ids=[1], sglext={"output_ids": [5, 6]})]})
    assert (completion.prompt_token_ids, completion.completion_token_ids, completion.id_layout) == (
        [1],
        [5, 6],
        "sglang",
    )


def test_sglang_before_0_5_23_token_ids_inside_the_choice_are_read_and_named():
    completion = parse_completion({"choices": [choice_with(prompt_token_ids=[1, 2], token_ids=[3, 4])]})
    assert (completion.prompt_token_ids, completion.completion_token_ids) == ([1, 2], [3, 4])
    assert completion.id_layout == "sglang_legacy"


def test_the_id_layout_says_vllm_or_none():
    vllm = body({"reasoning": "r", "content": "a"}, prompt_token_ids=[1]) | {
        "choices": [{"message": {"reasoning": "r", "content": "a"}, "finish_reason": "stop", "token_ids": [2]}]
    }
    assert parse_completion(vllm).id_layout == "vllm"
    assert parse_completion(body({"reasoning": "r", "content": "a"})).id_layout == "none"


def test_prompt_ids_with_null_completion_ids_are_prompt_only_not_ids_returned():
    completion = parse_completion({"prompt_token_ids": [1, 2], "choices": [choice_with(token_ids=None)]})
    assert (completion.completion_token_ids, completion.id_layout) == (None, "prompt_only")


def test_ids_in_a_place_no_known_server_uses_are_an_unknown_layout_that_names_the_field():
    bad = {"choices": [choice_with(output_token_ids=[3, 4])]}
    assert parse_completion(bad).id_layout == "unknown"
    assert unknown_id_fields(bad, bad["choices"][0]) == ["choices[0].output_token_ids"]


def test_tool_calls_are_kept_as_the_server_parsed_them():
    call = {"id": "c0", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    completion = parse_completion(body({"reasoning": "r", "content": None, "tool_calls": [call]}, finish="tool_calls"))
    assert completion.tool_calls == [call] and completion.content == ""
    assert parse_completion(body({"reasoning": "r", "content": "a", "tool_calls": []})).tool_calls is None


# vLLM 0.32's `metrics` as its chat serving writes it (entrypoints/openai/chat_completion/serving.py builds
# PerRequestMetrics, entrypoints/generate/base/protocol.py; `speculative_decoding` is
# RequestSpecDecodeMetrics.to_dict of vllm/v1/metrics/stats.py: the per-step lists only once a step ran)
TIMING = {"time_to_first_token_ms": None, "generation_time_ms": None, "queue_time_ms": None, "mean_itl_ms": None}
SPEC = {
    "mean_acceptance_length": 2.5,
    "draft_acceptance_rate": 0.5,
    "acceptance_histogram": [1, 1, 1, 1],
    "num_spec_steps": 4,
    "num_accepted_draft_tokens": 6,
    "num_draft_tokens": 12,
    "num_spec_tokens": 3,
    "per_step_accepted": [2, 0, 3, 1],
    "per_step_drafted": [3, 3, 3, 3],
}


def with_metrics(metrics) -> dict:
    return body({"reasoning": "r", "content": "a"}, metrics=metrics, prompt_token_ids=[1]) | {
        "choices": [{"message": {"content": "a"}, "finish_reason": "stop", "token_ids": [2, 3, 4]}]
    }


def test_vllms_per_request_verify_steps_are_kept_in_order():
    """vllm/v1/metrics/stats.py RequestSpecDecodeMetrics.to_dict at the `detailed` level."""
    completion = parse_completion(with_metrics({**TIMING, "tokens_per_second": None, "speculative_decoding": SPEC}))
    steps = completion.spec_decode
    assert (steps.accepted, steps.drafted) == ((2, 0, 3, 1), (3, 3, 3, 3))
    assert (steps.histogram, steps.num_spec_tokens) == ((1, 1, 1, 1), 3)
    assert completion.completion_token_ids == [2, 3, 4]  # the rest of the answer as before


def test_an_answer_with_no_verify_step_has_empty_steps_not_none():
    """to_dict leaves the per-step lists out when no step ran (k = 0, a one-token answer): null in the body."""
    none_ran = {**SPEC, "acceptance_histogram": [0, 0, 0, 0], "num_spec_steps": 0, "num_accepted_draft_tokens": 0}
    none_ran |= {"num_draft_tokens": 0, "mean_acceptance_length": 1.0, "per_step_accepted": None}
    none_ran |= {"per_step_drafted": None, "draft_acceptance_rate": 0.0}
    steps = parse_completion(with_metrics({"speculative_decoding": none_ran})).spec_decode
    assert (steps.accepted, steps.drafted, steps.num_spec_tokens) == ((), (), 3)


@pytest.mark.parametrize(
    "metrics",
    [
        None,  # vLLM without --per-request-spec-decode-metrics
        {**TIMING, "speculative_decoding": None},  # per-request timing only
        {"speculative_decoding": {**SPEC, "per_step_accepted": None, "per_step_drafted": None}},  # `summary`
        {"speculative_decoding": {**SPEC, "per_step_accepted": [2, 0, 3]}},  # lists of other lengths
        {"speculative_decoding": {**SPEC, "acceptance_histogram": [0, 2, 1, 1]}},  # lists the histogram denies
    ],
)
def test_no_steps_to_place_is_none(metrics):
    assert parse_completion(with_metrics(metrics)).spec_decode is None


def test_a_body_without_metrics_has_no_steps():
    """SGLang, and every server before vLLM 0.32, send no `metrics` at all."""
    assert parse_completion(body({"reasoning": "r", "content": "a"})).spec_decode is None
