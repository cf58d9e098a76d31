"""Configuration of the generate stage: its prompts and run, over the shared request settings."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from eagle3_core.base import StageConfig
from eagle3_core.endpoint.config import RequestConfig
from eagle3_core.prompts.source import PromptSource
from eagle3_core.target.config import ChatSettings, TargetConfig

FORM_FIRST = ("prompts", "source", "turns", "base_urls")  # what a run is about, above how its requests go


def _run_fields_first(schema: dict) -> None:
    """The form lists the run's own fields first: pydantic puts the inherited request settings first."""
    properties = schema["properties"]
    schema["properties"] = {k: properties[k] for k in FORM_FIRST} | properties


class GenerateConfig(RequestConfig, StageConfig):
    """Send prompts to OpenAI-compatible endpoints and keep every answer with its reasoning."""

    model_config = ConfigDict(json_schema_extra=_run_fields_first)

    prompts: PromptSource | None = Field(None, description="The prompts. Required for a generate run.")
    source: Literal["server", "dataset"] = Field(
        "server",
        description="Where the answers come from: `server` sends each prompt to the endpoints; `dataset` takes each input row's own final assistant turn (its reasoning from a `reasoning_content` field or inline think tags), no server involved (`generate/dataset_source.py`).",
    )
    turns: Literal["last", "all"] = Field(
        "last",
        description="Which assistant turns of a conversation the target writes: `last` regenerates only the final one (the earlier turns stay the dataset's); `all` regenerates every answer turn in order, each sent with the target's own earlier answers (and their reasoning, which the server's template keeps or drops as the recipe's `target.history_reasoning` says) in the history: on-policy multi-turn data (`generate/turns.py`). An assistant turn that calls tools stays the dataset's, since the tool results after it answer those calls.",
    )
    base_urls: list[str] = Field(
        default_factory=list,
        description="OpenAI-compatible endpoints (`http://host:port/v1`); several are balanced by load (on the command "
        "line, repeat the option for several). Not used with `source: dataset`. Filled in by `eagle3 demo`.",
    )
    allow_empty: bool = Field(
        False, description="Accept an input that yields no rows (a complete, empty run); otherwise that is an error."
    )
    refuse_tool_rows: SkipJsonSchema[str | None] = Field(
        None,
        description="Set from the target by the pipeline (or `--recipe`): the reason rows with tools are rejected before they are sent, None when they are sent. `tools_need_thinking_off`: a model that calls tools only with thinking off (DeepSeek-V3.1, `target.tools_while_thinking: false`) in a run that thinks; `calls_no_tools`: a model without a tool-call format (the R1 distills, `target.calls_tools: false`).",
    )
    refuse_past_tool_calls: SkipJsonSchema[str | None] = Field(
        None,
        description="Set from the target by the pipeline (or `--recipe`): the reason rows with an earlier tool call are rejected before they are sent, None when they are sent. `past_tool_calls_unrendered`: a template that cannot render them as the server hands them (DeepSeek-R1, `target.renders_past_tool_calls: false`).",
    )
    model_fingerprint: SkipJsonSchema[str | None] = Field(
        None,
        description="Set by the pipeline and the nightly when they serve the target themselves (`serve:`): its bytes (`fingerprint.model_fingerprint`), which name the model that answers in the sampling key instead of its served name, so other weights under the same name (or path) are asked again and the same weights in a moved folder are not. Unset, the key holds the served name (`model`, else the one the endpoints list).",
    )
    shard_rows: int = Field(
        1000, ge=1, description="Flush accepted/rejected rows to a new Parquet shard every this many rows ..."
    )
    flush_seconds: float = Field(30.0, gt=0, description="... or every this many seconds, whichever comes first.")
    outage_seconds: float = Field(
        300.0,
        gt=0,
        description="Stop the run when every endpoint's circuit breaker has been open (the endpoint down) for this long together: what finished is kept, and a rerun sends every prompt left open. Prompts wait meanwhile; none is rejected for an outage.",
    )
    limit_lease_seconds: float = Field(
        60.0,
        ge=60,
        description="Lease of the slots a run holds of an endpoint's shared limit (Prefect flow; Prefect's minimum is 60; renewed every half lease): a killed run's slots return to the other runs and its rerun at most this long after it dies, plus the API's sweep (5 s on the command's own ephemeral API, 15 s on `prefect server`).",
    )

    @model_validator(mode="after")
    def _turns_need_a_server(self) -> "GenerateConfig":
        if self.turns == "all" and self.source == "dataset":
            raise ValueError(
                "generate.turns: all regenerates each turn on a server; generate.source: dataset takes the rows' "
                "own answers: set one of them"
            )
        return self

    def in_run(self, run: Any) -> "GenerateConfig":
        """The run's target's copies (``with_target``)."""
        return self.with_target(run.target)

    def needs_target(self, run: Any) -> bool:
        """Only to serve it (``serve:``): otherwise the endpoints answer, and the pre-flight's tokenizer is optional."""
        return run.serve is not None

    def refusal_in_run(self, run: Any) -> tuple[str, str] | None:
        """No prompts, unless the toy fills them itself."""
        if self.prompts is None and run.toy is None:
            return (
                "generate.prompts is not set, and the generate stage needs prompts",
                "set generate.prompts.input in the recipe (a .jsonl/.parquet file, a folder or a dataset name), "
                "or leave generate out of `stages`",
            )
        return None

    def with_target(self, target: TargetConfig) -> "GenerateConfig":
        """This config with the target's copies: its chat settings (``target.chat`` is the one source; a
        ``chat`` equal to the default counts as unset, as a form fills every field from its default) and
        its rules for rows with tools and earlier tool calls. A ``chat`` set to other values is a ValueError naming both."""
        if self.chat != target.chat and self.chat != ChatSettings():
            raise ValueError(
                f"generate.chat {self.chat.model_dump()} differs from target.chat {target.chat.model_dump()}: set "
                "template variables and detokenizer settings once, in target.chat (generate.chat is its copy)"
            )
        copies = {
            "chat": target.chat,
            "refuse_tool_rows": target.tool_rows_refusal(),
            "refuse_past_tool_calls": target.past_tool_calls_refusal(),
        }
        return self if all(getattr(self, k) == v for k, v in copies.items()) else self.model_copy(update=copies)

    def sampling_key(self) -> dict:
        """The settings that make two answers to one prompt different samples: sampling, and
        whether an answer without reasoning is one (such an answer must not count as done for a
        run that requires reasoning; the default adds nothing, so its keys stay as they were), and
        the chat settings sent (`chat.reasoning_effort` among them: a gpt-oss answer at high effort
        is another sample than one at medium; unset, it adds nothing, ``ChatSettings.key``). The model
        is the one that answers: its bytes when eagle3 serves it (``model_fingerprint``), else its
        served name, never a path (``ServedSource.settled`` names it before the key is taken)."""
        key = {
            "model": self.model_fingerprint or self.model,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "extra_body": self.extra_body,
            "chat": self.chat.key(),
        }
        if not self.require_reasoning:
            key["require_reasoning"] = False
        if self.turns == "all":  # its histories are the target's own answers: never the same sample as `last`
            key["turns"] = "all"
        return key
