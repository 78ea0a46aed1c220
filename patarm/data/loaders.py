"""Load pairwise preference data from files, memory or the Hugging Face hub into PreferencePairs.

`load_pairs` reads rows from a source, converts them through the layout registry
(`patarm.data.layouts`, via `patarm.data.convert`), validates them, and accounts for every row in a
`Manifest` (kept, or dropped with a reason). `write_pairs` writes the canonical pairs.jsonl atomically.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from patarm.data.convert import assemble, convert_stream, rename_columns
from patarm.data.layouts import Drop, Parts, RowProblem, resolve_layout
from patarm.data.schema import DataError, Manifest, PreferencePair
from patarm.data.sources import HubLoadError, Rows, Source, open_source
from patarm.io import atomic_write, write_jsonl

__all__ = ["HubLoadError", "LoadResult", "Source", "atomic_write", "load_pairs", "open_source", "write_pairs"]

ON_ERROR = ("raise", "skip")


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

        rows = tqdm(rows, desc=progress, unit="row", mininterval=1.0, disable=None)  # off when not a terminal
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
                manifest.drop(out.reason, f"{_where(opened, index)}: {out.message}")
                continue
            err = out if isinstance(out, DataError) else DataError(
                opened.path, index, out.field, out.reason, out.message,
                opened.line_of(index) if opened.line_of else None)
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


def _where(opened: Source, index: int) -> str:
    return f"{opened.path}, line {opened.line_of(index)}" if opened.line_of else f"{opened.path}, row {index}"


def write_pairs(pairs: Iterable[PreferencePair | dict], path: str | os.PathLike) -> int:
    """Write pairs as canonical JSON lines (`PreferencePair.to_dict()`), atomically; returns the count."""
    return write_jsonl(pairs, path)
