"""The pre-flight: a recipe checked against a live server before the long run (``suite``, ``history``).

Below generate, which runs it on each endpoint it finds up (``GenerateStage`` builds it from its
target), and called by ``eagle3 probe --recipe``, which stops on a difference.
"""
