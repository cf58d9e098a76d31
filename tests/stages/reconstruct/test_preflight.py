"""`eagle3 probe --recipe`: one request; the server's ids against the reconstruction of its own text."""

from __future__ import annotations

import json

import pytest
import yaml

from eagle3_core.preflight.history import HISTORY_CASES
from eagle3_core.preflight.suite import SUITE
from tests.cli_helpers import cli_error
from tests.fixtures.fake_answers import FamilyTokens
from tests.stages.reconstruct.families import FAMILIES


def family_tokens(family: str, tokenizers) -> FamilyTokens:
    """The fake server's view of a family: its reasoning markers (a think pair or harmony's channel
    headers, as the recipe declares them), end-of-turn and tool-call tokens."""
    from eagle3_core.target.config import TargetConfig
    from tests.stages.reconstruct.conftest import ALL_FAMILIES

    fam = ALL_FAMILIES[family]
    markers = TargetConfig(**fam.target).reasoning_markers() or (None, None)
    return FamilyTokens(tokenizers[family], *markers, fam.target["end_of_turn"], fam.tool_call, fam.tool_call_end)


def recipe(tmp_path, family: str, family_dirs, url: str, **chat) -> str:
    path = tmp_path / "recipe.yaml"
    target = {**FAMILIES[family].target, "path": str(family_dirs[family]), "chat": chat}
    path.write_text(yaml.safe_dump({"target": target, "generate": {"base_urls": [url]}}), encoding="utf-8")
    return str(path)


def run_probe(argv: list[str], capsys) -> str:
    from flows.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.argv", ["eagle3", *argv])
        main()
    return capsys.readouterr().out


def test_a_recipe_that_agrees_with_the_server_passes(
    tmp_path, family_dirs, family_tokenizers, make_fake_server, capsys
):
    server = make_fake_server(modes=("spaces_around_specials",), family=family_tokens("kimi_k2_5", family_tokenizers))
    out = run_probe(
        [
            "probe",
            "--recipe",
            recipe(tmp_path, "kimi_k2_5", family_dirs, server.url, spaces_between_special_tokens=False),
        ],
        capsys,
    )
    assert (
        "the server's" in out and "token ids equal the reconstruction of its own text (ids in the vllm layout)" in out
    )


def test_spaces_around_special_tokens_are_shown_and_named(
    tmp_path, family_dirs, family_tokenizers, make_fake_server, capsys
):
    server = make_fake_server(modes=("spaces_around_specials",), family=family_tokens("kimi_k2_5", family_tokenizers))
    err = cli_error(["probe", "--recipe", recipe(tmp_path, "kimi_k2_5", family_dirs, server.url)], capsys)
    assert "differ from the reconstruction of its own text" in err and "(in the completion)" in err
    assert "rebuilt [' '," in err  # the invented space shows as the first differing token
    assert "spaces_between_special_tokens: false" in err


def test_sglangs_stripped_reasoning_is_caught_through_its_id_layout(
    tmp_path, family_dirs, family_tokenizers, make_fake_server, capsys
):
    server = make_fake_server(
        modes=("sglang_ids", "stripped_reasoning"), family=family_tokens("kimi_k2_5", family_tokenizers)
    )
    err = cli_error(["probe", "--recipe", recipe(tmp_path, "kimi_k2_5", family_dirs, server.url)], capsys)
    assert "SGLang strips the reasoning" in err


def test_a_prompt_rendered_differently_points_at_the_template_settings(
    tmp_path, family_dirs, family_tokenizers, make_fake_server, capsys
):
    # the server runs R1-0528's template (no forced <think>); the recipe's tokenizer has R1's
    server = make_fake_server(family=family_tokens("deepseek_r1_0528", family_tokenizers))
    err = cli_error(["probe", "--recipe", recipe(tmp_path, "deepseek_r1", family_dirs, server.url)], capsys)
    assert "(in the prompt)" in err and "chat_template_kwargs" in err


def test_a_server_without_ids_cannot_be_checked_and_says_so(
    tmp_path, family_dirs, make_fake_server, capsys, monkeypatch
):
    server = make_fake_server()
    monkeypatch.setattr(
        server,
        "completion",
        lambda payload, fault=None: {
            "choices": [{"message": {"role": "assistant", "reasoning": "r", "content": "a"}, "finish_reason": "stop"}]
        },
    )
    err = cli_error(["probe", "--recipe", recipe(tmp_path, "kimi_k2_5", family_dirs, server.url)], capsys)
    assert "returned no token ids" in err


def test_a_think_close_the_model_repeats_is_told_in_each_case_not_taken_for_a_recipe_error(
    tmp_path, family_dirs, family_tokenizers, make_fake_server, capsys
):
    family = family_tokens("kimi_k2_5", family_tokenizers)
    server = make_fake_server(modes=("repeated_think_close",), family=family)
    out = run_probe(["probe", "--recipe", recipe(tmp_path, "kimi_k2_5", family_dirs, server.url)], capsys)
    lines = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    assert "token ids equal the reconstruction of its own text" in out and len(lines) == len(SUITE) + 1
    assert all("ids equal but for 1 think-close token(s) the model wrote again" in line for line in lines[:-1])
    assert lines[-1].startswith("history: earlier reasoning: ")  # the served rule, from its prompt ids


