"""The train stage: hidden/ (or sequences/ + the target) + vocab/ -> drafter/, with DeepSpeed.

One file per concern: ``config`` (TrainConfig), ``inputs`` (checks before any step), ``data``
(split, batch plan, readers), ``loss`` (training-time test), ``ds_config`` (the DeepSpeed
JSON), ``build`` (drafter, target head, reader), ``loop`` (the trainer), ``checkpoint``,
``metrics``, ``export``, ``main`` (the trainer process), ``launcher`` (starts and streams it),
``stage`` (``run_train``, the entry point), ``sources`` (where the hidden states come from: the
one factory over ``train.mode``, and mode auto). Mode online-vllm: ``online_vllm`` (what the
trainer requests from the engine's spool, and its reader), ``online_engine`` (the engine of a
spool, and the standing engine's command), ``online_run`` (the stage's side: spool, engine for
the run, figures); the spool itself is ``eagle3_core.spool``.
"""
