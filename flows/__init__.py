"""Prefect flows: one per stage, plus `pipeline` (all stages) and `nightly`."""
