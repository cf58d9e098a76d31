"""The `<stage>-summary` artifact every stage leaves on its flow run page: what a browser showed before was
raw `None` and 16-digit floats (evaluate's acceptance length, 3.139784946236559)."""

from eagle3_core.run.manifest import StageManifest
from tasks.common import manifest_markdown


def test_the_summary_shows_no_raw_none_and_floats_to_four_significant_digits():
    manifest = StageManifest(
        stage="evaluate",
        status="complete",
        config_hash="x",
        counts={"prompts": 16},
        timings={"online": 12.3456},
        details={
            "online_acceptance_length": 3.139784946236559,
            "offline_acceptance_length": None,
            "settings": {"k": 3, "temperature": 0.0, "by_context": None},
        },
    )
    text = manifest_markdown(manifest)
    assert "None" not in text and "3.139784946236559" not in text
    assert "**online_acceptance_length**: 3.14" in text and "**offline_acceptance_length**: —" in text
    assert "| prompts | 16 |" in text and "| by_context | — |" in text
    assert "| k | 3 |" in text and "| temperature | 0 |" in text and "| online | 12.35 |" in text
