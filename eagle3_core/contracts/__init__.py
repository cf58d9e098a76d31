"""One reader per stage folder: every consumer of generations/, sequences/ and hidden/ reads
through these modules, so a damaged file is always the same one-line error.

- ``generations`` (accepted parts), ``sequences`` (parts), ``hidden`` (index and shards): list
  the folder's files, read them, and check them first;
- ``folder``: the one error for a damaged shard, and ``check_listed``, which holds a folder whose
  manifest is complete to the shards it lists (present, at their size; checksums on request);
- ``parquet``: Parquet reads whose pyarrow errors become that one error.
- ``details``: each stage's manifest ``details`` as a model, written and read through it.
- ``evaluation``: eval/report.json as a model (``EvaluationReport``), written by evaluate and read by the
  model card, the trackers and the run summary through it.

A file that cannot be read (truncated, overwritten, deleted) is an ``InputError`` naming it,
with the fix "delete it and rerun `eagle3 <stage>`: the stage redoes that shard", never a raw
pyarrow or safetensors traceback.
"""
