"""Load pairwise preference data from files, memory or the Hugging Face hub into PreferencePairs.

`load_pairs` reads rows from a source, converts them through the layout registry
(`patarm.data.layouts`, via `patarm.data.convert`), validates them, and accounts for every row in a
`Manifest` (kept, or dropped with a reason). `write_pairs` writes the canonical pairs.jsonl atomically.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, NamedTuple

from patarm.data.convert import assemble, convert_stream, rename_columns
from patarm.data.layouts import Drop, Parts, RowProblem, resolve_layout
from patarm.data.schema import DataError, Manifest, PreferencePair
from patarm.io import atomic_write, iter_jsonl, iter_jsonl_lines, open_text, write_jsonl

__all__ = ["HubLoadError", "LoadResult", "Source", "atomic_write", "load_pairs", "open_source", "write_pairs"]

ON_ERROR = ("raise", "skip")
_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_DATA_SUFFIXES = _JSONL_SUFFIXES + (".json", ".parquet", ".csv", ".tsv", ".arrow", ".gz")
# owner/name, as the hub spells dataset ids.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")

Rows = Iterator[tuple[int, Any]]  # (0-based row/line index, parsed row or the DataError it raised)


class HubLoadError(RuntimeError):
    """A Hugging Face hub dataset could not be loaded (offline, wrong id or split, missing package)."""


@dataclass
class LoadResult:
    """The pairs that passed validation and the manifest accounting for every input row."""

    pairs: list[PreferencePair]
    manifest: Manifest

    def __iter__(self) -> Iterator[PreferencePair]:
        return iter(self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index):
        return self.pairs[index]


# --------------------------------------------------------------------------- sources


def _json_rows(path: Path) -> Rows:
    """Rows of a .json file: a list of rows or {"data": [...]}; JSON lines saved as .json also work."""
    with open_text(path) as fh:
        text = fh.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # several top-level values: it is really JSON lines
            return iter_jsonl_lines(text.splitlines(), str(path))
        raise DataError(str(path), None, None, "bad_json",
                        f"the file is not valid JSON ({exc.msg}, line {exc.lineno}, column {exc.colno})") from None
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list):
        raise DataError(str(path), None, None, "bad_json",
                        'expected a JSON list of rows or an object {"data": [...]}')
    return enumerate(data)


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


class Source(NamedTuple):
    """An opened source: its rows, a display path for errors, a default `source` name and its kind."""

    rows: Rows
    path: str
    name: str | None
    kind: str  # "file", "memory" or "hub"


def open_source(source: Any, split: str = "train") -> Source:
    """Resolve a source to its rows, without reading them yet (the JSON file parses eagerly).

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
            return Source(iter_jsonl(path), str(path), stem, "file")
        if name.endswith(".json"):
            return Source(_json_rows(path), str(path), stem, "file")
        if name.endswith(".parquet"):
            return Source(_parquet_rows(path), str(path), stem, "file")
        raise ValueError(f"{path}: unsupported file type; expected .jsonl, .json or .parquet")
    if path.exists():
        raise IsADirectoryError(f"{path} is a directory; pass one .jsonl, .json or .parquet file")
    if isinstance(source, str) and _looks_like_hub_id(source):
        return Source(_hub_rows(source, split), source, source, "hub")
    raise FileNotFoundError(
        f"Preference data file not found: {path} (absolute: {path.resolve()}). Pass an existing .jsonl, "
        ".json or .parquet file, a list of dicts, or a Hugging Face hub dataset id like 'owner/name'."
    )


# --------------------------------------------------------------------------- loading and writing


def _check_args(on_error: str, limit: int | None) -> None:
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")


def load_pairs(source: str | os.PathLike | list[dict], *, layout: str = "auto",
               layout_options: Mapping[str, Any] | None = None, columns: Mapping[str, str] | None = None,
               on_error: str = "raise", split: str = "train", source_name: str | None = None,
               domain: str | None = None, limit: int | None = None, format: str | None = None,
               progress: str | None = None) -> LoadResult:
    """Load, validate and normalise preference pairs from a file, a list of dicts or a hub id.

    layout:         "auto" (detected per row) or a name from `patarm.data.LAYOUTS` (or an alias);
                    `format` is an older spelling of it.
    layout_options: the layout's options, e.g. {"axis": "safer"} for pku_saferlhf.
    columns:        rename source columns first: {layout's field name: source column}.
    on_error:       "raise" stops at the first bad row with a DataError; "skip" drops it and counts it
                    in `manifest.dropped` under its reason. Rows the data itself marks as holding no
                    preference (ties) are always dropped and counted.
    split:          the split to load for a hub id.
    source_name:    `source` for rows without one (default: the file stem, or the hub id).
    domain:         `domain` for rows without one.
    limit:          stop once this many pairs are kept (rows after that are not read or counted).
    progress:       show a progress bar over the input rows with this description.
    """
    chosen = resolve_layout(format if format is not None else layout)
    _check_args(on_error, limit)
    opened = open_source(source, split)
    name = source_name or opened.name
    rows: Rows = opened.rows
    if columns:
        rows = rename_columns(rows, columns)
    if progress:
        from tqdm.auto import tqdm  # lazy: only callers that want a bar pay for it

        rows = tqdm(rows, desc=progress, unit="row", mininterval=1.0)
    manifest = Manifest()
    layouts: Counter = Counter()
    pairs: list[PreferencePair] = []
    seen: set[str] = set()
    duplicates = 0
    items = convert_stream(rows, chosen, layout_options)
    try:
        for index, row, out, layout_name in items:
            if limit is not None and len(pairs) >= limit:
                break
            manifest.rows_in += 1
            if isinstance(out, Parts):
                try:
                    pair = assemble(row, out, name, domain)
                except RowProblem as problem:
                    out = problem
                else:
                    pairs.append(pair)
                    layouts[layout_name] += 1
                    # Duplicate ids are counted, not dropped: the same pair twice may be intended (upsampling).
                    if pair.id in seen:
                        duplicates += 1
                    seen.add(pair.id)
                    continue
            if isinstance(out, Drop):
                manifest.drop(out.reason, f"{opened.path}, row {index}: {out.message}")
                continue
            err = out if isinstance(out, DataError) else DataError(opened.path, index, out.field, out.reason,
                                                                   out.message)
            if on_error == "raise":
                raise err
            manifest.drop(err.reason, str(err))
    finally:
        items.close()
        close = getattr(opened.rows, "close", None)
        if close is not None:
            close()  # releases the open file when `limit` or an error stops a generator early
    manifest.rows_out = len(pairs)
    manifest.extra.update(source=opened.path, layouts=dict(layouts), duplicate_ids=duplicates)
    if opened.kind == "hub":
        manifest.extra["split"] = split
    return LoadResult(pairs=pairs, manifest=manifest)


def write_pairs(pairs: Iterable[PreferencePair | dict], path: str | os.PathLike) -> int:
    """Write pairs as canonical JSON lines (`PreferencePair.to_dict()`), atomically; returns the count."""
    return write_jsonl(pairs, path)
