"""Prompt inputs, below every stage that reads prompts (generate, evaluate's held-out set).

``source.PromptSource`` says where they are; ``inputs`` reads them (jsonl, json, Parquet, a
Hugging Face dataset or its ``save_to_disk`` folder) and fingerprints their bytes.
"""
