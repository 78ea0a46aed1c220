"""Reading and writing the project's files: JSON lines, JSON, atomic replacement and content hashes.

Readers take bytes and decode each line on its own, so one bad line (a stray byte, a lone surrogate, a
duplicate key, NaN, absurd nesting) is one row error naming the file and its 1-based line while the other
lines still load; a file that is not UTF-8 JSON text at all (UTF-16, gzip bytes without .gz, binary) is one
file error saying what it looks like. Writers write standard JSON only (never NaN) to a temporary file
beside the target, created with the user's umask, and move it into place, so a reader (or a crash)
never sees half a file. Strict JSON parsing and file sniffing live in `patarm.io.text`. This package is
the bottom of patarm: it imports nothing else from it.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import math
import os
import secrets
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from patarm.io.text import (
    MAX_DEPTH,
    SURROGATE_MESSAGE,
    JSONProblem,
    loads,
    loads_line,
    lone_surrogate,
    nesting_depth,
    sniff,
)

__all__ = ["DataError", "JSONProblem", "MAX_DEPTH", "SURROGATE_MESSAGE", "append_jsonl", "atomic_write",
           "iter_jsonl", "iter_jsonl_lines", "loads", "loads_line", "lone_surrogate", "nesting_depth",
           "open_bytes", "output_apart", "read_json", "read_jsonl", "read_text", "sha256_file", "sniff", "write_json",
           "write_jsonl"]

_BOM = b"\xef\xbb\xbf"
_SPACE = frozenset(" \t\r\n")  # JSON's whitespace
_GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


class DataError(ValueError):
    """A malformed input row or file. The message names the file, then the 1-based line (text files) or
    the 0-based row (a JSON list, a table, rows in memory), the field, and what to do."""

    def __init__(self, path: str, row: int | None, field_name: str | None, reason: str, message: str,
                 line: int | None = None):
        self.path, self.row, self.field, self.reason, self.line = path, row, field_name, reason, line
        where = path + (f", line {line}" if line is not None else f", row {row}" if row is not None else "")
        where += f", field '{field_name}'" if field_name else ""
        hint = ("Fix the row, or pass on_error='skip' (--on-error skip) to skip such rows and count them in the "
                "manifest." if row is not None or line is not None else "Fix or replace the file.")
        super().__init__(f"{where}: {message} (reason: {reason}). {hint}")


class MissingNLTKData(LookupError, RuntimeError):
    """NLTK's punkt tables are not where NLTK looks (offline: no download). A LookupError, as NLTK raises, and a
    RuntimeError, so the CLI prints it as one line instead of a traceback (an IndexError stays a bug)."""

    def __init__(self, need: str, err: BaseException):
        first = next((line.strip() for line in str(err).splitlines() if "Resource" in line), type(err).__name__)
        super().__init__(f"{need} needs NLTK's punkt tables: pass --nltk-data / --nltk_data DIR or set NLTK_DATA to a "
                         f"folder that has tokenizers/punkt_tab (e.g. ../shared/benchmarks/nltk_data) ({first})")


@contextlib.contextmanager
def needs_nltk_tables(need: str) -> Iterator[None]:
    """Turn NLTK's own LookupError (tables not found) inside the block into `MissingNLTKData` naming `need`; a
    KeyError / IndexError (a LookupError too) is a bug and passes unchanged."""
    try:
        yield
    except LookupError as err:
        if type(err) is not LookupError:
            raise
        raise MissingNLTKData(need, err) from None


def _refuse(path: str, what: str) -> DataError:
    return DataError(path, None, None, "bad_file", f"the file holds {what}, not UTF-8 JSON text")


def open_bytes(path: str | os.PathLike) -> BinaryIO:
    """A binary handle on a file's bytes (gunzipped when it ends in .gz), after checking that they look
    like UTF-8 text; raises a file DataError saying what they look like otherwise."""
    name = str(path)
    if name.lower().endswith(".gz"):
        with open(path, "rb") as raw:
            if raw.read(2) not in (b"\x1f\x8b", b""):
                raise DataError(name, None, None, "bad_file", "not a gzip file (no gzip header): drop the .gz suffix "
                                "if it is plain text")
        fh: BinaryIO = gzip.open(path, "rb")  # type: ignore[assignment]
    else:
        fh = open(path, "rb")
    try:
        head = fh.read(4096)
        what = sniff(head)
        if what is not None:
            raise _refuse(name, what)
        fh.seek(3 if head.startswith(_BOM) else 0)  # a UTF-8 byte-order mark is not part of the first row
    except _GZIP_ERRORS as exc:
        fh.close()
        raise _truncated(name, 0, exc) from None
    except BaseException:
        fh.close()
        raise
    return fh


def _truncated(path: str, line: int, exc: BaseException) -> DataError:
    return DataError(path, None, None, "bad_file", f"the compressed data is truncated or corrupt after line {line} "
                     f"({type(exc).__name__}: {exc}); download or compress the file again")


# --------------------------------------------------------------------------- readers


def _decoded_lines(fh: BinaryIO, block: int = 1 << 20) -> Iterator[str | bytes]:
    """A binary file's lines (without their newline) as text, or as bytes for a line that is not UTF-8.
    A block of lines is decoded at once (fast); only a block holding a bad byte is decoded line by line."""
    pending: list[bytes] = []  # the start of a line whose end is not read yet
    while True:
        data = fh.read(block)
        if data:
            cut = data.rfind(b"\n")
            if cut < 0:
                pending.append(data)
                continue
            pending.append(data[:cut])
            chunk, pending = b"".join(pending), [data[cut + 1:]]
        else:
            chunk, pending = b"".join(pending), []
            if not chunk:
                return
        try:
            yield from chunk.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            for line in chunk.split(b"\n"):
                try:
                    yield line.decode("utf-8")
                except UnicodeDecodeError:
                    yield line


def iter_jsonl_lines(lines: Iterable[str | bytes], path: str) -> Iterator[tuple[int, Any]]:
    """(0-based line index, parsed value or the DataError of that line) for each non-blank line; a line
    given as bytes is one that is not UTF-8. Lines are parsed with `loads(check=False)`: see there."""
    index = -1
    try:
        for index, text in enumerate(lines):
            if not text or text.isspace():
                continue
            try:
                if type(text) is bytes:
                    text.decode("utf-8")  # raises: say where
                if text[0] in _SPACE:
                    value = loads_line(text, False)
                else:  # loads_line inlined for the common case: this runs once per line of every file
                    value, end = loads(text, 0, False)
                    if end != len(text) and not text[end:].isspace():
                        value = loads_line(text, False)  # raises, with the message
                yield index, value
            except UnicodeDecodeError as exc:
                yield index, DataError(path, index, None, "bad_encoding", f"byte 0x{text[exc.start]:02x} at column "
                                       f"{exc.start + 1} is not UTF-8 (re-save the file as UTF-8)", line=index + 1)
            except JSONProblem as problem:
                yield index, DataError(path, index, None, problem.reason, problem.message, line=index + 1)
    except _GZIP_ERRORS as exc:
        raise _truncated(path, index + 1, exc) from None


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """The rows of a JSON-lines file (optionally .gz): (0-based line index, value or DataError)."""
    with open_bytes(path) as fh:
        yield from iter_jsonl_lines(_decoded_lines(fh), str(path))


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    """Every row of a JSON-lines file; the first bad line raises a DataError naming file and line."""
    rows = []
    for _, row in iter_jsonl(path):
        if isinstance(row, DataError):
            raise row
        rows.append(row)
    return rows


def read_text(path: str | os.PathLike) -> str:
    """A whole file (optionally .gz) as UTF-8 text without a leading BOM; a file DataError otherwise."""
    with open_bytes(path) as fh:
        try:
            raw = fh.read()
        except _GZIP_ERRORS as exc:
            raise _truncated(str(path), 0, exc) from None
    raw = raw[3:] if raw.startswith(_BOM) else raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - raw.rfind(b"\n", 0, exc.start)
        raise DataError(str(path), None, None, "bad_encoding", f"byte 0x{raw[exc.start]:02x} at line {line}, column "
                        f"{column} is not UTF-8 (re-save the file as UTF-8)") from None


def read_json(path: str | os.PathLike) -> Any:
    """A JSON file's value (strict, see `loads`); a clear error naming the file when it is not valid."""
    try:
        return loads_line(read_text(path))
    except JSONProblem as problem:
        raise DataError(str(path), None, None, problem.reason, problem.message) from None


