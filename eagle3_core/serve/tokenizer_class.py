"""A model folder that vLLM's transformers would tokenize without spaces, found before the server starts.

Several DeepSeek-family folders name ``tokenizer_class: LlamaTokenizerFast`` in tokenizer_config.json
while their tokenizer.json is byte-level BPE (GPT-2 style). Some transformers 5 releases load such a
folder through ``LlamaTokenizer``, which installs a SentencePiece ``Metaspace`` pre-tokenizer over the
file's ``ByteLevel`` one: every space of every prompt the server renders is dropped (``hello world`` ->
``helloworld``), silently, and the model answers prompts it was never trained on (transformers issue
45488). Whether it happens depends on the transformers in vLLM's own environment and on config.json's
``model_type`` (transformers corrects the class for the types it lists). Measured with vLLM 0.32's
transformers 5.19 on the packages' folders: DeepSeek-V3.1 and R1 (``deepseek_v3``) and R1-Distill-Qwen
(``qwen2``) load right, R1-Distill-Llama (``llama``) drops the spaces; eagle3's own transformers 5.25
loads all of them right.

So the check is two steps: the folder's files (milliseconds) say whether it can happen at all (a
Llama class over a byte-level tokenizer.json: the DeepSeek family and its distills, nothing else
eagle3 ships a recipe for); only then vLLM's Python loads the tokenizer as vLLM will and round-trips
a sentence (about 5 s, once per server start of such a folder).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

SENTENCEPIECE_CLASSES = {"LlamaTokenizer", "LlamaTokenizerFast"}
SENTENCE = "hello world, and good night"
ROUND_TRIP = """
import sys
from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=sys.argv[2] == "1")
ids = tokenizer.encode(sys.argv[3], add_special_tokens=False)
print(type(tokenizer).__name__, tokenizer.decode(ids), sep="\\t")
"""
FIX = (
    'set "tokenizer_class": "PreTrainedTokenizerFast" in the model folder\'s tokenizer_config.json (it loads '
    "tokenizer.json as written, as eagle3's own tokenizer does), then start again"
)


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _byte_level(step) -> bool:
    """Whether a tokenizer.json pre-tokenizer (or a Sequence of them) splits bytes GPT-2 style."""
    if not isinstance(step, dict):
        return False
    return step.get("type") == "ByteLevel" or any(_byte_level(s) for s in step.get("pretokenizers") or [])


def can_drop_spaces(model_dir: str | Path) -> str | None:
    """The declared class when the folder is of the kind that can lose its spaces, else None (files only)."""
    folder = Path(model_dir)
    declared = _json(folder / "tokenizer_config.json").get("tokenizer_class")
    if declared in SENTENCEPIECE_CLASSES and _byte_level(_json(folder / "tokenizer.json").get("pre_tokenizer")):
        return declared
    return None


def spaces_dropped(model_dir: str | Path, python: str, trust_remote_code: bool = False) -> str | None:
    """Why vLLM's transformers (at ``python``) would tokenize the folder's prompts without spaces; None when it
    would not, or when its tokenizer does not load here (the server's start then says why)."""
    declared = can_drop_spaces(model_dir)
    if declared is None:
        return None
    argv = [python, "-c", ROUND_TRIP, str(model_dir), "1" if trust_remote_code else "0", SENTENCE]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    loaded, _, text = done.stdout.strip().rpartition("\n")[-1].partition("\t")
    if done.returncode != 0 or text == SENTENCE:
        return None
    model_type = _json(Path(model_dir) / "config.json").get("model_type")
    return (
        f"its tokenizer_config.json names tokenizer_class {declared} over a byte-level tokenizer.json, and the "
        f"transformers in vLLM's environment loads it as {loaded} for model_type {model_type!r}: "
        f"{SENTENCE!r} comes back as {text!r}"
    )
