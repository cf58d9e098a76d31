"""One reader per stage folder: every consumer of generations/, sequences/ and hidden/ reads
through these modules, so a damaged file is always the same one-line error.

A file that cannot be read (truncated, overwritten, deleted) is an ``InputError`` naming it,
with the fix "delete it and rerun `eagle3 <stage>`: the stage redoes that shard", never a raw
pyarrow or safetensors traceback.
"""
