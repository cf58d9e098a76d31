"""sequences/'s columns have one home (``contracts.sequences``): reconstruct writes them and every
fixture that stands in for reconstruct's output builds its parts from the same declaration (four had
restated them and drifted: num_tokens as int64, three columns of six)."""

import pytest

from eagle3_core.contracts import sequences


def test_the_writer_and_every_stand_in_fixture_write_the_contracts_columns(tmp_path):
    from eagle3_core.stages.reconstruct.shards import write_sequences as reconstructs
    from tests.stages.evaluate.trained import write_sequences as evaluates
    from tests.stages.extract.helpers import write_sequences as extracts
    from tests.stages.vocab.test_vocab import write_sequences as vocabs

    reconstructs(tmp_path / "r.parquet", {n: [] for n, _ in sequences.COLUMNS})
    parts = [tmp_path / "r.parquet"]
    extracts(tmp_path / "e", [[5, 7]])
    evaluates(tmp_path / "v", [([1, 2], [3])])
    vocabs(tmp_path / "w", [([1, 2, 3], [0, 1, 1])])
    parts += [tmp_path / d / "part-00000.parquet" for d in ("e", "v", "w")]

    assert [sequences.schema_problem(p) for p in parts] == [None] * len(parts)


def test_a_part_with_other_types_or_columns_is_named_with_how_it_differs(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    drifted = pa.table({n: pa.array([], pa.int64() if n == "num_tokens" else t) for n, t in zip(*_names_types())})
    pq.write_table(drifted, tmp_path / "a.parquet")
    pq.write_table(pa.table({"sample_id": ["a"]}), tmp_path / "b.parquet")

    assert sequences.schema_problem(tmp_path / "a.parquet").endswith("num_tokens is int64, not int32")
    assert "columns ['sample_id'], the contract's are" in sequences.schema_problem(tmp_path / "b.parquet")


def _names_types():
    schema = sequences.schema()
    return schema.names, [f.type for f in schema]


@pytest.mark.parametrize("name", ["num_tokens", "num_supervised"])
def test_rows_without_the_counts_get_them_from_their_ids_and_mask(name):
    table = sequences.rows_table([{"sample_id": "a", "input_ids": [1, 2, 3], "loss_mask": [0, 1, 1]}])
    assert table[name].to_pylist() == [3 if name == "num_tokens" else 2]
