"""What a data layout is: a name, how a row in it becomes the parts of a pair, how to recognise it, its options.

A per-row layout's `convert(row, options)` returns `Parts` (prompt messages, chosen and rejected texts, the
row keys it consumed), a `Drop` when the data itself says the row holds no preference (a tie), or a list of
those when one row holds several pairs; it raises `RowProblem` for a malformed row. A whole-set layout
(rows that must be grouped first) gives `stream(rows, options)` instead. `patarm.data.convert` turns parts
into validated `PreferencePair`s and the loader accounts for every row in the manifest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from patarm.data.schema import Message


class RowProblem(Exception):
    """What is wrong with a row (field, reason code, message); the loader adds the file and the line."""

    def __init__(self, field_name: str | None, reason: str, message: str):
        super().__init__(message)
        self.field, self.reason, self.message = field_name, reason, message


class Drop(NamedTuple):
    """A well-formed row that yields no pair (a tie, both answers bad): always counted, never an error."""

    reason: str
    message: str


class Parts(NamedTuple):
    """One pair in canonical pieces, before validation.

    `consumed` are the row keys the layout used (they are not copied into metadata); `metadata` is added
    to the row's own; `id`, `source` and `domain`, when set, win over the row's columns of those names.
    """

    prompt: list[Message]
    chosen: str
    rejected: str
    consumed: frozenset = frozenset()
    metadata: dict[str, Any] | None = None
    id: str | None = None
    source: str | None = None
    domain: str | None = None


Converted = Parts | Drop | list  # a list of Parts / Drop when one row holds several pairs
Rows = Iterable[tuple[int, Any]]
# A whole-set layout yields (first row index of the group, the row whose extra columns become metadata,
# Parts | Drop | RowProblem); other values it cannot read (DataError, non-objects) are passed through.
Stream = Iterator[tuple[int, Any, Any]]


class Option(NamedTuple):
    """A layout option: its default, help text, and the allowed values (None: any value of the default's type)."""

    default: Any
    help: str
    choices: tuple | None = None


@dataclass(frozen=True)
class Layout:
    """A named row layout; see the module docstring. Register it in `patarm.data.layouts.LAYOUTS`."""

    name: str
    summary: str  # columns -> prompt / chosen / rejected, one line (docs, --help, refusals)
    convert: Callable[[dict, Mapping[str, Any]], Converted] | None = None
    stream: Callable[[Rows, Mapping[str, Any]], Stream] | None = None
    # Auto-detection: a row that has all of `keys` is in this layout. Layouts without keys are tried by
    # `fits` (a cheap type test) when no keyed layout matches, in registry order.
    keys: frozenset = frozenset()
    fits: Callable[[dict], bool] | None = None
    why_not: Callable[[dict], str] | None = None  # why a row is not in this layout (for refusals)
    options: Mapping[str, Option] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()

    def refusal(self, row: dict) -> str:
        """Why `row` was not recognised as this layout."""
        if self.why_not is not None:
            return self.why_not(row)
        missing = [k for k in sorted(self.keys) if k not in row]
        return "no " + ", ".join(f"'{k}'" for k in missing) if missing else "does not fit"

    def resolve_options(self, given: Mapping[str, Any] | None, strict: bool = True) -> dict[str, Any]:
        """The layout's options: defaults overridden by `given`; unknown names or bad values raise ValueError
        (unknown names are ignored when `strict` is False: auto-detection passes every option to every layout)."""
        values = {name: opt.default for name, opt in self.options.items()}
        for name, value in (given or {}).items():
            opt = self.options.get(name)
            if opt is None:
                if strict:
                    known = ", ".join(self.options) or "none"
                    raise ValueError(f"layout {self.name!r} has no option {name!r} (its options: {known})")
                continue
            if opt.choices is not None and value not in opt.choices:
                raise ValueError(f"layout {self.name!r}: option {name!r} must be one of {list(opt.choices)}, "
                                 f"got {value!r}")
            if opt.choices is None and opt.default is not None and not _same_kind(value, opt.default):
                raise ValueError(f"layout {self.name!r}: option {name!r} must be a {type(opt.default).__name__}, "
                                 f"got {value!r}")
            values[name] = value
        return values


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


# --------------------------------------------------------------------------- small field readers


def required(row: dict, key: str) -> Any:
    """`row[key]`, or a missing_field problem naming it."""
    value = row.get(key)
    if value is None:
        raise RowProblem(key, "missing_field", f"the row has no '{key}'")
    return value


def text(row: dict, key: str) -> str:
    """`row[key]` as a string, or a missing_field / wrong_type problem naming it."""
    value = required(row, key)
    if not isinstance(value, str):
        raise RowProblem(key, "wrong_type", f"expected a string, got {type(value).__name__}")
    return value


def number(row: dict, key: str) -> float:
    """`row[key]` as a finite number (not a bool), or a problem naming it."""
    value = required(row, key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RowProblem(key, "wrong_type", f"expected a number, got {value!r}")
    if not math.isfinite(value):
        raise RowProblem(key, "non_finite", f"{value} is not a usable number")
    return value


def user_prompt(prompt: str) -> list[Message]:
    """A single-turn prompt as chat messages."""
    return [{"role": "user", "content": prompt}]
