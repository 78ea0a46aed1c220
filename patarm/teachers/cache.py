"""The on-disk teacher cache: one SQLite row per finished call, keyed by a content hash.

A key is the sha256 of (model, messages, sampling parameters, sample index), so a rerun of the same
step finds every call it already made and only sends the missing ones. Each completion is committed
on its own (WAL journal, synchronous=FULL: fsynced before `put` returns), so a run killed at any
moment loses no finished call, and `INSERT OR IGNORE` keeps exactly one completion per key.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

# SQLite's default limit on host parameters in one statement is 999 in older builds.
_QUERY_CHUNK = 500


def cache_key(model: str, messages: Sequence[dict[str, str]], params: dict[str, Any], sample: int) -> str:
    """sha256 hex of the canonical JSON of one call: model, messages, sampling params, sample index."""
    blob = json.dumps([model, list(messages), params, sample], sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class TeacherCache:
    """Completions by key in a SQLite file; safe to share between threads of one process."""

    def __init__(self, path: str | os.PathLike, durable: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # isolation_level=None: autocommit, so every put is its own committed transaction.
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        self._db.execute("CREATE TABLE IF NOT EXISTS completions "
                         "(key TEXT PRIMARY KEY, text TEXT NOT NULL, model TEXT, created REAL)")

    def get_many(self, keys: Iterable[str]) -> dict[str, str]:
        """The cached completions among `keys` (missing keys are absent from the result)."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, str] = {}
        with self._lock:
            for start in range(0, len(keys), _QUERY_CHUNK):
                chunk = keys[start:start + _QUERY_CHUNK]
                marks = ",".join("?" * len(chunk))
                found.update(self._db.execute(f"SELECT key, text FROM completions WHERE key IN ({marks})", chunk))
        return found

    def put(self, key: str, text: str, model: str | None = None) -> None:
        """Store one finished call (durably); a key already stored keeps its first completion."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO completions VALUES (?, ?, ?, ?)", (key, text, model, time.time()))

    def put_many(self, items: Iterable[tuple[str, str]], model: str | None = None) -> None:
        """Store several completions in one transaction (local backends finish a batch at once)."""
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany("INSERT OR IGNORE INTO completions VALUES (?, ?, ?, ?)",
                                     [(k, t, model, now) for k, t in items])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM completions").fetchone()[0]

    def keys(self) -> set[str]:
        with self._lock:
            return {row[0] for row in self._db.execute("SELECT key FROM completions")}

    def close(self) -> None:
        with self._lock:
            self._db.close()


def open_cache(cache: "TeacherCache | str | os.PathLike | None") -> TeacherCache | None:
    """A TeacherCache from a path (or pass one through; None means no cache)."""
    if cache is None or isinstance(cache, TeacherCache):
        return cache
    return TeacherCache(cache)
