"""The headline's "reasoning present" counts the answers that carry reasoning, never those without.

Generate records an answer without reasoning under the source ``none`` (``generate/stats.py``); a
thinking-off run of configs/qwen3.yaml read "2 of 2 (2 in `none`)" (tests/families/test_recipes_end_to_end.py).
"""

from eagle3_core.run.layout import RunLayout
from eagle3_core.run.manifest import StageManifest, write_manifest
from eagle3_core.run.summary import headline


def reasoning_present(tmp_path, sources: dict[str, int], accepted: int) -> str:
    layout = RunLayout(root=tmp_path)
    details = {"reasoning_sources": sources}
    manifest = StageManifest(
        stage="generate", status="complete", config_hash="h", counts={"accepted": accepted}, details=details
    )
    write_manifest(layout.generations, manifest)
    return headline(layout)["reasoning present"]


def test_answers_without_reasoning_are_not_counted_as_reasoning(tmp_path):
    assert reasoning_present(tmp_path, {"none": 2}, 2) == "0 of 2 (none)"


def test_a_mixed_run_counts_only_the_answers_with_reasoning(tmp_path):
    assert reasoning_present(tmp_path, {"reasoning": 3, "none": 2}, 5) == "3 of 5 (3 in `reasoning`)"
