"""Prefect tasks: thin wrappers that give eagle3_core's stages concurrency limits, logging and artifacts.

No result cache on a stage's tasks: its own manifest decides what is done (``tasks/stage.py``). No
retries of a stage: a rerun resumes from its finished shards, and the endpoint client retries its
requests itself. The one task Prefect retries is the nightly's question to the served model
(``tasks/nightly.py``).
"""
