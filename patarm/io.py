"""Reading and writing the project's files: JSON lines, JSON, atomic replacement and content hashes.

Every reader names the file and the line of a bad row (`DataError`); every writer writes a temporary
file beside its target and moves it into place, so a reader (or a crash) never sees half a file.
This module is the bottom of the package: it imports nothing from patarm.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator


class DataError(ValueError):
    """A malformed input row. The message names the file, the row (0-based) and the field."""

    def __init__(self, path: str, row: int | None, field_name: str | None, reason: str, message: str):
        self.path, self.row, self.field, self.reason = path, row, field_name, reason
        where = f"{path}" + (f", row {row}" if row is not None else "") + (
            f", field '{field_name}'" if field_name else ""
        )
        super().__init__(
            f"{where}: {message} (reason: {reason}). Fix the row, or pass on_error='skip' "
            "(--on-error skip) to skip such rows and count them in the manifest."
        )


def open_text(path: str | os.PathLike):
    """A text handle on `path` (gzip-decompressed when it ends in .gz), UTF-8."""
    path = Path(path)
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def iter_jsonl_lines(lines: Iterable[str], path: str) -> Iterator[tuple[int, Any]]:
    """(0-based line index, parsed value or the DataError it raised) for each non-blank line."""
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield index, json.loads(line)
        except json.JSONDecodeError as exc:
            yield index, DataError(path, index, None, "bad_json",
                                   f"line {index + 1} is not valid JSON ({exc.msg}, column {exc.colno})")


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """The rows of a JSON-lines file (optionally .gz): (0-based line index, value or DataError)."""
    with open_text(path) as fh:
        yield from iter_jsonl_lines(fh, str(path))


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    """Every row of a JSON-lines file; the first bad line raises a DataError naming file and line."""
    rows = []
    for _, row in iter_jsonl(path):
        if isinstance(row, DataError):
            raise row
        rows.append(row)
    return rows


def read_json(path: str | os.PathLike) -> Any:
    """A JSON file's value; a clear error naming the file when it is not valid JSON."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(str(path), None, None, "bad_json",
                        f"not valid JSON ({exc.msg}, line {exc.lineno}, column {exc.colno})") from None


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None]) -> None:
    """Run `write(fh)` on a temporary file beside `path`, fsync it, then move it into place, so
    readers (or a crash) never see a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_jsonl(rows: Iterable[Any], path: str | os.PathLike, convert: Callable[[Any], Any] | None = None) -> int:
    """Write rows as JSON lines, atomically; `convert` maps each row to a JSON value first (default:
    `row.to_dict()` when the row has one). Returns the number of rows."""
    count = 0

    def write(fh) -> None:
        nonlocal count
        dumps = json.JSONEncoder(ensure_ascii=False).encode
        for row in rows:
            if convert is not None:
                row = convert(row)
            elif hasattr(row, "to_dict"):
                row = row.to_dict()
            fh.write(dumps(row))
            fh.write("\n")
            count += 1

    atomic_write(path, write)
    return count


def append_jsonl(row: Any, path: str | os.PathLike) -> None:
    """Append one JSON line to a log file (metrics, audits), creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")


def write_json(value: Any, path: str | os.PathLike) -> None:
    """Write a JSON file (indented, keys sorted), atomically."""
    atomic_write(path, lambda fh: json.dump(value, fh, indent=2, sort_keys=True, ensure_ascii=False, default=str))


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()
