"""The spool: hidden states handed from an extraction engine to the trainer, unit by unit, under a
byte budget (train.mode online-vllm).

- ``folder``: the spool folder, its requests, units, producer status, and ``produce`` (an engine's
  loop over one run's units);
- ``producer``: ``serve`` (run after run, refusing another target) and ``EngineProducer`` (the
  engine a train stage starts for one run);
- ``http``: the same protocol by URL (a standing engine's server and the trainer's fetcher).

Below both extract and train: it imports neither (an engine comes in as a factory), so the
engines (extract) and the reader (train) each depend on it, never on each other through it.
"""
