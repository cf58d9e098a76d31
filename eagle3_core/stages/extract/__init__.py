"""The extract stage: sequences/ -> hidden/ (the target's low/mid/high and final hidden states).

Entry point: ``stage.ExtractStage`` (one unit per shard; ``run_extract`` drives it whole).
Engines: ``eagle3_core.states.engines`` (transformers, default, and a vLLM worker in the vLLM venv),
shared with online training; ``engine_cache.py`` here holds one loaded engine per process.
"""
