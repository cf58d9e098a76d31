"""The toy build cache: built once per recipe, atomically, and safely under concurrent builders.

Uses a deliberately untrained recipe (2 steps) so the whole file runs in seconds.
"""

import threading

from eagle3_core.toy.build import (
    HELDOUT_PROMPTS,
    REPORT_NAME,
    TRAIN_PROMPTS,
    build_toy_target,
    read_report,
    recipe_hash,
)
from eagle3_core.toy.config import ToyTargetConfig


def tiny(tmp_path, **overrides) -> ToyTargetConfig:
    return ToyTargetConfig(
        train_steps=2,
        warmup_steps=1,
        batch_size=4,
        heldout_questions=3,
        train_prompts=10,
        cache_dir=str(tmp_path),
        **overrides,
    )


def test_concurrent_builders_build_once_and_the_second_reuses_it(tmp_path):
    cfg = tiny(tmp_path)
    paths, logs = [], []

    class Log:
        def progress(self, *a, **k):
            pass

        def log(self, message):
            logs.append(message)

    threads = [threading.Thread(target=lambda: paths.append(build_toy_target(cfg, Log()))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(paths) == 2 and paths[0] == paths[1] == tmp_path / "toy" / recipe_hash(cfg)
    assert sum("building the toy target" in m for m in logs) == 1
    assert [p.name for p in (tmp_path / "toy").iterdir() if p.is_dir()] == [recipe_hash(cfg)]  # no tmp dir left
    mtime = (paths[0] / REPORT_NAME).stat().st_mtime
    assert build_toy_target(cfg) == paths[0] and (paths[0] / REPORT_NAME).stat().st_mtime == mtime


def test_the_directory_is_a_complete_hf_model_with_prompts_and_report(tmp_path):
    path = build_toy_target(tiny(tmp_path))
    for name in (
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        TRAIN_PROMPTS,
        HELDOUT_PROMPTS,
        REPORT_NAME,
    ):
        assert (path / name).is_file(), name
    report = read_report(path)
    assert report["recipe_hash"] == path.name and report["training"]["steps"] == 2
    assert len((path / TRAIN_PROMPTS).read_text().splitlines()) == 10
    assert len((path / HELDOUT_PROMPTS).read_text().splitlines()) == 3


def test_a_recipe_change_builds_elsewhere_and_the_cache_dir_is_not_part_of_the_recipe(tmp_path):
    a = tiny(tmp_path)
    assert recipe_hash(tiny(tmp_path, seed=1)) != recipe_hash(a)
    assert recipe_hash(a.model_copy(update={"cache_dir": "/elsewhere"})) == recipe_hash(a)
