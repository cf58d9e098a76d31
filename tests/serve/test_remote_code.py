"""A target whose tokenizer is its own code is served by eagle3's own server, and only when trusted.

Kimi-K2.5's tokenizer is ``tokenization_kimi.py`` (tiktoken), named by ``auto_map`` in its
``tokenizer_config.json``: transformers and vLLM run it only with ``trust_remote_code``. Here the
toy target (Kimi's layout) gets a tokenizer of that kind: ``tokenization_stand_in.py``, a
``PreTrainedTokenizerFast`` subclass that stands in for Kimi's file (the files' own code, loaded
by ``auto_map``), over the toy's vocabulary. The recipe's ``target.trust_remote_code`` is the one
switch: eagle3's tokenizer loads refuse without it, naming it, and the server eagle3 starts from
the recipe (``VLLMServer.for_target``) gets ``--trust-remote-code`` from it and answers.
"""

from __future__ import annotations

import json
import shutil
import urllib.request

import pytest

from eagle3_core.errors import ConfigError
from eagle3_core.serve import VLLMServer
from eagle3_core.target import TargetConfig
from eagle3_core.tokenizer import load_tokenizer
from tests.fixtures.toy import toy_recipe, toy_serve
from tests.fixtures.vllm import machine_vllm_lock

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


@pytest.mark.vllm
def test_eagle3s_own_server_serves_a_remote_code_target_from_its_recipe(toy_target, tmp_path):
    folder = remote_code_copy(toy_target, tmp_path / "target")
    target = TargetConfig.model_validate({**toy_recipe()["target"], "path": str(folder), "trust_remote_code": True})
    with machine_vllm_lock(), VLLMServer.for_target(target, toy_serve(tmp_path / "logs")) as server:
        assert "--trust-remote-code" in server.argv
        body = {
            "model": server.model,
            "messages": [{"role": "user", "content": "What is 12 + 7?"}],
            "max_tokens": 64,
            "temperature": 0,
            **target.chat.request_fields(),
        }
        request = urllib.request.Request(
            f"{server.base_url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as reply:
            message = json.loads(reply.read())["choices"][0]["message"]
    assert message.get("reasoning"), message  # the toy reasons: the family's parser read the output
