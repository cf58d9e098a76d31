"""Hidden states as tensors: the shard writer (the layout is ``eagle3_core.contracts.hidden``), the
NaN/Inf refusal, and the one way to load the target model that makes them.

Below extract, the spool, train and evaluate, which all use it; above ``contracts`` (metadata only).
"""
