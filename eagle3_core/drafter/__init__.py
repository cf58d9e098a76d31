"""The drafters, one file a kind: EAGLE-3 (``model.py``), DFlash (``dflash.py``) and DSpark (``dspark.py``),
each with its training-time unroll, inference steps and export; ``kinds.py`` names them, ``card.py``
writes an export's model card.
"""