# --------------------------------------------------------------------------- writers


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None]) -> None:
    """Run `write(fh)` on a new temporary file beside `path` (mode 0666 minus the umask, as any tool
    creates files), fsync it, then move it into place, so readers never see a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        with open(tmp, "x", encoding="utf-8") as fh:  # "x": O_EXCL, never follows or reuses a file
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _not_finite(path: Any, what: str) -> ValueError:
    return ValueError(f"{path}: {what} holds a NaN or infinite number, which standard JSON cannot represent; "
                      "replace it (e.g. with null) before writing")


def write_jsonl(rows: Iterable[Any], path: str | os.PathLike, convert: Callable[[Any], Any] | None = None) -> int:
    """Write rows as JSON lines, atomically; `convert` maps each row to a JSON value first (default:
    `row.to_dict()` when the row has one). Returns the number of rows."""
    count = 0

    def write(fh) -> None:
        nonlocal count
        dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
        for row in rows:
            if convert is not None:
                row = convert(row)
            elif hasattr(row, "to_dict"):
                row = row.to_dict()
            try:
                fh.write(dumps(row))
            except ValueError as exc:
                if "JSON compliant" not in str(exc):
                    raise
                raise _not_finite(path, f"row {count}") from None
            fh.write("\n")
            count += 1

    atomic_write(path, write)
    return count


def _finite(value: Any) -> Any:
    """`value` with NaN / infinite floats replaced by None (for logs, which must not stop a run)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def append_jsonl(row: Any, path: str | os.PathLike) -> None:
    """Append one JSON line to a log file (metrics, audits), creating its folder; NaN / infinite
    numbers are written as null."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(_finite(row), ensure_ascii=False, default=str, allow_nan=False) + "\n")


def write_json(value: Any, path: str | os.PathLike) -> None:
    """Write a JSON file (indented, keys sorted), atomically."""
    def write(fh) -> None:
        try:
            text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str, allow_nan=False)
        except ValueError as exc:
            if "JSON compliant" not in str(exc):
                raise
            raise _not_finite(path, "the value") from None
        fh.write(text)

    atomic_write(path, write)


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def output_apart(output: str | os.PathLike, inputs: Iterable[str | os.PathLike], flag: str = "--output") -> None:
    """Raise ValueError, before anything is written, when writing into the folder `output` could overwrite
    or delete an input: an input that is `output` itself or lies inside it (links resolved). Inputs that
    are not on disk (hub ids) cannot collide and are skipped."""
    out = Path(output).resolve()
    for given in inputs:
        if not os.path.lexists(given):
            continue
        src = Path(given).resolve()
        if src == out or out in src.parents:
            raise ValueError(f"{flag} {output}: it holds the input {given}, which writing there would overwrite; "
                             "choose an output folder that does not contain the input")
