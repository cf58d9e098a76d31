"""Prefect tasks: thin wrappers that give eagle3_core functions retries, caching, concurrency limits, logging and artifacts."""
