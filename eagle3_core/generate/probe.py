"""Before hours of generation: ask each endpoint once, say where its reasoning is, or stop.

Per endpoint: ``GET /models`` (reachable? serves the model?), then one short chat request. The
verdict is one line, e.g. ``probe: model toy on 2 endpoints: reasoning in `reasoning`; token ids
returned (vLLM layout)``. With reasoning required, an endpoint whose answer carries none (no parser on the
server and no ``<think>`` tags) stops the run with an ``EndpointError``: the run this project
replaces spent hours collecting 25,000 empty thoughts because nobody looked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from eagle3_core.errors import EndpointError
from eagle3_core.generate.client import request_body
from eagle3_core.generate.config import GenerateConfig
from eagle3_core.generate.parse import parse_completion, reasoning_layout, unknown_id_fields

PROBE_MESSAGES = [{"role": "user", "content": "What is 2 + 3? Think briefly, then answer."}]
PROBE_TRIES = 3  # a 503 while the server warms up should not stop the run
LAYOUT_WORDS = {
    "reasoning": "`reasoning`",
    "reasoning_content": "`reasoning_content`",
    "both": "both `reasoning` and `reasoning_content` (same text; reading `reasoning`)",
    "think_tags": "inline <think> tags in `content`",
    "none": "no field (no reasoning found)",
}
ID_LAYOUT_WORDS = {
    "vllm": "vLLM layout",
    "sglang": "SGLang 0.5.23 layout",
    "sglang_legacy": "SGLang layout before 0.5.23",
    "completion_only": "completion ids only, no prompt ids",
}
# Layouts without completion ids: one warning line each, naming the setting that gives them.
NO_IDS_WORDS = {
    "none": "token ids NOT returned by {urls}: send generate.return_token_ids: true (vLLM >= 0.10.2 and SGLang read it)",
    "prompt_only": "prompt ids but NO completion ids from {urls} (`token_ids: null`, vLLM issue 28246): "
    "keep generate.return_token_ids: true and serve a version that fills choices[].token_ids",
}


@dataclass(frozen=True)
class ProbeReport:
    model: str
    layouts: dict[str, str]  # endpoint url -> reasoning layout
    id_layouts: dict[str, str]  # endpoint url -> vllm | sglang | completion_only | none

    @property
    def token_ids(self) -> dict[str, bool]:
        """endpoint url -> whether it returned completion token ids."""
        return {url: layout in ID_LAYOUT_WORDS for url, layout in self.id_layouts.items()}

    def line(self) -> str:
        kinds = sorted(set(self.layouts.values()))
        if len(kinds) == 1:
            where = LAYOUT_WORDS[kinds[0]]
        else:
            where = "; ".join(f"{url}: {LAYOUT_WORDS[k]}" for url, k in self.layouts.items())
        missing = {kind: [u for u, layout in self.id_layouts.items() if layout == kind] for kind in NO_IDS_WORDS}
        if any(missing.values()):
            ids = "; ".join(NO_IDS_WORDS[k].format(urls=", ".join(urls)) for k, urls in missing.items() if urls)
        else:
            ids = (
                "token ids returned (" + ", ".join(sorted({ID_LAYOUT_WORDS[v] for v in self.id_layouts.values()})) + ")"
            )
        return f"probe: model {self.model} on {len(self.layouts)} endpoint(s): reasoning in {where}; {ids}"


def probe_endpoints(cfg: GenerateConfig) -> ProbeReport:
    """Probe every endpoint; raise ``EndpointError`` when one is unusable."""
    import os

    import httpx

    layouts, id_layouts, model = {}, {}, cfg.model
    key = os.environ.get(cfg.api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(timeout=min(cfg.request_timeout, 120.0), headers=headers) as http:
        for url in cfg.base_urls:
            models = _list_models(http, url)
            model = model or (models[0] if models else None)
            if model not in models:
                raise EndpointError(
                    f"{url} does not serve model {model!r} (it serves: {', '.join(models) or 'none'})",
                    fix="pass --model with one of the served names",
                )
            body = _chat(http, url, request_body(cfg, model, PROBE_MESSAGES, cfg.probe_max_tokens))
            layouts[url] = reasoning_layout(body["choices"][0]["message"])
            id_layouts[url] = _id_layout(url, body)
            if cfg.require_reasoning and layouts[url] == "none":
                raise EndpointError(
                    f"{url} answered without reasoning (no `reasoning`, no `reasoning_content`, no <think> tags)",
                    fix="start vLLM with --reasoning-parser (e.g. kimi_k2, qwen3, deepseek_r1) or check that the "
                    "model thinks; pass --allow-empty-reasoning to keep answers without reasoning",
                )
    return ProbeReport(model=model, layouts=layouts, id_layouts=id_layouts)


def _id_layout(url: str, body: dict) -> str:
    """Where the endpoint put its token ids; EndpointError for a layout no known server uses."""
    layout = parse_completion(body).id_layout
    if layout == "unknown":
        fields = unknown_id_fields(body, body["choices"][0])
        raise EndpointError(
            f"{url} sent token ids in a layout no known server uses (fields: {', '.join(fields)}; the choice "
            f"has {', '.join(sorted(body['choices'][0]))})",
            fix="serve with vLLM or SGLang, or teach eagle3_core.generate.parse.token_ids this server's layout",
        )
    return layout


def _list_models(http, url: str) -> list[str]:
    response = _send(http, "GET", f"{url.rstrip('/')}/models")
    return [m.get("id") for m in response.get("data", []) if isinstance(m, dict)]


def _chat(http, url: str, payload: dict) -> dict:
    body = _send(http, "POST", f"{url.rstrip('/')}/chat/completions", json=payload)
    if not body.get("choices") or not isinstance(body["choices"][0].get("message"), dict):
        raise EndpointError(
            f"{url} answered the probe without choices[0].message", fix="is this an OpenAI-compatible chat endpoint?"
        )
    return body


def _send(http, method: str, url: str, **kwargs) -> dict:
    import httpx

    last = ""
    for attempt in range(PROBE_TRIES):
        try:
            response = http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            last = f"cannot reach {url}: {type(exc).__name__}: {exc}"
        else:
            if response.status_code < 400:
                try:
                    return response.json()
                except ValueError:
                    last = f"{url} answered with a body that is not JSON"
            elif response.status_code < 500 and response.status_code not in (408, 409, 425, 429):
                raise EndpointError(
                    f"{url} answered HTTP {response.status_code}: {response.text[:300]}",
                    fix="check --base-url (it ends in /v1) and --model",
                )
            else:
                last = f"{url} answered HTTP {response.status_code}"
        time.sleep(0.5 * (attempt + 1))
    raise EndpointError(last, fix="start the server (eagle3 serve) or fix --base-url (http://host:port/v1)")
