"""The model card ``drafter/export/README.md``: what a hub shows for the drafter.

Written by the export (train) and rewritten by evaluate with its figures. The YAML header is the
hub's metadata: ``base_model`` (the target's name), ``library_name``, ``tags``, ``datasets`` (the
hub datasets the prompts came from), and an ``eagle3`` section holding every fact the body shows,
so evaluate re-renders the card from the card itself. The body holds:

- the vLLM and SGLang launch lines, which travel with the card: the target by its hub name
  (``train.tracking.base_model``, else ``train.provenance.target_name``'s: a hub id or name, never
  a path; a path an older run recorded is shown as its folder's name) and the drafter by its hub
  repository (``train.tracking.hub_repo``, else a placeholder the card says to replace), never a
  path of this machine; before evaluation at a block export's trained k (its config's
  ``eagle3_num_speculative_tokens``), else 3; once evaluated, with the speculative config evaluate
  ran (its k), beside the command it ran, marked as this machine's, its paths replaced by those names;
- the acceptance figures with k, temperature, prompt source and the engine's version; the lossless
  line (greedy outputs identical with and without the drafter); by output position and by phase
  (vLLM's own per-request steps), thinking on and off, and by context length, where the report has them;
- the training data (samples, tokens, reasoning share, families, source, dates), the drafter's
  shape and variant, the recipe hash and eagle3's version.

The card is no shard of the train stage and no input of evaluate's fingerprint (both leave
``README.md`` out), so evaluate rewriting it never makes either stage run again.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path
from typing import Any

from eagle3_core.contracts.evaluation import (
    ByContext,
    Engine,
    EvaluationReport,
    Lossless,
    Offline,
    Online,
    PerRequest,
    Refusal,
    StepRow,
    Thinking,
)
from eagle3_core.drafter.kinds import block_kind, kind_of_export, trained_k

CARD_FILE = "README.md"
DEFAULT_K = 3  # evaluate.num_speculative_tokens' default: the k an EAGLE-3 card shows before evaluation
TAGS = ["eagle3", "speculative-decoding", "draft-model"]
SHAPE_KEYS = (
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "draft_vocab_size",
    "eagle_aux_hidden_state_layer_ids",
)


DRAFTER_PLACEHOLDER = "YOUR-ORG/eagle3-drafter"  # where train.tracking.hub_repo is unset
VLLM_DEFAULT_PORT = "8000"  # `vllm serve`'s own default
LOCAL_ONLY = ("target_path",)  # facts of this machine: the runs record them, the card does not
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # org/name, as the hub spells a model's id


def write_card(export_dir: str | Path, facts: dict[str, Any], training: dict[str, Any]) -> Path:
    """The export's card, before any evaluation."""
    export_dir = Path(export_dir)
    meta = {"facts": facts, "training": training, "drafter": drafter_shape(export_dir), "evaluation": None}
    return _write(export_dir, meta)


def update_card(export_dir: str | Path, report: EvaluationReport) -> Path:
    """The card with the evaluate report's figures (a card is started when the export has none)."""
    export_dir = Path(export_dir)
    meta = read_meta(export_dir / CARD_FILE) or {"facts": {}, "training": {}, "drafter": drafter_shape(export_dir)}
    meta["evaluation"] = evaluation_facts(report, hub_names(meta))
    return _write(export_dir, meta)


def drafter_shape(export_dir: Path) -> dict[str, Any]:
    config = json.loads((export_dir / "config.json").read_text(encoding="utf-8"))
    shape = {k: config.get(k) for k in SHAPE_KEYS}
    shape["architecture"] = (config.get("architectures") or ["?"])[0]
    shape["variant"] = variant_name(config)
    return shape


def variant_name(config: dict[str, Any]) -> str:
    """EAGLE-3 or EAGLE-3.1 (a norm per aux state, the post-norm state fed back), its extras, its depth;
    a block kind by its block size."""
    block = block_kind(config)
    if block:
        layers = config.get("num_hidden_layers") or 1
        return f"{block.name} (block {config.get('block_size')}, {layers} decoder layer{'s' if layers > 1 else ''})"
    name = "eagle3.1" if config.get("fc_norm") and config.get("norm_output") else "eagle3"
    extras = [k for k in ("fc_norm", "norm_output") if config.get(k) and name == "eagle3"]
    extras += ["norm_before_fc"] if config.get("norm_before_fc") else []
    layers = config.get("num_hidden_layers") or 1
    return f"{name}{' + ' + ', '.join(extras) if extras else ''} ({layers} decoder layer{'s' if layers > 1 else ''})"


