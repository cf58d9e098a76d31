"""A target whose tokenizer is its own code is served by eagle3's own server, and only when trusted.

Kimi-K2.5's tokenizer is ``tokenization_kimi.py`` (tiktoken), named by ``auto_map`` in its
``tokenizer_config.json``: transformers and vLLM run it only with ``trust_remote_code``. Here the
toy target (Kimi's layout) gets a tokenizer of that kind: ``tokenization_stand_in.py``, a
``PreTrainedTokenizerFast`` subclass that stands in for Kimi's file (the files' own code, loaded
by ``auto_map``), over the toy's vocabulary. The recipe's ``target.trust_remote_code`` is the one
switch: eagle3's tokenizer loads refuse without it, naming it, and the server eagle3 starts from
the recipe (``VLLMServer.for_target``) gets ``--trust-remote-code`` from it.

That server answering is proven once, on real vLLM, by the Kimi-K2.5 stand-in
(tests/families/test_kimi_on_real_vllm.py: its own ``tokenization_kimi_stand_in.py`` served through
``VLLMServer.for_target`` from the recipe, every row answered and reconstructed), and by the recipe's
whole DAG (tests/families/test_recipes_end_to_end.py); a toy copy here was a second vLLM start for the
same proof.
"""

from __future__ import annotations

import json
import shutil

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.target.tokenizer import load_tokenizer

STAND_IN = '''
"""Stands in for a target's own tokenizer code (Kimi-K2.5's tokenization_kimi.py) in eagle3's tests."""
from transformers import PreTrainedTokenizerFast


class StandInTokenizer(PreTrainedTokenizerFast):
    """The toy's fast tokenizer, loaded through the folder's own code."""
'''


def remote_code_copy(toy_target, folder):
    """The toy target with its tokenizer loaded through the folder's own code (``auto_map``)."""
    shutil.copytree(toy_target, folder)
    (folder / "tokenization_stand_in.py").write_text(STAND_IN)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "StandInTokenizer"
    config["auto_map"] = {"AutoTokenizer": [None, "tokenization_stand_in.StandInTokenizer"]}
    config_path.write_text(json.dumps(config, indent=2))
    return folder


def test_a_remote_code_tokenizer_loads_only_when_the_recipe_trusts_it(toy_target, tmp_path):
    folder = remote_code_copy(toy_target, tmp_path / "target")
    with pytest.raises(ConfigError) as refused:
        load_tokenizer(folder)
    assert "trust_remote_code" in refused.value.fix or "--trust-remote-code" in refused.value.fix
    assert type(load_tokenizer(folder, trust_remote_code=True)).__name__ == "StandInTokenizer"


def test_the_server_eagle3_starts_from_the_recipe_trusts_the_code_only_when_the_recipe_does(toy_target, tmp_path):
    from eagle3_core.serve import ServeConfig, VLLMServer
    from eagle3_core.target.config import TargetConfig
    from tests.fixtures.toy import toy_recipe

    folder = remote_code_copy(toy_target, tmp_path / "target")
    recipe_target = {**toy_recipe()["target"], "path": str(folder)}
    trusted = TargetConfig.model_validate({**recipe_target, "trust_remote_code": True})
    assert "--trust-remote-code" in VLLMServer.for_target(trusted, ServeConfig()).command("python")
    untrusted = TargetConfig.model_validate(recipe_target)
    assert "--trust-remote-code" not in VLLMServer.for_target(untrusted, ServeConfig()).command("python")
