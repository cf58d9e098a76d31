"""The extract stage: sequences/ -> hidden/ (the target's low/mid/high and final hidden states).

Entry point: ``stage.run_extract``; the flow uses ``plan_extract`` / ``extract_shard`` /
``finish_extract``. Engines: ``hf_engine`` (transformers, default) and ``vllm_engine``
(a vLLM worker in the vLLM venv; its code lives in ``vllm_side/``).
"""