def hub_names(meta: dict[str, Any]) -> tuple[str, str]:
    """(target, drafter): the names the card's lines load them by, wherever the card is read."""
    facts = meta.get("facts") or {}
    return facts.get("target") or "TARGET", facts.get("hub_repo") or DRAFTER_PLACEHOLDER


def portable_command(argv: list[str] | None, names: tuple[str, str]) -> list[str] | None:
    """The command evaluate ran with this machine's paths replaced: the target's by its hub name, the
    drafter's (inside --speculative-config) by its repository, the Python by `python`, the free port
    evaluate drew by vLLM's default (8000: drawn anew each run, it rewrote the card at every
    evaluation), any other absolute path by its file name."""
    if not argv:
        return argv
    target, drafter = names
    out = ["python", *argv[1:]]
    for i, word in enumerate(out[:-1]):
        if word == "--model":
            out[i + 1] = target
        elif word == "--port":
            out[i + 1] = VLLM_DEFAULT_PORT
        elif word == "--speculative-config":
            out[i + 1] = json.dumps({**json.loads(out[i + 1]), "model": drafter})
    return [Path(w).name if w.startswith("/") else w for w in out]


def is_local_path(name: str) -> bool:
    """Whether ``name`` says where a model lies on this machine (absolute, ``~``/``.``-relative, or a
    relative path to a folder here) rather than what it is called: no hub id, and wrong for every
    reader of a card that travels. A bare name (``toy``) is a name."""
    text = str(name)
    drive = len(text) > 2 and text[1] == ":" and text[2] in "/\\"
    return text.startswith(("/", "~", ".", "\\")) or drive or ("/" in text and Path(text).exists())


def portable_name(name: str | None) -> str | None:
    """A model's name as a card shows it: a path of this machine becomes its folder's name (an older
    run recorded vLLM's default name, the model's path); any other name as given."""
    if name is None or not is_local_path(name):
        return name
    return Path(str(name)).expanduser().resolve().name or None


def portable_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """The facts the card keeps: none of this machine's (``LOCAL_ONLY``), and the target and the
    served model by name, never by path."""
    kept = {k: v for k, v in facts.items() if k not in LOCAL_ONLY}
    if kept.get("target") is not None:
        kept["target"] = portable_name(kept["target"])
    if isinstance(kept.get("data"), dict) and kept["data"].get("served_model") is not None:
        kept["data"] = {**kept["data"], "served_model": portable_name(kept["data"]["served_model"])}
    return kept


def portable_source(source: str) -> str:
    """A prompts file named by its file name: its folder is this machine's."""
    return Path(source).name if str(source).startswith("/") else source


