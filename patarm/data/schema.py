"""The canonical preference-pair record and the manifest that accounts for every input row."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from patarm.io import DataError, write_json

__all__ = ["DataError", "Manifest", "Message", "Messages", "PreferencePair"]

Message = dict[str, str]  # {"role": "user"|"assistant"|"system", "content": str}
Messages = list[Message]  # a chat: the one spelling of "list of messages" in the package


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
    def from_dict(cls, row: dict[str, Any]) -> PreferencePair:
        return cls(
            id=str(row["id"]),
            prompt=[dict(m) for m in row["prompt"]],
            chosen=row["chosen"],
            rejected=row["rejected"],
            domain=row.get("domain"),
            source=row.get("source"),
            metadata=dict(row.get("metadata") or {}),
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
        """Write the manifest as JSON, atomically."""
        write_json(self.to_dict(), path)
