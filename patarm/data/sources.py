"""Where preference rows come from: files (.jsonl / .json / .parquet, optionally gzipped JSON), rows in
memory, or a Hugging Face hub dataset. `open_source` gives the rows lazily with a display path and, for
text files, the 1-based line of each row so errors can name it."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from patarm.data.schema import DataError
from patarm.io import JSONProblem, iter_jsonl, iter_jsonl_lines, loads, read_text

_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_DATA_SUFFIXES = _JSONL_SUFFIXES + (".json", ".parquet", ".csv", ".tsv", ".arrow", ".gz")
# owner/name, as the hub spells dataset ids.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_JSON_SPACE = re.compile(r"[ \t\n\r]*")

Rows = Iterator[tuple[int, Any]]  # (0-based row/line index, parsed row or the DataError it raised)


class HubLoadError(RuntimeError):
    """A Hugging Face hub dataset could not be loaded (offline, wrong id or split, missing package)."""


class Source(NamedTuple):
    """An opened source: its rows, a display path for errors, a default `source` name, its kind, and the
    1-based line of a row index (None when rows are not lines of a text file)."""

    rows: Rows
    path: str
    name: str | None
    kind: str  # "file", "memory" or "hub"
    line_of: Callable[[int], int] | None = None


def _next_line(index: int) -> int:
    return index + 1


def _array_rows(text: str, pos: int, path: str, lines: list[int]) -> Rows:
    """The items of a JSON array starting after its "[" at `pos`, each parsed on its own so a bad item
    (duplicate key, NaN, too deep, lone surrogate) is a row error; `lines` receives each item's line."""
    lenient = json.JSONDecoder()
    line, counted, index = 1, 0, 0
    pos = _JSON_SPACE.match(text, pos).end()
    if text.startswith("]", pos):
        return
    while True:
        line += text.count("\n", counted, pos)
        counted = pos
        lines.append(line)
        try:
            value, pos = loads(text, pos)
        except JSONProblem as problem:
            if problem.reason == "bad_json":
                raise DataError(path, None, None, "bad_json", f"the file is {problem.message}") from None
            yield index, DataError(path, index, None, problem.reason, problem.message, line=line)
            try:  # where the refused item ends, to read on from there
                pos = lenient.raw_decode(text, pos)[1]
            except (ValueError, RecursionError):
                raise DataError(path, None, None, problem.reason, f"item {index} (line {line}): "
                                f"{problem.message}; the rest of the file cannot be read") from None
        else:
            yield index, value
        index += 1
        pos = _JSON_SPACE.match(text, pos).end()
        if text.startswith("]", pos):
            return
        if not text.startswith(",", pos):
            raise DataError(path, None, None, "bad_json", f"the file is not valid JSON (expected ',' or ']' after "
                            f"item {index - 1}, line {line + text.count(chr(10), counted, pos)})")
        pos = _JSON_SPACE.match(text, pos + 1).end()


def _json_source(path: Path, stem: str) -> Source:
    """A .json file: a list of rows or {"data": [...]}; JSON lines saved as .json also work."""
    text = read_text(path)
    start = _JSON_SPACE.match(text).end()
    if text.startswith("[", start):
        lines: list[int] = []
        return Source(_array_rows(text, start + 1, str(path), lines), str(path), stem, "file", lines.__getitem__)
    try:
        data, end = loads(text, start)
    except JSONProblem as problem:
        raise DataError(str(path), None, None, problem.reason, f"the file is {problem.message}") from None
    if text[end:].strip():  # several top-level values: it is really JSON lines
        rows = iter_jsonl_lines(text.split("\n"), str(path))
        return Source(rows, str(path), stem, "file", _next_line)
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        return Source(enumerate(data["data"]), str(path), stem, "file")
    raise DataError(str(path), None, None, "bad_json", 'expected a JSON list of rows or an object {"data": [...]}')


def _parquet_rows(path: Path) -> Rows:
    import pyarrow.parquet as pq  # lazy: pyarrow is slow to import and only parquet needs it

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a corrupt file
        raise DataError(str(path), None, None, "bad_file", f"not a readable parquet file: {exc}") from None
    index = 0
    # Batches keep memory flat on big files and let `limit` stop early.
    for batch in parquet.iter_batches(batch_size=4096):
        for row in batch.to_pylist():
            yield index, row
            index += 1


def _hub_rows(repo_id: str, split: str) -> Rows:
    """Rows of a hub dataset; fails here, not while iterating, so the error comes at load time."""
    try:
        import datasets  # lazy: heavy import, only the hub path needs it
    except ImportError as exc:
        raise HubLoadError(f"Loading {repo_id!r} from the Hugging Face hub needs the 'datasets' package "
                           "(pip install datasets); a local .jsonl/.json/.parquet path also works.") from exc
    try:
        dataset = datasets.load_dataset(repo_id, split=split)
    except Exception as exc:
        raise HubLoadError(
            f"Could not load {repo_id!r} (split {split!r}) from the Hugging Face hub: "
            f"{type(exc).__name__}: {exc}. The hub may be unreachable (offline?) or the id/split wrong. "
            "A local file path also works: pass a .jsonl, .json or .parquet file instead."
        ) from exc
    return enumerate(dataset)


def _looks_like_hub_id(text: str) -> bool:
    return bool(_HUB_ID.match(text)) and not text.lower().endswith(_DATA_SUFFIXES)


def open_source(source: Any, split: str = "train") -> Source:
    """Resolve a source to its rows, without reading them yet (a .json file is parsed eagerly).

    A source is a file path (.jsonl, .json, .parquet, optionally .gz for the JSON ones), an iterable of
    dicts already in memory (a list, a `datasets.Dataset`...), or a hub id `owner/name`.
    """
    if not isinstance(source, (str, os.PathLike)):
        if not hasattr(source, "__iter__"):
            raise TypeError(f"expected a path, a hub id or an iterable of dicts, got {type(source).__name__}")
        return Source(enumerate(source), "<memory>", None, "memory")
    path = Path(source)
    if path.is_file():
        name = path.name.lower().removesuffix(".gz")
        stem = path.name.split(".")[0]
        if name.endswith(_JSONL_SUFFIXES):
            return Source(iter_jsonl(path), str(path), stem, "file", _next_line)
        if name.endswith(".json"):
            return _json_source(path, stem)
        if name.endswith(".parquet"):
            return Source(_parquet_rows(path), str(path), stem, "file")
        raise ValueError(f"{path}: unsupported file type; expected .jsonl, .json or .parquet")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory; pass one .jsonl, .json or .parquet file")
    if path.exists():  # a FIFO, socket or device: reading it could block or never end
        raise ValueError(f"{path} is not a regular file (a pipe, socket or device); pass one .jsonl, .json or "
                         ".parquet file")
    if isinstance(source, str) and _looks_like_hub_id(source):
        return Source(_hub_rows(source, split), source, source, "hub")
    raise FileNotFoundError(
        f"Preference data file not found: {path} (absolute: {path.resolve()}). Pass an existing .jsonl, "
        ".json or .parquet file, a list of dicts, or a Hugging Face hub dataset id like 'owner/name'."
    )
