"""The nightly regeneration: dated dataset versions, and what its run page shows."""
