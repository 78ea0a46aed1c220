"""An append-only on-disk cache of judge outputs, so a re-run or a crash loses nothing already judged.

Each line of ``judgments.jsonl`` is ``{"key", "text"}``; the key hashes the judge prompt (chat messages),
the model, the sampling options and the sample index. Lines are flushed after every batch; a line cut
short by a crash is ignored on the next load.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def judgment_key(messages: Any, sampling: dict[str, Any], sample_index: int) -> str:
    """A stable key for the `sample_index`-th judgment of `messages` under `sampling` (model + options)."""
    blob = json.dumps({"messages": messages, "sampling": sampling, "sample": sample_index},
                      sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class JudgmentCache:
    """Judge outputs by key, loaded from and appended to `path` (None: in memory only)."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else None
        self._texts: dict[str, str] = {}
        self.corrupt_lines = 0  # counted, not dropped silently: a crash mid-write leaves one
        if self.path is not None and self.path.is_file():
            with self.path.open(encoding="utf-8") as fh:
                for line in fh:
                    try:
                        row = json.loads(line)
                        self._texts[row["key"]] = row["text"]
                    except (json.JSONDecodeError, KeyError, TypeError):
                        self.corrupt_lines += 1
        self._pending: list[tuple[str, str]] = []
        # A crash can leave a last line without its newline; start the next append on a fresh line.
        self._needs_newline = bool(self.path and self.path.is_file() and self.path.stat().st_size
                                   and not self.path.read_bytes().endswith(b"\n"))

    def __len__(self) -> int:
        return len(self._texts)

    def __contains__(self, key: str) -> bool:
        return key in self._texts

    def get(self, key: str) -> str | None:
        return self._texts.get(key)

    def put(self, key: str, text: str) -> None:
        self._texts[key] = text
        self._pending.append((key, text))

    def flush(self) -> None:
        """Append the new judgments to disk; called after every generated batch."""
        if self.path is None or not self._pending:
            self._pending.clear()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            if self._needs_newline:
                fh.write("\n")
                self._needs_newline = False
            for key, text in self._pending:
                fh.write(json.dumps({"key": key, "text": text}, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._pending.clear()
