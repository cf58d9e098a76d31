"""Pre-flight check of a recipe against a live server: one request, before the long run.

The server's token ids are the truth; reconstruct's text path rebuilds them from the text the
server returned. This sends one chat request with the recipe's settings (``target.chat``,
``generate``), rebuilds the server's own answer from its text with the recipe's tokenizer and
template, and compares. Equal: the recipe, the tokenizer and the server agree. Different: one
``EndpointError`` that shows the first differing tokens and the setting that usually causes
that kind of difference (``likely_cause``). A server that returns no ids cannot be checked,
and says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from eagle3_core.errors import EndpointError
from eagle3_core.generate.config import GenerateConfig
from eagle3_core.target import TargetConfig

PREFLIGHT_MESSAGES = [{"role": "user", "content": "What is 17 + 25? Think it through, then answer."}]


@dataclass(frozen=True)
class PreflightReport:
    url: str
    model: str
    id_layout: str
    tokens: int

    def line(self) -> str:
        return (
            f"pre-flight: {self.url} ({self.model}): the server's {self.tokens} token ids equal the reconstruction "
            f"of its own text (ids in the {self.id_layout} layout)"
        )


def preflight(target: TargetConfig, gen: GenerateConfig, url: str, max_tokens: int = 256) -> PreflightReport:
    """One request to ``url``; the report when the ids match, else ``EndpointError`` with the difference."""
    from eagle3_core.generate.parse import parse_completion
    from eagle3_core.reconstruct.tokenizer import load_tokenizer, token_facts

    tokenizer = load_tokenizer(target.require_path(), target.trust_remote_code)
    facts = token_facts(tokenizer, target, target.path)
    model, body = _ask(gen.model_copy(update={"return_token_ids": True}), url, max_tokens)
    completion = parse_completion(body)
    if completion.completion_token_ids is None:
        raise EndpointError(
            f"{url} returned no token ids: the text path cannot be checked, and training will "
            "rest on re-tokenized text alone",
            fix="serve with vLLM or SGLang, which return ids with `return_token_ids: true`",
        )
    record = {
        "sample_id": "preflight",
        "messages": PREFLIGHT_MESSAGES,
        "reasoning": completion.reasoning,
        "content": completion.content,
        "finish_reason": completion.finish_reason,
        "prompt_token_ids": completion.prompt_token_ids,
        "completion_token_ids": completion.completion_token_ids,
        "tools": None,
        "tool_calls": json.dumps(completion.tool_calls) if completion.tool_calls else None,
    }
    return _compare(tokenizer, facts, target, record, url, model, completion.id_layout)


def _ask(gen: GenerateConfig, url: str, max_tokens: int) -> tuple[str, dict]:
    import os

    import httpx

    from eagle3_core.generate.client import request_body
    from eagle3_core.generate.probe import _chat, _list_models

    key = os.environ.get(gen.api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(timeout=min(gen.request_timeout, 300.0), headers=headers) as http:
        model = gen.model or (_list_models(http, url) or [None])[0]
        return model, _chat(http, url, request_body(gen, model, PREFLIGHT_MESSAGES, max_tokens))


def _compare(
    tokenizer: Any, facts: Any, target: TargetConfig, record: dict, url: str, model: str, id_layout: str
) -> PreflightReport:
    from eagle3_core.reconstruct.build import Reconstructor
    from eagle3_core.reconstruct.config import ReconstructConfig

    result = Reconstructor(tokenizer, facts, ReconstructConfig(prefer="text", max_length=1 << 30), target.chat).run(
        [record]
    )
    if result.rejects:
        reject = result.rejects[0]
        raise EndpointError(
            f"{url}: the server's answer cannot be reconstructed ({reject['reason']}: {reject['detail']})",
            fix="check target.chat and target.reasoning_parser against the served model",
        )
    if not result.mismatches:
        return PreflightReport(url, model, id_layout, len(result.rows["input_ids"][0]))
    diff = result.mismatches[0]
    rebuilt, server = _pieces(tokenizer, diff["rebuilt_near"]), _pieces(tokenizer, diff["server_near"])
    raise EndpointError(
        f"{url}: the server's ids differ from the reconstruction of its own text at token {diff['first_diff']} "
        f"(in the {diff['where']}): rebuilt {rebuilt} vs server {server}",
        fix=likely_cause(diff["where"], rebuilt, server),
    )


def _pieces(tokenizer: Any, ids: list[int]) -> list[str]:
    return [tokenizer.decode([i], skip_special_tokens=False) for i in ids]


def likely_cause(where: str, rebuilt: list[str], server: list[str]) -> str:
    """The setting that usually causes this kind of difference."""
    if where == "prompt":
        return (
            "the prompt renders differently: set target.chat.chat_template_kwargs as the server has them "
            "(thinking switch, date_string), and point target.path at the served model's own tokenizer"
        )
    spaces = sum(p.count(" ") for p in rebuilt) - sum(p.count(" ") for p in server)
    if spaces > 0:
        return (
            "the server's text has spaces the model never wrote around special tokens: set "
            "target.chat.spaces_between_special_tokens: false (a slow tokenizer's detokenizer adds them)"
        )
    if spaces < 0 or "".join(rebuilt).strip() == "".join(server).strip():
        return (
            "the server's text lost whitespace the model wrote (SGLang strips the reasoning): the text path "
            "cannot be trusted; keep the server's ids (generate.return_token_ids, reconstruct.prefer: server)"
        )
    return (
        "the text lacks tokens the model wrote: set target.chat.skip_special_tokens: false, and check that "
        "target.reasoning_parser fits the template"
    )
