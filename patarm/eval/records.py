"""Shared plumbing for the benchmark modules: record validation errors, JSON/JSONL reading, hub loading.

A *record* is one scored benchmark item in the official field names (see each benchmark module); an
*item* is one benchmark row ready to be judged: ``{"id", "prompt", "candidates": [texts], "domain", ...}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

TIE_POLICIES = ("strict", "half")


class RecordError(ValueError):
    """A malformed record. The message names the file and line (when known), the field and the fix."""

    def __init__(self, field: str | None, reason: str, path: str | None = None, line: int | None = None,
                 unit: str = "line"):
        self.field, self.reason, self.path, self.line, self.unit = field, reason, path, line, unit
        where = ", ".join(x for x in (path, f"{unit} {line}" if line is not None else None,
                                      f"field '{field}'" if field else None) if x)
        super().__init__(f"{where}: {reason}" if where else reason)

    def at(self, path: str, line: int, unit: str = "line") -> RecordError:
        """The same error located at `path`, `line` (1-based; `unit` "row" for JSON files)."""
        return RecordError(self.field, self.reason, path, line, unit)


def need(record: Any, field: str, kind: type | tuple[type, ...], length: int | None = None) -> Any:
    """`record[field]`, checked to be of `kind` (and of `length` for lists); RecordError otherwise."""
    if not isinstance(record, dict):
        raise RecordError(None, f"a record must be a JSON object, got {type(record).__name__}")
    if field not in record:
        raise RecordError(field, f"missing; a record has {sorted(record)}")
    value = record[field]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise RecordError(field, f"expected {_kind_name(kind)}, got a boolean")
    if not isinstance(value, kind):
        raise RecordError(field, f"expected {_kind_name(kind)}, got {type(value).__name__} {str(value)[:40]!r}")
    if length is not None and len(value) != length:
        raise RecordError(field, f"expected {length} entries, got {len(value)}")
    return value


def need_numbers(record: dict, field: str, length: int | None = None, allow_none: bool = False) -> list:
    """A list of numbers (None allowed only when `allow_none`) under `field`."""
    values = need(record, field, list, length)
    for i, v in enumerate(values):
        ok = (v is None and allow_none) or (isinstance(v, (int, float)) and not isinstance(v, bool))
        if not ok:
            raise RecordError(field, f"entry {i} is {v!r}; expected a number")
    return values


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({int: "a number", float: "a number", str: "a string", list: "a list",
                        dict: "an object"}.get(k, k.__name__) for k in kinds)


def check_tie_policy(policy: str | None) -> str | None:
    if policy is not None and policy not in TIE_POLICIES:
        raise ValueError(f"tie policy must be one of {TIE_POLICIES} (or unset for the official rule), got {policy!r}")
    return policy


def pct(x: float) -> float:
    """A 0-1 fraction as percent (0-100), the unit every metric here is reported in."""
    return 100.0 * x


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def read_samples(path: str | Path, validate: Callable[[dict], Any],
                 from_official: Callable[[dict], dict] | None = None) -> list[dict]:
    """Records from a samples file, each mapped by `from_official` (the benchmark's own spellings to a
    record) and checked by `validate`; errors name the file and line (or row).

    Three file forms load: JSONL (one record per line, what `patarm eval` writes), a JSON list of rows (RM-Bench's
    ``results/*.json``) and a JSON object of columns (RewardBench's ``eval-set-scores/<model>.json``, whose
    ``id`` is a list; scalar entries such as ``model`` are run metadata and are skipped).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"samples file {path} does not exist")
    records = []
    for where, unit, record in _sample_rows(path):
        try:
            if from_official is not None:
                record = from_official(record) if isinstance(record, dict) else record
            validate(record)
        except RecordError as err:
            raise err.at(str(path), where, unit) from None
        records.append(record)
    return records


def _sample_rows(path: Path) -> Iterator[tuple[int, str, Any]]:
    """(line or row number, "line" | "row", row) of a JSONL file, a JSON list or a JSON object of columns."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise RecordError(None, f"not valid JSON ({err.msg} at line {err.lineno})", str(path)) from None
        yield from ((i, "row", row) for i, row in enumerate(data, start=1))
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None  # JSONL: several objects
    if isinstance(data, dict) and isinstance(data.get("id"), list):
        n = len(data["id"])
        columns = {k: v for k, v in data.items() if isinstance(v, list) and len(v) == n}
        yield from ((i + 1, "row", {k: v[i] for k, v in columns.items()}) for i in range(n))
        return
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield line_no, "line", json.loads(line)
        except json.JSONDecodeError as err:
            raise RecordError(None, f"not valid JSON ({err.msg} at column {err.colno})", str(path), line_no) from None


def read_rows(path: Path) -> Iterator[dict]:
    """Rows of a .json (a list of objects) or .jsonl file."""
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of objects")
        yield from data
    else:
        with path.open(encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as err:
                        raise ValueError(f"{path}, line {line_no}: not valid JSON ({err.msg})") from None


def data_files(path: str | Path, patterns: Sequence[str] = ("*.json", "*.jsonl")) -> list[Path]:
    """The data files at `path`: the file itself, or the matching files in a folder (sorted)."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"benchmark data path {path} does not exist")
    files = sorted(p for pattern in patterns for p in path.glob(pattern))
    if not files:
        raise FileNotFoundError(f"no {' or '.join(patterns)} files in {path}")
    return files


def load_hub(repo: str, split: str | None = None) -> list[dict]:
    """All rows of a hub dataset (every split when `split` is None); a clear error when offline."""
    try:
        import datasets  # lazily: only hub loads need it
    except ImportError as err:  # pragma: no cover - datasets is a dependency
        raise RuntimeError("loading from the hub needs the `datasets` package; or pass --data PATH") from err
    try:
        data = datasets.load_dataset(repo, split=split)
    except Exception as err:
        raise RuntimeError(f"could not load {repo!r} from the Hugging Face hub ({type(err).__name__}: "
                           f"{str(err)[:200]}). Offline? Download it and pass --data PATH.") from err
    splits: Iterable = data.values() if hasattr(data, "values") else [data]
    return [dict(row) for part in splits for row in part]


def user_prompt(prompt: Any) -> list[dict[str, str]]:
    """A prompt as chat messages: a plain string becomes one user turn."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(m) for m in prompt]
