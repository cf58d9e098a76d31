"""The extract stage: sequences/ -> hidden/ (the target's low/mid/high and final hidden states).

Entry point: ``stage.ExtractStage`` (one unit per shard; ``run_extract`` drives it whole).
Engines: ``hf_engine`` (transformers, default) and ``vllm_engine``
(a vLLM worker in the vLLM venv; its code lives in ``vllm_side/``).
"""