def evaluation_facts(
    report: EvaluationReport, names: tuple[str, str] = ("TARGET", DRAFTER_PLACEHOLDER)
) -> dict[str, Any]:
    """The report's figures the card shows, each with what it was measured at."""
    settings, online, offline = report.settings, report.online or Online(), report.offline or Offline()
    with_drafter, engine = report.with_drafter, online.engine or Engine()
    per_request, refusal = report.per_request or PerRequest(), report.vllm_refusal or Refusal()
    lossless = report.lossless or Lossless()
    return {
        "k": settings.num_speculative_tokens,
        "temperature": settings.temperature,
        "prompt_source": portable_source(report.heldout.source),
        "prompts": report.heldout.prompts,
        "vllm_acceptance_length": with_drafter.acceptance_length if with_drafter else None,
        "vllm_acceptance_per_position": with_drafter.acceptance_per_position if with_drafter else None,
        "vllm_version": engine.version or refusal.vllm_version,
        "vllm_refused": refusal.message,  # vLLM's words where it refused the method on the evaluating machine
        "acceptance_measured_by": "vllm" if with_drafter else "offline" if report.offline else None,
        "vllm_command": portable_command(engine.argv, names),
        "offline_acceptance_length": offline.acceptance_length,
        "offline_prompts": offline.prompts,
        "offline_acceptance_per_position": offline.acceptance_per_position,
        "simulated_acceptance_length": report.simulated.acceptance_length if report.simulated else None,
        "speedup": online.speedup,
        "by_context": context_rows(report.by_context),
        "by_output_position": step_rows({r.label: r for r in per_request.by_position or []}),
        "by_phase": step_rows(per_request.by_phase),
        "thinking": thinking_rows(report.thinking),
        "lossless": lossless.line,
        "output_hash": lossless.output_hash,
        "evaluated": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def step_rows(named: dict[str, StepRow] | None) -> list[dict] | None:
    """vLLM's per-request rows that hold a verify step: label (bucket or phase name), steps, acceptance length."""
    held = [
        {"label": label, "steps": r.drafts, "acceptance_length": r.acceptance_length}
        for label, r in (named or {}).items()
        if r.drafts
    ]
    return held or None


def thinking_rows(block: Thinking | None) -> dict[str, Any] | None:
    """Thinking on and off: each mode's acceptance, speed-up and identical outputs."""
    if not block:
        return None
    modes = {}
    for name, m in block.modes.items():
        greedy = m.lossless.greedy if m.lossless else None
        modes[name] = {
            "acceptance_length": m.acceptance_length,
            "acceptance_per_position": m.acceptance_per_position,
            "speedup": m.speedup,
            "identical_outputs": f"{greedy.identical} of {greedy.compared}" if greedy and greedy.compared else None,
        }
    return {"switch": block.switch, "trained_in": block.trained_in, "modes": modes}


def context_rows(block: ByContext | None) -> dict[str, Any] | None:
    """The report's by-context buckets that hold a round: label, rounds, acceptance length."""
    held = block.held() if block else []
    if not held:
        return None
    rows = [{"context": b.label, "rounds": b.drafts, "acceptance_length": b.acceptance_length} for b in held]
    return {"source": block.source, "buckets": rows}


def _write(export_dir: Path, meta: dict[str, Any]) -> Path:
    from eagle3_core.run.fsio import atomic_path

    path = export_dir / CARD_FILE
    meta = {**meta, "facts": portable_facts(meta.get("facts") or {})}
    with atomic_path(path) as tmp:
        tmp.write_text(render(export_dir, meta), encoding="utf-8")
    return path


def read_meta(path: Path) -> dict[str, Any] | None:
    """The ``eagle3`` section of a card's YAML header, or None when there is no card."""
    import yaml

    if not path.exists():
        return None
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return None
    header = yaml.safe_load(text[4 : text.index("\n---\n", 4)]) or {}
    return header.get("eagle3")


def header(meta: dict[str, Any]) -> dict[str, Any]:
    """The hub's metadata. ``base_model`` only for a hub id (``org/name``): the hub links it to that model's page,
    and a bare name (``toy``, a folder's name) would link to none; the card's body names the target either way."""
    facts, data = meta["facts"], meta["facts"].get("data") or {}
    target = facts.get("target")
    found = {
        **({"base_model": target} if target and HUB_ID.fullmatch(target) else {}),
        "library_name": "vllm",
        "pipeline_tag": "text-generation",
        "tags": TAGS + [f for f in data.get("families") or [] if f not in TAGS],
    }
    if data.get("datasets"):
        found["datasets"] = list(data["datasets"])
    return {**found, "eagle3": meta}


def render(export_dir: Path, meta: dict[str, Any]) -> str:
    import yaml

    front = yaml.safe_dump(header(meta), sort_keys=False, allow_unicode=True)
    target = meta["facts"].get("target") or "the target"
    title = kind_of_export(export_dir).title
    body = [
        f"# {title} drafter for {target}",
        "",
        f"A speculative-decoding draft model ({title}) trained by eagle3 {meta['facts'].get('eagle3_version', '?')} "
        f"on {target}'s own answers.",
        *launch_section(export_dir, meta),
        *acceptance_section(meta.get("evaluation")),
        *data_section(meta["facts"]),
        *drafter_section(meta),
    ]
    return f"---\n{front}---\n\n" + "\n".join(body) + "\n"


def speculative_config(export_dir: str | Path, k: int) -> dict:
    """vLLM's ``--speculative-config``: the exported drafter's kind (``drafter/kinds.py``), k tokens."""
    return {
        "method": kind_of_export(export_dir).vllm_method,
        "model": str(Path(export_dir).resolve()),
        "num_speculative_tokens": k,
    }


def launch_lines(export_dir: Path, meta: dict[str, Any]) -> tuple[str, str]:
    """(vLLM, SGLang) by hub names (``hub_names``): the evaluated command's speculative config when
    there is one, else the default k."""
    evaluation = meta.get("evaluation") or {}
    command = evaluation.get("vllm_command")
    model, drafter = hub_names(meta)
    if command:
        spec = {**json.loads(_arg(command, "--speculative-config")), "model": drafter}
    else:
        spec = {**speculative_config(export_dir, evaluation.get("k") or default_k(export_dir)), "model": drafter}
    spec_json = json.dumps(spec)
    vllm = f"vllm serve {shlex.quote(model)} --speculative-config {shlex.quote(spec_json)}"
    k = spec["num_speculative_tokens"]
    sglang = (
        f"python -m sglang.launch_server --model-path {shlex.quote(model)} --speculative-algorithm EAGLE3 "
        f"--speculative-draft-model-path {shlex.quote(spec['model'])} --speculative-num-steps {k} "
        f"--speculative-eagle-topk 1 --speculative-num-draft-tokens {k + 1}"
    )
    return vllm, sglang


def default_k(export_dir: Path) -> int:
    """The k a card launches before evaluation: a block export's trained k (``kinds.trained_k``), else
    ``DEFAULT_K``."""
    config = json.loads((export_dir / "config.json").read_text(encoding="utf-8"))
    return trained_k(config) or DEFAULT_K


def _arg(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def launch_section(export_dir: Path, meta: dict[str, Any]) -> list[str]:
    vllm, sglang = launch_lines(export_dir, meta)
    lines = ["", "## Launch", "", "vLLM:", "", "```bash", vllm, "```", "", "SGLang:", ""]
    if kind_of_export(export_dir).name == "eagle3":
        lines += ["```bash", sglang, "```"]
    else:  # the export holds vLLM's checkpoint names; SGLang's loader for this kind is not checked here
        lines += [f"Not verified: this {kind_of_export(export_dir).title} export is written for vLLM's loader."]
    if hub_names(meta)[1] == DRAFTER_PLACEHOLDER:
        lines += [
            "",
            f"Replace `{DRAFTER_PLACEHOLDER}` with the repository this folder is uploaded to "
            "(`train.tracking.hub_repo` writes it here).",
        ]
    command = (meta.get("evaluation") or {}).get("vllm_command")
    if command:
        lines += [
            "",
            "The command `eagle3 evaluate` ran on the machine that evaluated this drafter (vLLM's "
            "OpenAI server; its paths replaced by the names above):",
            "",
            "```bash",
        ]
        lines += [shlex.join(command), "```"]
    return lines


def _show(value: Any) -> str:
    if value is None:
        return "not recorded"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(_show(v) for v in value) or "none"
    return str(value)


def acceptance_section(evaluation: dict[str, Any] | None) -> list[str]:
    lines = ["", "## Acceptance", ""]
    if not evaluation:
        return lines + ["Not evaluated yet: `eagle3 evaluate` measures it in vLLM and writes it here."]
    e = evaluation
    lines += [
        f"k = {e['k']}, temperature = {e['temperature']}, {e['prompts']} held-out prompts from `{e['prompt_source']}`, "
        f"evaluated {e['evaluated']}. Acceptance length = 1 + accepted / drafts (bonus token included).",
        "",
        *_measured_by_lines(e),
        "| measured by | acceptance length | per position |",
        "|---|---|---|",
        f"| vLLM {_show(e['vllm_version'])} | {_vllm_cell(e)} | {_show(e['vllm_acceptance_per_position'])} |",
        f"| offline transformers loop | {_show(e['offline_acceptance_length'])} | "
        f"{_show(e['offline_acceptance_per_position'])} |",
        f"| simulated (training held-out) | {_show(e['simulated_acceptance_length'])} | |",
    ]
    if e.get("speedup") is not None:
        lines += ["", f"Output tokens/s speed-up in vLLM: {_show(e['speedup'])}x."]
    if e.get("lossless"):
        lines += ["", e["lossless"]]
    lines += step_section("output position (tokens)", e.get("by_output_position"))
    lines += step_section("phase", e.get("by_phase"))
    return lines + thinking_section(e.get("thinking")) + context_section(e.get("by_context"))


def step_section(name: str, rows: list[dict[str, Any]] | None) -> list[str]:
    """Acceptance from vLLM's own per-request verify steps, by ``name``."""
    if not rows:
        return []
    lines = ["", f"By {name} (vLLM's own verify steps of each answer):", ""]
    lines += [f"| {name} | verify steps | acceptance length |", "|---|---|---|"]
    return lines + [f"| {r['label']} | {r['steps']} | {_show(r['acceptance_length'])} |" for r in rows]


def thinking_section(thinking: dict[str, Any] | None) -> list[str]:
    """Thinking on and off side by side, and the mode the drafter was trained in."""
    if not thinking:
        return []
    lines = [
        "",
        f"Thinking on and off (`{thinking['switch']}`, same drafter and prompts; trained with thinking "
        f"{thinking['trained_in']}):",
        "",
        "| thinking | acceptance length | per position | speed-up | identical outputs |",
        "|---|---|---|---|---|",
    ]
    return lines + [
        f"| {name} | {_show(m['acceptance_length'])} | {_show(m['acceptance_per_position'])} | {_show(m['speedup'])} | "
        f"{_show(m['identical_outputs'])} |"
        for name, m in thinking["modes"].items()
    ]


def _measured_by_lines(e: dict[str, Any]) -> list[str]:
    """Which figure stands for the drafter's acceptance, and why when it is not vLLM's."""
    by = e.get("acceptance_measured_by")
    if by == "vllm":
        return ["The acceptance figure is vLLM's (below, first row).", ""]
    if by == "offline" and e.get("vllm_refused"):
        return [
            f"The acceptance figure is the offline transformers loop's: vLLM {_show(e['vllm_version'])} refused this "
            f"drafter on the evaluating machine (`{e['vllm_refused']}`), so it was measured offline at the same k on "
            f"{_show(e.get('offline_prompts'))} of those held-out prompts.",
            "",
        ]
    if by == "offline":
        return ["The acceptance figure is the offline transformers loop's (vLLM was not run).", ""]
    return []


def _vllm_cell(e: dict[str, Any]) -> str:
    return "refused on the evaluating machine" if e.get("vllm_refused") else _show(e["vllm_acceptance_length"])


def context_section(by_context: dict[str, Any] | None) -> list[str]:
    """Acceptance by context length (tokens before a round's first draft, prompt included)."""
    if not by_context:
        return []
    measured = (
        "vLLM's own verify steps of each answer"
        if by_context["source"] == "vllm-per-request"
        else f"greedy replay of the target's answers from {by_context['source']}"
    )
    lines = ["", f"By context length ({measured}, k as above):", ""]
    lines += ["| context tokens | rounds | acceptance length |", "|---|---|---|"]
    return lines + [
        f"| {b['context']} | {b['rounds']} | {_show(b['acceptance_length'])} |" for b in by_context["buckets"]
    ]


def data_section(facts: dict[str, Any]) -> list[str]:
    d = facts.get("data") or {}
    share = d.get("reasoning_share")
    rows = [
        ("samples", d.get("samples")),
        ("tokens", d.get("tokens")),
        ("samples with reasoning", None if share is None else f"{100 * share:.1f}%"),
        ("chat families", d.get("families")),
        ("answers", d.get("source")),
        ("served model", d.get("served_model")),
        ("datasets", d.get("datasets")),
        ("generated", d.get("generated")),
    ]
    table = [f"| {name} | {_show(value)} |" for name, value in rows]
    return ["", "## Training data", "", "| | |", "|---|---|", *table]


def drafter_section(meta: dict[str, Any]) -> list[str]:
    shape, facts, training = meta.get("drafter") or {}, meta["facts"], meta.get("training") or {}
    rows = [(k, shape.get(k)) for k in ("architecture", "variant", *SHAPE_KEYS)]
    per_kind = ("block_size", "num_speculative_tokens") if "block_size" in training else ("ttt_steps",)
    rows += [(k, training.get(k)) for k in ("steps", *per_kind, "heldout_sim_acceptance_length")]
    rows += [(k, facts.get(k)) for k in ("mode", "hidden_state_engine", "recipe_hash", "train_config_hash")]
    rows += [("eagle3 version", facts.get("eagle3_version"))]
    table = [f"| {name} | {_show(value)} |" for name, value in rows]
    return ["", "## Drafter", "", "| | |", "|---|---|", *table]
