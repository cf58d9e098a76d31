"""Prompt rows in, one at a time: local jsonl/json/parquet (a file or a directory), a folder
written by ``datasets``' ``save_to_disk``, or a HF dataset.

Guarantees:
- a ``save_to_disk`` folder (a Dataset: ``state.json`` + ``dataset_info.json`` beside ``.arrow``
  data; a DatasetDict: ``dataset_dict.json`` and one such folder per split) is read through
  ``datasets.load_from_disk``, its ``split`` chosen for a DatasetDict; in any folder, the
  ``datasets`` metadata files (``METADATA_FILES``) are never read as prompt rows;
- rows are streamed (jsonl line by line, parquet batch by batch, HF datasets with
  ``streaming=True``), so memory does not grow with the dataset; a ``.json`` array is the one
  format that is read whole;
- a jsonl line that cannot be used (bytes that are not UTF-8, text that is not JSON, JSON that
  is not an object) becomes a ``bad_line`` row that ``normalize`` rejects with its reason and
  its file and line number, so a bad line costs one counted reject, never the run;
- a source that does not exist is an ``InputError`` naming it, never a traceback.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from eagle3_core.errors import InputError
from eagle3_core.prompts.source import PromptSource

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")
METADATA_FILES = {"state.json", "dataset_info.json", "dataset_dict.json"}  # what save_to_disk writes beside the data
BAD_LINE = "__bad_line__"


def bad_line(file: Path, number: int, reason: str, detail: str, text: str) -> dict[str, Any]:
    """The stand-in row for a jsonl line that cannot be a row (``reason`` is the reject code)."""
    return {BAD_LINE: {"reason": reason, "detail": f"{file.name} line {number}: {detail}", "text": text}}


def iter_rows(source: PromptSource) -> Iterator[dict[str, Any]]:
    """The source's rows in input order, at most ``max_samples`` of them."""
    return islice(_all_rows(source), source.max_samples)


def count_rows(source: PromptSource) -> int | None:
    """How many rows ``iter_rows`` will yield, when it is cheap to know (for the progress bar)."""
    path = Path(source.input).expanduser()
    if not path.exists():
        return source.max_samples
    if is_saved_dataset(path):
        total = len(_load_saved(path, source.split))
        return total if source.max_samples is None else min(total, source.max_samples)
    total = 0
    for file in _local_files(path):
        if file.suffix == ".parquet":
            total += _parquet_file(file).metadata.num_rows
        elif file.suffix == ".jsonl":
            total += sum(1 for _ in _jsonl_lines(file))
        else:
            return source.max_samples
    return total if source.max_samples is None else min(total, source.max_samples)


def fingerprint(source: PromptSource) -> str:
    """What identifies the input: its files' bytes (``keys.files_key``: the same prompts at
    another path are the same input), or the dataset name and split."""
    from eagle3_core.run.keys import files_key

    path = Path(source.input).expanduser()
    if not path.exists():
        return f"hf:{source.input}:{source.split}:{source.max_samples}"
    if is_saved_dataset(path):
        files = sorted(p for p in path.rglob("*") if p.is_file())
        split = f":{source.split}"
    else:
        files, split = _local_files(path), ""
    return f"{files_key(files, path)}{split}:{source.max_samples}"


def _all_rows(source: PromptSource) -> Iterator[dict[str, Any]]:
    path = Path(source.input).expanduser()
    if path.exists() and is_saved_dataset(path):
        yield from _load_saved(path, source.split)
    elif path.exists():
        for file in _local_files(path):
            yield from _read_file(file)
    elif _looks_like_path(source.input):
        raise InputError(
            f"input not found: {source.input}",
            fix="pass an existing .jsonl/.json/.parquet file or directory, or a Hugging Face dataset name",
        )
    else:
        yield from _read_hf(source)


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", ".", "~")) or text.endswith(LOCAL_SUFFIXES)


def _local_files(path: Path) -> list[Path]:
    if path.is_file():
        if path.suffix not in LOCAL_SUFFIXES:
            raise InputError(
                f"unsupported input file type: {path.name}", path=str(path), fix="use .jsonl, .json or .parquet"
            )
        return [path]
    files = sorted(
        p for p in path.rglob("*") if p.is_file() and p.suffix in LOCAL_SUFFIXES and p.name not in METADATA_FILES
    )
    if not files:
        raise InputError(
            "no .jsonl/.json/.parquet files in the input directory",
            path=str(path),
            fix="point --input at a file or a directory of prompt files",
        )
    return files