def test_a_repeated_think_close_does_not_hide_another_difference(
    tmp_path, family_dirs, family_tokenizers, make_fake_server, capsys
):
    family = family_tokens("kimi_k2_5", family_tokenizers)
    server = make_fake_server(modes=("repeated_think_close", "spaces_around_specials"), family=family)
    err = cli_error(["probe", "--recipe", recipe(tmp_path, "kimi_k2_5", family_dirs, server.url)], capsys)
    assert "differ from the reconstruction of its own text" in err and "spaces_between_special_tokens: false" in err


def test_a_probe_without_an_endpoint_says_so_before_building_the_toy_target(tmp_path, capsys):
    # a toy recipe names no endpoint; the toy's cache is a file, so a build would fail at once
    # instead of training for minutes before the command says what was missing
    (tmp_path / "cache").write_text("not a directory")
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({"toy": {"cache_dir": str(tmp_path / "cache")}}), encoding="utf-8")

    err = cli_error(["probe", "--recipe", str(path)], capsys)

    assert "error: no endpoint to check" in err and "--base-url" in err


def test_the_suite_reports_every_case_with_where_its_turn_ended(
    tmp_path, family_dirs, family_tokenizers, make_fake_server, capsys
):
    server = make_fake_server(modes=("tool_calls",), family=family_tokens("qwen3", family_tokenizers))
    out = run_probe(["probe", "--recipe", recipe(tmp_path, "qwen3", family_dirs, server.url)], capsys)
    lines = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    assert [line.split(":")[0] for line in lines] == ["question", "system", "two_turns", "tool_round_trip", "history"]
    assert all("ids equal, ended on end-of-turn id 151645" in line for line in lines[:3])
    assert "a tool call: its tokens only the ids hold" in lines[3]
    sent = [request for request in server.requests if request.get("messages")]
    assert sent[-1]["tools"][0]["function"]["name"] == "add" and sent[-1]["messages"][-1]["role"] == "tool"


def test_a_two_turn_history_the_server_renders_otherwise_is_caught_in_its_own_case(
    tmp_path, family_dirs, family_tokenizers, make_fake_server, capsys
):
    # the server's template keeps the earlier turn's text as sent; the recipe's tokenizer drops a leading space
    from tests.stages.reconstruct.families import FAMILIES, build_family_tokenizer

    other = build_family_tokenizer(
        FAMILIES["qwen3"],
        tmp_path / "other",
        FAMILIES["qwen3"].template.replace("m.content.split", "(' ' + m.content).split"),
    )
    server = make_fake_server(family=family_tokens("qwen3", family_tokenizers))
    path = recipe(tmp_path, "qwen3", family_dirs, server.url)
    text = open(path, encoding="utf-8").read().replace(str(family_dirs["qwen3"]), str(other))
    open(path, "w", encoding="utf-8").write(text)
    err = cli_error(["probe", "--recipe", path], capsys)
    assert "[two_turns]" in err and "(in the prompt)" in err and "--chat-template" in err


def generate_with_preflight(tmp_path, family_dirs, server, **chat):
    """A generate run given its target, as the pipeline and `--recipe` give it: the stage builds its pre-flight
    from the target's local tokenizer, and its probe runs it."""
    from eagle3_core.stages.generate.stage import run_generate
    from eagle3_core.target.config import ChatSettings, TargetConfig
    from tests.stages.generate.helpers import config, prompts, write_jsonl

    settings = ChatSettings(**chat)
    target = TargetConfig(**FAMILIES["kimi_k2_5"].target | {"path": str(family_dirs["kimi_k2_5"]), "chat": settings})
    src = write_jsonl(tmp_path / "in.jsonl", prompts(3))
    return run_generate(config(src, [server.url], chat=settings), tmp_path / "out", target=target)


def suite_requests(server) -> list[dict]:
    """The requests of the suite: neither the probe's (64 tokens) nor the prompts' (Q0, Q1, ...)."""
    return [r for r in server.requests if r.get("max_tokens") != 64 and '"Q' not in json.dumps(r["messages"])]


def test_generates_own_probe_runs_the_pre_flight_suite_before_the_first_prompt(
    tmp_path, family_dirs, family_tokenizers, make_fake_server
):
    server = make_fake_server(modes=("spaces_around_specials",), family=family_tokens("kimi_k2_5", family_tokenizers))
    manifest = generate_with_preflight(tmp_path, family_dirs, server, spaces_between_special_tokens=False)
    (line,) = manifest.details["preflight"]
    assert "token ids equal the reconstruction of its own text" in line
    assert len(suite_requests(server)) == len(SUITE) + len(HISTORY_CASES), "each case, one request each"
    assert all(f"  {case}: " in line for case in ("question", "system", "two_turns", "tool_round_trip"))
    assert manifest.status == "complete" and manifest.counts["accepted"] == 3


