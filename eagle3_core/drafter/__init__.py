"""The EAGLE-3 drafter model (``model.py``): training-time unroll, inference steps, export."""
