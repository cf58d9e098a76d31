"""eagle3's domain: plain Python, no orchestrator.

Every stage lives in its own package under ``stages/`` (``generate``, ``reconstruct``, ``vocab``,
``extract``, ``train``, ``evaluate``) with its config beside its code. Stages talk to each other only
through files on disk (see ``run/layout.py``) and their ``manifest.json``; Prefect wraps them in
``tasks/`` and ``flows/``.
"""

__version__ = "0.1.0"
