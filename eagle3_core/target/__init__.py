"""The target model's facts: its recipe section, tokenizer, size on disk and in memory, fingerprint."""
