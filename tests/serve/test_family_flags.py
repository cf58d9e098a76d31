"""A family's server flags: the recipe's parsers and tokenizer mode become vLLM's flags, and vLLM knows them.

vLLM refuses every request that carries `tools` unless it was started with
``--enable-auto-tool-choice --tool-call-parser`` (a request with tools and no `tool_choice` is
`auto`), so each recipe names its tool parser and every server eagle3 starts passes it. The
names are checked against the vLLM that eagle3 ships (its own registries), not a list of ours.
"""

from __future__ import annotations

import glob
import json
import subprocess
from pathlib import Path

import pytest

from eagle3_core.config import PipelineConfig
from eagle3_core.serve import ServeConfig, ServeError, VLLMServer

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted(glob.glob(str(ROOT / "configs" / "*.yaml")))

# vLLM's own registries, listed by the vLLM environment (about 5 s: it imports vllm)
REGISTRIES = """
import json
from vllm.reasoning import ReasoningParserManager
from vllm.tokenizers.registry import _VLLM_TOKENIZERS
from vllm.tool_parsers import ToolParserManager
print(json.dumps({"tool": sorted(ToolParserManager.list_registered()),
                  "reasoning": sorted(ReasoningParserManager.list_registered()),
                  "tokenizer_mode": sorted(_VLLM_TOKENIZERS)}))
"""


def test_the_server_for_a_target_passes_its_parsers_and_tokenizer_mode(tmp_path):
    target = PipelineConfig.from_yaml(ROOT / "configs" / "qwen3.yaml").target
    target = target.model_copy(update={"path": str(tmp_path), "tokenizer_mode": "deepseek_v4"})
    cmd = VLLMServer.for_target(target, ServeConfig(device="cpu", port=8000)).command("python")

    assert cmd[cmd.index("--reasoning-parser") + 1] == "qwen3"
    assert "--enable-auto-tool-choice" in cmd and cmd[cmd.index("--tool-call-parser") + 1] == "hermes"
    assert cmd[cmd.index("--tokenizer-mode") + 1] == "deepseek_v4"


def test_a_remote_code_target_is_served_with_trust_remote_code_and_only_then(tmp_path):
    """Kimi-K2.5's tokenizer is its own code: without the flag vLLM cannot load it; with the
    recipe's switch off, no file's code runs in the server."""
    target = PipelineConfig.from_yaml(ROOT / "configs" / "kimi-k2.5.yaml").target.model_copy(
        update={"path": str(tmp_path)}
    )
    assert "--trust-remote-code" not in VLLMServer.for_target(target, ServeConfig(device="cpu")).command("python")
    trusted = target.model_copy(update={"trust_remote_code": True})
    assert "--trust-remote-code" in VLLMServer.for_target(trusted, ServeConfig(device="cpu")).command("python")


def test_only_a_cpu_server_runs_eager_unless_the_recipe_says(tmp_path):
    """A GPU server keeps CUDA graphs: evaluate's speed-up is measured as the target is deployed."""
    target = PipelineConfig.from_yaml(ROOT / "configs" / "qwen3.yaml").target.model_copy(update={"path": str(tmp_path)})

    def eager(**fields) -> bool:
        return "--enforce-eager" in VLLMServer.for_target(target, ServeConfig(**fields)).command("python")

    assert eager(device="cpu") and not eager(device="cuda")
    assert eager(device="cuda", enforce_eager=True) and not eager(device="cpu", enforce_eager=False)


def test_a_target_without_a_tool_parser_gets_no_tool_flags(tmp_path):
    target = PipelineConfig.from_yaml(ROOT / "configs" / "qwen3.yaml").target
    target = target.model_copy(update={"path": str(tmp_path), "tool_parser": None, "tokenizer_mode": None})
    cmd = VLLMServer.for_target(target, ServeConfig(device="cpu", port=8000)).command("python")

    assert "--enable-auto-tool-choice" not in cmd and "--tool-call-parser" not in cmd
    assert "--tokenizer-mode" not in cmd


def test_every_bundled_recipe_declares_a_tool_parser_for_vllm_or_that_its_model_calls_no_tools():
    missing, without_tools = [], []
    for path in RECIPES:
        target = PipelineConfig.from_yaml(path).target
        if not target.calls_tools:
            without_tools.append(Path(path).name)  # rows with tools rejected unsent: calls_no_tools
        elif target.tool_parser is None or not target.tool_parser.vllm:
            missing.append(Path(path).name)
    assert missing == [], f"recipes without target.tool_parser.vllm (vLLM refuses their rows with tools): {missing}"
    # the R1 distills: R1's template, a Qwen2.5 / Llama-3 vocabulary without R1's tool tokens
    assert sorted(without_tools) == ["deepseek-r1-distill-llama.yaml", "deepseek-r1-distill-qwen.yaml"]


@pytest.mark.vllm
def test_every_recipes_parsers_and_tokenizer_mode_are_names_this_vllm_knows():
    from tests.fixtures.requirements import require_vllm

    python = require_vllm()
    listed = subprocess.run([str(python), "-c", REGISTRIES], capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr[-2000:]
    known = json.loads(listed.stdout.strip().splitlines()[-1])
    unknown = []
    for path in RECIPES:
        target = PipelineConfig.from_yaml(path).target
        named = {
            "tool": target.tool_parser.vllm if target.tool_parser else None,
            "reasoning": target.reasoning_parser,
            "tokenizer_mode": target.tokenizer_mode,
        }
        unknown += [
            f"{Path(path).name}: {kind} {name}" for kind, name in named.items() if name and name not in known[kind]
        ]
    assert unknown == [], unknown


@pytest.mark.slow
@pytest.mark.vllm
def test_a_tool_parser_vllm_does_not_know_is_one_error_naming_the_field_and_vllms_list(toy_target, tmp_path):
    """Real vLLM refuses it before loading anything (about 6 s here)."""
    from tests.fixtures.requirements import require_vllm
    from tests.fixtures.toy import TOY_RECIPE
    from tests.fixtures.vllm import machine_vllm_lock

    require_vllm()
    recipe = PipelineConfig.from_yaml(TOY_RECIPE)
    target = recipe.target.model_copy(
        update={
            "path": str(toy_target),
            "tool_parser": recipe.target.tool_parser.model_copy(update={"vllm": "kimi_k9"}),
        }
    )
    serve = recipe.serve.model_copy(update={"port": None, "log_dir": str(tmp_path / "vllm")})
    with machine_vllm_lock(), pytest.raises(ServeError) as raised:
        VLLMServer.for_target(target, serve).start()

    message = raised.value.message
    assert message.startswith("vLLM does not know the tool call parser 'kimi_k9' (target.tool_parser.vllm)"), message
    assert " kimi_k2 " in message and " hermes " in message and "Traceback" not in message
    assert "\n" not in message
