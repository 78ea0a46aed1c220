"""The canonical preference-pair record and the manifest that accounts for every input row."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

Message = dict[str, str]  # {"role": "user"|"assistant"|"system", "content": str}


@dataclass
class PreferencePair:
    """One pairwise preference: a prompt (as chat messages) with a chosen and a rejected reply.

    `prompt` is the whole conversation up to the reply being judged (its last message is from the
    user); `chosen` and `rejected` are the texts of the two candidate assistant replies.
    """

    id: str
    prompt: list[Message]
    chosen: str
    rejected: str
    domain: str | None = None
    source: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def question(self) -> str:
        """The last user turn, the instruction the responses answer."""
        for message in reversed(self.prompt):
            if message["role"] == "user":
                return message["content"]
        return ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "PreferencePair":
        return cls(
            id=str(row["id"]),
            prompt=[dict(m) for m in row["prompt"]],
            chosen=row["chosen"],
            rejected=row["rejected"],
            domain=row.get("domain"),
            source=row.get("source"),
            metadata=dict(row.get("metadata") or {}),
        )


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


@dataclass
class Manifest:
    """Accounts for every input row: rows_in == rows_out + sum(dropped.values())."""

    rows_in: int = 0
    rows_out: int = 0
    dropped: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)  # first error message per reason
    extra: dict[str, Any] = field(default_factory=dict)

    def drop(self, reason: str, message: str = "") -> None:
        self.dropped[reason] += 1
        self.examples.setdefault(reason, message)

    @property
    def consistent(self) -> bool:
        return self.rows_in == self.rows_out + sum(self.dropped.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "dropped": dict(self.dropped),
            "examples": self.examples,
            **self.extra,
        }

    def write(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.to_dict(), fh, indent=2, sort_keys=True)
