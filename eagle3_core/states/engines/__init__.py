"""The target's hidden states, computed: the transformers and vLLM engines, below extract and train.

Both stages build theirs through ``build.build_engine`` (the one choice of vLLM or transformers):
extract one per process over its shards (``extract/engine_cache.py``), online training one behind a
spool (``train/online_engine.py``). Both give the same states (``hf_engine``, ``vllm_engine``,
the worker and connector in ``vllm_side/``).
"""
