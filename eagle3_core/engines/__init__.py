"""The target's hidden states, computed: the transformers and vLLM engines, below extract and train.

Extract runs one per process over its shards (``extract/engines.py``); online training runs one
behind a spool (``train/online_engine.py``). Both give the same states (``hf_engine``, ``vllm_engine``,
the worker and connector in ``vllm_side/``).
"""