def _read_file(file: Path) -> Iterator[dict[str, Any]]:
    if file.suffix == ".jsonl":
        yield from _read_jsonl(file)
    elif file.suffix == ".json":
        yield from _read_json(file)
    else:
        yield from _read_parquet(file)


def _read_jsonl(file: Path) -> Iterator[dict[str, Any]]:
    """One row per non-blank line; lines are decoded one by one, so one bad byte costs one line."""
    for number, raw in _jsonl_lines(file):
        yield _parse_line(file, number, raw)


def _jsonl_lines(file: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of each non-blank line; a leading BOM is not content, so a first line
    holding only a BOM is blank."""
    with open(file, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            if raw.strip():
                yield number, raw


def _parse_line(file: Path, number: int, raw: bytes) -> dict[str, Any]:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return bad_line(
            file,
            number,
            "undecodable",
            f"byte {exc.start} is not UTF-8 ({exc.reason})",
            raw.decode("utf-8", errors="replace").rstrip("\n"),
        )
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        return bad_line(
            file, number, "invalid_json", f"not valid JSON ({exc.msg} at column {exc.colno})", line.rstrip("\n")
        )
    if not isinstance(row, dict):
        return bad_line(
            file, number, "unknown_shape", f"a row must be a JSON object, got {type(row).__name__}", line.rstrip("\n")
        )
    return LocatedRow(row, f"{file.name} line {number}")


class LocatedRow(dict):
    """A row as read, plus where it was read (``where``), so a reject of it can name its line."""

    def __init__(self, row: dict[str, Any], where: str) -> None:
        super().__init__(row)
        self.where = where

    def __reduce__(self):  # pickles (to a worker, a Prefect task) with its location
        return LocatedRow, (dict(self), self.where)


def _read_json(file: Path) -> Iterator[dict[str, Any]]:
    try:
        data = json.loads(file.read_text(encoding="utf-8-sig"))  # a leading BOM is not content
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not UTF-8 text: byte {exc.start} cannot be decoded",
            path=str(file),
            fix="save the file as UTF-8, or convert it to .jsonl (a bad line there is one reject)",
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"not valid JSON: {exc}",
            path=str(file),
            fix="a .json input holds one array of rows; use .jsonl for one row per line",
        ) from None
    yield from (data if isinstance(data, list) else [data])


def _read_parquet(file: Path) -> Iterator[dict[str, Any]]:
    batches = _parquet_file(file).iter_batches(batch_size=1024)
    while True:
        try:
            batch = next(batches, None)
        except Exception as exc:  # a page torn mid-file: the rows before it were yielded already
            raise _unreadable(file, exc) from None
        if batch is None:
            return
        yield from batch.to_pylist()


def _parquet_file(file: Path):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(file)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise _unreadable(file, exc) from None


def _unreadable(file: Path, exc: Exception) -> InputError:
    return InputError(
        f"cannot read Parquet file: {(str(exc).splitlines() or [type(exc).__name__])[0][:160]}",
        path=str(file),
        fix="repair or replace this prompts file (or convert it to .jsonl, where a bad line costs one counted reject)",
    )


def _read_hf(source: PromptSource) -> Iterator[dict[str, Any]]:
    try:
        import datasets

        datasets.logging.set_verbosity_error()
        dataset = datasets.load_dataset(source.input, split=source.split, streaming=True)
    except Exception as exc:  # hub errors come as many types (offline, not found, gated)
        raise InputError(
            f"cannot load dataset {source.input!r} (split {source.split!r}): "
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            fix="check the name and split, your network or HF_HUB_OFFLINE, or pass a local .jsonl/.parquet file",
        ) from None
    yield from dataset


def is_saved_dataset(path: Path) -> bool:
    """A folder ``save_to_disk`` wrote: a Dataset's or a DatasetDict's."""
    if not path.is_dir():
        return False
    return (path / "dataset_dict.json").is_file() or (
        (path / "state.json").is_file() and (path / "dataset_info.json").is_file()
    )


def _load_saved(path: Path, split: str):
    """The Dataset in ``path`` (memory-mapped Arrow: rows stream from disk), ``split`` of a DatasetDict."""
    import datasets

    datasets.logging.set_verbosity_error()
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # a damaged folder: several types
        raise InputError(
            f"cannot load the saved dataset: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}",
            path=str(path),
            fix="save it again with save_to_disk, or pass a .jsonl/.parquet file",
        ) from None
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise InputError(
                f"the saved dataset has no split {split!r} (it has: {', '.join(loaded) or 'none'})",
                path=str(path),
                fix="pass --split with one of them (generate.prompts.split)",
            )
        return loaded[split]
    return loaded
