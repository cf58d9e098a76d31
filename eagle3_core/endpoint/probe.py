"""Before hours of generation: ask each endpoint once, say where its reasoning is, or stop.

Asked by generate's served source and by the nightly, with their request settings (``RequestConfig``)
and the endpoints' URLs.

Per endpoint: ``GET /models`` (reachable? serves the model?), then one short chat request. The
verdict is one line, e.g. ``probe: model toy on 2 endpoints: reasoning in `reasoning`; token ids
returned (vLLM layout)``. With reasoning required, an endpoint whose answer carries none (no parser on the
server and no ``<think>`` tags) stops the run with an ``EndpointError``: the run this project
replaces spent hours collecting 25,000 empty thoughts because nobody looked.

Also caught here, before any prompt: ``max_tokens`` plus the probe's own prompt past the
endpoint's ``max_model_len`` (vLLM lists it in ``/v1/models``; every request would get the same
400), and a refused key (a 401/403 names ``generate.api_key_env``). An endpoint that cannot be
reached (connection refused, 5xx, timeouts) is left out, in ``ProbeReport.down``, as long as
another answers: the run starts its breaker open, and it joins when a half-open probe finds it
up. Server text is redacted (``endpoint/redact.py``) before it is raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle3_core.chat.parse import parse_completion, reasoning_layout, unknown_id_fields
from eagle3_core.endpoint.checks import Unreachable, chat, list_models, listed_models, probe_client
from eagle3_core.endpoint.client import PROBE_MESSAGES, request_body, wrong_model_words
from eagle3_core.endpoint.config import RequestConfig
from eagle3_core.endpoint.redact import redact, secret_of
from eagle3_core.errors import EndpointError

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


class WrongModel(Unreachable):
    """The endpoint answered as another model (a proxy routing to the wrong backend): left out while
    another answers; its half-open probes let it in once it answers as the model asked for."""


@dataclass(frozen=True)
class ProbeReport:
    model: str
    layouts: dict[str, str]  # endpoint url -> reasoning layout
    id_layouts: dict[str, str]  # endpoint url -> vllm | sglang | completion_only | none
    down: dict[str, str] = field(default_factory=dict)  # endpoint url -> why it is left out for now
    names: dict[str, frozenset[str]] = field(default_factory=dict)  # endpoint url -> the model's names there

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


def probe_endpoints(cfg: RequestConfig, base_urls: list[str]) -> ProbeReport:
    """Probe every endpoint at once (8 endpoints of a reasoning model, one after another, cost 8
    probe answers: 16 s at 2 s each in benchmarks/bench_endpoints.py); raise ``EndpointError``
    when one is unusable, or none answers."""
    from concurrent.futures import ThreadPoolExecutor

    with probe_client(cfg) as http:
        model = cfg.model or _first_model(http, cfg, base_urls)
        with ThreadPoolExecutor(max_workers=len(base_urls)) as pool:
            outcomes = list(pool.map(lambda url: _outcome(http, cfg, url, model), base_urls))
    layouts, id_layouts, down, names = {}, {}, {}, {}
    for url, outcome in zip(base_urls, outcomes):
        if isinstance(outcome, Unreachable):
            down[url] = outcome.message
        elif isinstance(outcome, EndpointError):
            raise _redacted(outcome, cfg)
        else:
            outcome, names[url] = outcome
            layouts[url] = reasoning_layout(outcome["choices"][0]["message"])
            id_layouts[url] = _id_layout(url, outcome)
            _check_reasoning(cfg, url, layouts[url])
    if not layouts:
        first = next(o for o in outcomes if isinstance(o, Unreachable))
        raise _redacted(EndpointError(first.message, fix=first.fix), cfg)
    return ProbeReport(model=model, layouts=layouts, id_layouts=id_layouts, down=down, names=names)


TOOLS_FIX = (
    "start vLLM with --enable-auto-tool-choice --tool-call-parser NAME, NAME the family's parser "
    "(target.tool_parser.vllm in its recipe: kimi_k2, hermes, deepseek_v31, openai, glm45, minimax_m2 ...); "
    "`eagle3 serve` and a pipeline's serve: section pass both from the recipe. SGLang: --tool-call-parser "
    "(target.tool_parser.sglang)"
)


def probe_tools(cfg: RequestConfig, report: ProbeReport, tools: list[dict]) -> str:
    """One request carrying an input row's ``tools`` per endpoint that is up, before any prompt: vLLM
    reads `tools` without `tool_choice` as `auto` and refuses it with HTTP 400 unless it was started
    with a tool-call parser (entrypoints/openai/chat_completion/protocol.py), so every row with tools
    would be refused the same way. Raises ``EndpointError`` naming the flags; returns the probe line."""
    payload = request_body(cfg, report.model, PROBE_MESSAGES, cfg.probe_max_tokens, tools=tools)
    urls = [url for url in report.layouts if url not in report.down]
    with probe_client(cfg) as http:
        for url in urls:
            try:
                chat(http, url, payload, cfg.api_key_env)
            except Unreachable:
                continue  # down since the probe: its breaker judges it, not this check
            except EndpointError as exc:
                raise _redacted(
                    EndpointError(
                        f"{url} refuses requests that carry `tools`, as the input's rows with tools do: {exc.message}",
                        fix=TOOLS_FIX,
                    ),
                    cfg,
                ) from None
    return f"probe: requests with `tools` answered on {len(urls)} endpoint(s)"


def _id_layout(url: str, body: dict) -> str:
    """Where the endpoint put its token ids; EndpointError for a layout no known server uses."""
    layout = parse_completion(body).id_layout
    if layout == "unknown":
        fields = unknown_id_fields(body, body["choices"][0])
        raise EndpointError(
            f"{url} sent token ids in a layout no known server uses (fields: {', '.join(fields)}; the choice "
            f"has {', '.join(sorted(body['choices'][0]))})",
            fix="serve with vLLM or SGLang, or teach eagle3_core.chat.parse.token_ids this server's layout",
        )
    return layout


def listed_model(cfg: RequestConfig, base_urls: list[str]) -> str | None:
    """The model the endpoints serve, when ``cfg.model`` does not name it: one ``GET /models``, before
    the stage's skip is decided (its key holds the model that answers, so a server that now serves
    another model is asked again, not skipped). An ``EndpointError`` when no endpoint answers: which
    model would answer is unknown, and a finished folder must neither be reused nor marked failed."""
    with probe_client(cfg) as http:
        found = _first_listed(http, cfg, base_urls)
    if isinstance(found, Unreachable):
        raise _redacted(
            EndpointError(
                f"{found.message} (no endpoint answered GET /models); generate.model is unset, so which model "
                "answers, and so whether this folder's finished run can be reused, is unknown",
                fix=f"{found.fix}; or pass --model with the served name (generate.model)",
            ),
            cfg,
        )
    return found


def _first_model(http, cfg: RequestConfig, base_urls: list[str]) -> str | None:
    """The model the first endpoint that answers lists first (when --model is not given)."""
    found = _first_listed(http, cfg, base_urls)
    return None if isinstance(found, Unreachable) else found


def _first_listed(http, cfg: RequestConfig, base_urls: list[str]) -> str | None | Unreachable:
    """The first model the first endpoint that answers lists (None: it lists none), else why the
    first endpoint could not be reached."""
    first: Unreachable | None = None
    for url in base_urls:
        try:
            models = list_models(http, url, cfg.api_key_env)
        except Unreachable as exc:
            first = first or exc
            continue
        except EndpointError as exc:
            raise _redacted(exc, cfg) from None
        return models[0] if models else None
    return first


def _outcome(http, cfg: RequestConfig, url: str, model: str | None) -> tuple[dict, frozenset[str]] | EndpointError:
    """The probe's answer body and the model's names there, or the error it met (raised by the
    caller, in endpoint order)."""
    try:
        return _probe_one(http, cfg, url, model)[1:]
    except EndpointError as exc:
        return exc


def _probe_one(http, cfg: RequestConfig, url: str, model: str | None) -> tuple[str, dict, frozenset[str]]:
    listed = listed_models(http, url, cfg.api_key_env)
    models = [m.get("id") for m in listed]
    model = model or (models[0] if models else None)
    if model not in models:
        raise EndpointError(
            f"{url} does not serve model {model!r} (it serves: {', '.join(map(str, models)) or 'none'})",
            fix="pass --model with one of the served names",
        )
    body = chat(http, url, request_body(cfg, model, PROBE_MESSAGES, cfg.probe_max_tokens), cfg.api_key_env)
    _check_context(cfg, url, next(m for m in listed if m.get("id") == model), body)
    names = model_names(listed, model)
    if (said := body.get("model")) is not None and said not in names:
        raise WrongModel(wrong_model_words(url, said, model), fix=WRONG_MODEL_FIX)
    return model, body, names


WRONG_MODEL_FIX = "point --base-url at the target's own server (a proxy may route this name to another backend)"


def model_names(listed: list[dict], model: str) -> frozenset[str]:
    """The names an endpoint may answer ``model`` under: itself and the served names that share its
    ``root`` (vLLM's ``--served-model-name a b`` lists both and answers as the first). A LoRA
    adapter has its own root: another model."""
    root = next((m.get("root") for m in listed if m.get("id") == model), None)
    aliases = {m.get("id") for m in listed if root is not None and m.get("root") == root}
    return frozenset({model} | {a for a in aliases if isinstance(a, str)})


def _check_context(cfg: RequestConfig, url: str, listed: dict, body: dict) -> None:
    """``max_tokens`` and a prompt must fit the served context, or every request gets the same 400.
    The probe's prompt stands for the shortest prompt: a longer one is the prompt's own 400."""
    context = listed.get("max_model_len")
    prompt = (body.get("usage") or {}).get("prompt_tokens") or 0
    if isinstance(context, int) and cfg.max_tokens + prompt > context:
        raise EndpointError(
            f"{url} serves a context of {context} tokens (max_model_len), and max_tokens={cfg.max_tokens} plus "
            f"even the probe's {prompt}-token prompt exceeds it: every request would be refused",
            fix=f"pass --max-tokens below {context - prompt} (generate.max_tokens), or serve a longer --max-model-len",
        )


def _check_reasoning(cfg: RequestConfig, url: str, layout: str) -> None:
    if cfg.require_reasoning and layout == "none":
        raise EndpointError(
            f"{url} answered without reasoning (no `reasoning`, no `reasoning_content`, no <think> tags)",
            fix="start vLLM with --reasoning-parser (e.g. kimi_k2, qwen3, deepseek_r1) or check that the "
            "model thinks; pass --allow-empty-reasoning to keep answers without reasoning",
        )


def _redacted(exc: EndpointError, cfg: RequestConfig) -> EndpointError:
    secret = secret_of(cfg.api_key_env)
    return type(exc)(redact(exc.message, secret), fix=exc.fix)
