"""Idempotent requests: a request id names one computation; a retry with the same id joins or reuses it.

A client that lost its connection (a timeout, a restart in between) resends the same body with the same
id: while the first attempt is still running the retry waits for that same computation, and once it
finished the retry gets the stored answer, so one id is judged once per server lifetime. The id is bound
to the body's hash: the same id with another body is a client bug and answered 409. Failed or cancelled
computations are not stored, so a retry after a failure runs again.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any


class IdempotencyConflict(Exception):
    """The id was used before with a different body."""


def body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class IdempotencyCache:
    """At most `max_entries` finished answers (least recently used dropped first) plus those running."""

    def __init__(self, max_entries: int = 4096):
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[str, asyncio.Future]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def run(self, key: str, digest: str, start: Callable[[], Awaitable[Any]]) -> asyncio.Future:
        """The computation for `key`: the running or finished one, or a new task from `start()`."""
        entry = self._entries.get(key)
        if entry is not None:
            old_digest, task = entry
            if old_digest != digest:
                raise IdempotencyConflict(f"request id {key!r} was used before with a different body; "
                                          "use a new id for a new request")
            if not (task.done() and (task.cancelled() or task.exception() is not None)):
                self._entries.move_to_end(key)
                return task
        task = asyncio.ensure_future(start())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved even if no one waits
        self._entries[key] = (digest, task)
        self._evict()
        return task

    def _evict(self) -> None:
        excess = len(self._entries) - self.max_entries
        for key in [k for k, (_, t) in self._entries.items() if t.done()][:max(excess, 0)]:
            del self._entries[key]