def test_a_difference_found_by_generates_pre_flight_is_a_warning_naming_the_setting(
    tmp_path, family_dirs, family_tokenizers, make_fake_server
):
    server = make_fake_server(modes=("spaces_around_specials",), family=family_tokens("kimi_k2_5", family_tokenizers))
    manifest = generate_with_preflight(tmp_path, family_dirs, server)  # the recipe forgot the flag
    (line,) = manifest.details["preflight"]
    assert line.startswith("warning: pre-flight: ") and "spaces_between_special_tokens: false" in line
    assert manifest.status == "complete", "the server's ids decide: the run goes on, warned"
    assert len(suite_requests(server)) == 1, "the suite stops at its first difference"


def test_generate_runs_no_pre_flight_without_a_local_tokenizer():
    from eagle3_core.preflight.suite import generate_preflight
    from eagle3_core.target.config import TargetConfig

    assert generate_preflight(None) is None and generate_preflight(TargetConfig(path=None)) is None


def test_ids_that_spell_the_same_text_in_another_split_are_a_note_not_a_recipe_error(family_tokenizers):
    """A model (random, or sampling) may write ' Nou' 'present' where the tokenizer splits ' N' 'oup'
    'resent': no setting causes it, so the pre-flight says so instead of blaming skip_special_tokens."""
    from eagle3_core.preflight.suite import _same_text

    tok = family_tokenizers["deepseek_v4"]  # DeepSeek-V4's real BPE
    text = " unbelievable"
    canonical = tok.encode(text, add_special_tokens=False)
    other = [i for piece in (" un", "believ", "able") for i in tok.encode(piece, add_special_tokens=False)]
    assert tok.decode(other) == text and other != canonical
    record = {"prompt_token_ids": [1, 2], "completion_token_ids": other}
    assert _same_text(tok, record, [1, 2, *canonical], first_diff=2)
    assert not _same_text(tok, record, [1, 2, *tok.encode(" unbearable", add_special_tokens=False)], first_diff=2)


def test_a_split_of_as_many_tokens_is_a_split_and_a_lost_special_token_is_not(family_tokenizers):
    from eagle3_core.preflight.suite import _same_text

    tok = family_tokenizers["deepseek_v4"]
    one = [i for piece in (" un", "believable") for i in tok.encode(piece, add_special_tokens=False)]
    two = [i for piece in (" unbe", "lievable") for i in tok.encode(piece, add_special_tokens=False)]
    assert len(one) == len(two) and one != two and tok.decode(one) == tok.decode(two)
    assert _same_text(tok, {"prompt_token_ids": [1], "completion_token_ids": one}, [1, *two], first_diff=1)
    end = tok.convert_tokens_to_ids("</think>")  # as if the server's text lost it (a skipped special token)
    lost = {"prompt_token_ids": [1], "completion_token_ids": [*one, end]}
    assert not _same_text(tok, lost, [1, *one], first_diff=3)


def test_a_family_that_calls_no_tools_is_probed_without_tools(
    tmp_path, family_dirs, family_tokenizers, make_fake_server, capsys
):
    """``target.calls_tools: false`` (the R1 distills: vLLM gets no tool parser and refuses requests with tools):
    the probe sends none and says why, instead of stopping on the refusal as for a server started without one."""
    server = make_fake_server(family=family_tokens("qwen3", family_tokenizers))
    path = recipe(tmp_path, "qwen3", family_dirs, server.url)
    data = yaml.safe_load(open(path, encoding="utf-8"))
    data["target"] = {**data["target"], "tool_parser": None, "calls_tools": False}
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(data, fh)
    out = run_probe(["probe", "--recipe", path], capsys)
    assert "tool_round_trip: skipped: the family writes no tool calls (target.calls_tools: false)" in out
    assert not [r for r in server.requests if r.get("tools")]


def test_a_family_whose_template_cannot_render_a_past_tool_call_is_probed_without_a_tool_loop(
    tmp_path, family_dirs, family_tokenizers, make_fake_server, capsys
):
    """``target.renders_past_tool_calls: false`` (DeepSeek-R1's template: vLLM answers a tool loop HTTP 400): the
    probe sends no request with an earlier tool call and says why, where it would otherwise read that 400 as a
    server started without a tool parser."""
    server = make_fake_server(family=family_tokens("qwen3", family_tokenizers))
    path = recipe(tmp_path, "qwen3", family_dirs, server.url)
    data = yaml.safe_load(open(path, encoding="utf-8"))
    data["target"] = {**data["target"], "renders_past_tool_calls": False}
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(data, fh)
    out = run_probe(["probe", "--recipe", path], capsys)
    assert "tool_round_trip: skipped: the family's template cannot render an earlier tool call" in out
    assert not [r for r in server.requests if any(m.get("tool_calls") for m in r["messages"])]
