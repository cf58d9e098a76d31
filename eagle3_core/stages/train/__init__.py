"""The train stage: hidden/ (or sequences/ + the target) + vocab/ -> drafter/, with DeepSpeed.

One file per concern: ``config`` (TrainConfig), ``inputs`` (checks before any step), ``data``
(split, batch plan, readers), ``loss`` (training-time test), ``ds_config`` (the DeepSpeed
JSON), ``build`` (drafter, target head, reader), ``loop`` (the trainer), ``checkpoint``,
``metrics``, ``export``, ``main`` (the trainer process), ``startup`` (its DeepSpeed import
without what eagle3 never uses), ``launcher`` (starts and streams it),
``stage`` (``run_train``, the entry point), ``plan`` (``train.mode`` decided once, auto
included: the DAG, the CLI and the stage read its ``TrainPlan``), ``sources`` (where the hidden
states come from: one interface, a source per settled mode). Mode online-vllm: ``online_vllm`` (what the
trainer requests from the engine's spool, and its reader), ``online_engine`` (the engine of a
spool, and the standing engine's command), ``online_run`` (the stage's side: spool, engine for
the run, figures); the spool itself is ``eagle3_core.spool``.
"""
