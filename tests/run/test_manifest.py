"""The manifest reader: a manifest is trusted only whole and inside its own folder."""

from __future__ import annotations

import json

import pytest

from eagle3_core.errors import InputError
from eagle3_core.run.manifest import StageManifest, read_manifest, write_manifest

RECORD = {"bytes": 3, "blake2b": "00"}


def doctored(folder, *names: str):
    """A complete reconstruct manifest in ``folder`` listing ``names`` as shards, as a hand edit leaves it."""
    write_manifest(folder, StageManifest(stage="reconstruct", status="complete", config_hash="h"))
    raw = json.loads((folder / "manifest.json").read_text())
    raw["shards"] = {name: RECORD for name in names}
    (folder / "manifest.json").write_text(json.dumps(raw))


@pytest.mark.parametrize(
    "name, why",
    [
        ("../../../../etc/hostname", "shard name '../../../../etc/hostname' leads outside its folder ('..')"),
        ("part-00000/../../x.parquet", "leads outside its folder ('..')"),
        ("/etc/hostname", "shard name '/etc/hostname' is absolute: a manifest lists names inside its own folder"),
        ("", "names the folder itself, not a shard"),
    ],
)
def test_a_shard_name_leading_outside_the_folder_is_a_damaged_manifest_naming_the_file(tmp_path, name, why):
    doctored(tmp_path, "part-00000.parquet", name)

    with pytest.raises(InputError) as error:
        read_manifest(tmp_path)

    assert error.value.message.startswith(f"damaged reconstruct manifest {tmp_path / 'manifest.json'}: ")
    assert why in error.value.message and error.value.path == str(tmp_path / "manifest.json")
    assert error.value.fix == "delete it and rerun `eagle3 reconstruct`: the stage writes it again"


def test_shard_names_inside_the_folder_and_its_subfolders_are_read(tmp_path):
    doctored(tmp_path, "part-00000.parquet", "accepted/part-00000.parquet", "stats/..part.json")

    assert sorted(read_manifest(tmp_path).shards) == [
        "accepted/part-00000.parquet",
        "part-00000.parquet",
        "stats/..part.json",
    ]


def test_a_manifest_that_is_not_json_or_not_a_manifest_is_damaged_too(tmp_path):
    (tmp_path / "manifest.json").write_text('{"stage": "vocab", "status": "comp')
    with pytest.raises(InputError, match=r"^damaged \S+ manifest .*: not JSON"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"stage": "vocab", "status": "done", "config_hash": "h"}))
    with pytest.raises(InputError, match=r"^damaged vocab manifest .*: status: Input should be"):
        read_manifest(tmp_path)
