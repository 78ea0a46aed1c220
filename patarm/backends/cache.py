"""The one generation cache: finished completions in a SQLite file, and the wrapper that puts any
backend behind it.

A key is the sha256 of (model, messages, sampling settings, seed, sample index), so a rerun finds every
call it already made and only generates the missing ones; a saved model folder is keyed on its content
(`model_cache_id`), so a judge linked or copied into another run finds its completions, and one retrained in
place does not find the old ones. Completions are stored as they finish (per
batch for local models, per request for HTTP endpoints) in durable transactions (WAL journal,
synchronous=FULL); concurrent writers share one commit ("group commit"), so a busy endpoint costs one
fsync per group, not per call. A run killed at any moment loses no stored completion. The cache file
lives where the caller says: the run folder of a stage (`<output>/cache.sqlite`), never the working
directory by accident.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patarm.backends.base import Backend
from patarm.data.schema import Messages

logger = logging.getLogger(__name__)
_QUERY_CHUNK = 500  # SQLite's default limit on host parameters in one statement is 999 in older builds


def cache_key(model: str, messages: Sequence[dict[str, str]], params: dict[str, Any], sample: int) -> str:
    """sha256 hex of the canonical JSON of one call: model, messages, sampling params, sample index."""
    blob = json.dumps([model, list(messages), params, sample], sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# the files of a saved model that decide what it generates (weights, config, generation config, tokenizer, chat
# template); training artifacts (trainer_state.json, training_args.bin, checkpoints) are not among them
_MODEL_FILES = ("*.safetensors", "*.safetensors.index.json", "pytorch_model*.bin", "config.json",
                "generation_config.json", "tokenizer*.json", "tokenizer.model", "special_tokens_map.json",
                "added_tokens.json", "vocab.json", "merges.txt", "chat_template.jinja", "chat_template.json",
                "adapter_config.json")
# JSON fields that name where a model came from or what wrote it, not what it is
_NAME_FIELDS = ("_name_or_path", "name_or_path", "_model_name_or_path", "transformers_version",
                "base_model_name_or_path")
_fingerprints: dict[tuple, str] = {}


def model_cache_id(spec: str) -> str:
    """What a generation cache keys a model on: for a saved model folder, `sha256:` and the hash of the files that
    decide what it generates (`_MODEL_FILES`; JSON files less the fields naming where it came from) — so the same
    weights under another path (a run that links or copies another run's judge) find their completions, and new
    weights saved under the same path do not find the old ones; any other spec (a hub id, a named model) as given.
    Hashes are memoised per process by (file, size, mtime)."""
    folder = Path(spec)
    if not folder.is_dir():
        return spec
    files = sorted({f for pattern in _MODEL_FILES for f in folder.glob(pattern) if f.is_file()})
    if not files:
        return spec
    stamp = tuple((f.name, st.st_size, st.st_mtime_ns, str(f.resolve())) for f in files for st in [f.stat()])
    if stamp not in _fingerprints:
        digest = hashlib.sha256()
        for f in files:
            digest.update(f.name.encode() + b"\0")
            if f.suffix == ".json":
                data = json.loads(f.read_text(encoding="utf-8"))
                if isinstance(data, dict):
                    data = {k: v for k, v in data.items() if k not in _NAME_FIELDS}
                digest.update(json.dumps(data, sort_keys=True).encode())
            else:
                with f.open("rb") as fh:
                    while block := fh.read(1 << 24):
                        digest.update(block)
            digest.update(b"\0")
        _fingerprints[stamp] = "sha256:" + digest.hexdigest()
    return _fingerprints[stamp]


@dataclass
class _Pending:
    items: list[tuple[str, str]]
    done: bool = False
    error: BaseException | None = None


class GenerationCache:
    """Completions by key in a SQLite file; safe to share between the threads of one process."""

    def __init__(self, path: str | os.PathLike, durable: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # guards the connection
        self._cond = threading.Condition()  # guards the group-commit queue
        self._pending: list[_Pending] = []
        self._writing = False
        # isolation_level=None: autocommit, so every write is its own committed transaction.
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

    def put_many(self, items: Iterable[tuple[str, str]], model: str | None = None) -> None:
        """Store completions durably; returns once they are committed. A key already stored keeps its
        first completion. Calls from several threads at once are committed together."""
        entry = _Pending([(k, t) for k, t in items])
        with self._cond:
            self._pending.append(entry)
            while not entry.done:
                if self._writing:
                    self._cond.wait()
                    continue
                self._writing, batch, self._pending = True, self._pending, []
                self._cond.release()
                error = None
                try:
                    self._write([item for e in batch for item in e.items], model)
                except BaseException as err:  # e.g. a full disk: every waiting writer fails loudly
                    error = err
                finally:
                    self._cond.acquire()
                for e in batch:
                    e.done, e.error = True, error
                self._writing = False
                self._cond.notify_all()
        if entry.error is not None:
            raise entry.error

    def put(self, key: str, text: str, model: str | None = None) -> None:
        self.put_many([(key, text)], model)

    def _write(self, items: list[tuple[str, str]], model: str | None) -> None:
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


def open_cache(cache: GenerationCache | str | os.PathLike | None) -> GenerationCache | None:
    """A GenerationCache from a path (or pass one through; None means no cache)."""
    if cache is None or isinstance(cache, GenerationCache):
        return cache
    return GenerationCache(cache)


@dataclass
class CacheStats:
    """Completions asked for (`used`), of which `generated` were new and `cached` came from disk."""

    used: int = 0
    generated: int = 0
    cached: int = 0
    calls: list[str] = field(default_factory=list)


class CachedBackend:
    """Any backend behind a GenerationCache: `generate` (whole prompts × n samples, as a teacher needs)
    and `draw` (the k-th sample of a prompt, as adaptive voting needs). With a `None` cache it only
    counts. Work is done in chunks of `chunk_size` prompts with a progress bar over completions."""

    def __init__(self, backend: Backend, cache: GenerationCache | str | os.PathLike | None = None, *,
                 chunk_size: int = 256, progress: bool = True, desc: str | None = None):
        self.backend, self.cache = backend, open_cache(cache)
        self.chunk_size, self.progress = max(1, chunk_size), progress
        self.desc = desc or backend.model_id
        self.stats = CacheStats()

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    def sampling(self) -> dict[str, Any]:
        return self.backend.sampling()

    def __getattr__(self, name: str) -> Any:  # chat_turn, options, tokenizer...: the wrapped backend's
        return getattr(self.backend, name)

    def summary(self) -> dict[str, Any]:
        """Counts for a manifest: completions used / generated / from the cache, plus the backend's own
        (requests, retries by reason, failures) when it keeps any."""
        own = getattr(self.backend, "stats", None)
        return {"used": self.stats.used, "generated": self.stats.generated, "cached": self.stats.cached,
                **(dict(own) if isinstance(own, dict) else {})}

    @property
    def greedy(self) -> bool:
        return float(self.sampling().get("temperature", 0.0)) <= 0.0

    @property
    def cache_id(self) -> str:
        """What keys are made of: the backend's `cache_id` (a saved model's content hash) or its model id; without a
        cache nothing is looked up, so the model id (no hashing)."""
        if self.cache is None:
            return self.model_id
        return getattr(self.backend, "cache_id", None) or self.model_id

    def _key(self, messages: Messages, seed: int | None, sample: int) -> str:
        return cache_key(self.cache_id, messages, {**self.sampling(), "seed": seed}, sample)

    def _lookup(self, keys: list[str]) -> dict[str, str]:
        found = self.cache.get_many(keys) if self.cache is not None else {}
        self.stats.used += len(keys)
        self.stats.cached += sum(k in found for k in keys)
        if found and self.progress:
            logger.info("%s: %d of %d completions from the cache %s", self.desc, len(set(found)), len(set(keys)),
                        self.cache.path)
        return found

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None, on_result: Any = None) -> list[list[str]]:
        """`num_samples` completions per prompt; cached ones cost nothing. A prompt with some samples cached
        asks only for the missing ones (sample s with seed `seed + s`, as endpoints number them)."""
        keys = [[self._key(p, seed, s) for s in range(num_samples)] for p in prompts]
        found = self._lookup([k for ks in keys for k in ks])
        out: list[list[str | None]] = [[found.get(k) for k in ks] for ks in keys]
        missing = [(i, s) for i, texts in enumerate(out) for s, t in enumerate(texts) if t is None]
        whole = [i for i, texts in enumerate(out) if all(t is None for t in texts)]
        jobs = [(whole, num_samples, seed, None)]  # (prompt indices, samples, seed, the one sample index)
        for s in range(num_samples):
            some = [i for i, t in missing if t == s and i not in set(whole)]
            if some:
                jobs.append((some, 1, None if seed is None else seed + s, s))
        with self._bar(len(prompts) * num_samples, len(prompts) * num_samples - len(missing)) as bar:
            for indices, n, job_seed, only in jobs:
                for start in range(0, len(indices), self.chunk_size):
                    chunk = indices[start:start + self.chunk_size]

                    def store(results: list[tuple[int, int, str]], chunk: list[int] = chunk, only: Any = only) -> None:
                        placed = [(chunk[i], s if only is None else only, t) for i, s, t in results]
                        self._store([(keys[i][s], t) for i, s, t in placed if out[i][s] is None])
                        for i, s, t in placed:
                            out[i][s] = t
                        bar.update(len(results))

                    meta = [metadata[i] for i in chunk] if metadata is not None else None
                    texts = self.backend.generate([prompts[i] for i in chunk], n, job_seed, meta, on_result=store)
                    store([(c, s, t) for c, row in enumerate(texts) for s, t in enumerate(row)
                           if out[chunk[c]][s if only is None else only] is None])  # backends without on_result
        return out  # type: ignore[return-value]

    def draw(self, requests: Sequence[tuple[Messages, int]], seed: int | None = 0) -> list[str]:
        """The text of each (messages, sample index k) request, in order. Sample k of every prompt is drawn
        with seed `seed + k`; under greedy decoding every k is the same text, so only one is generated."""
        index = [0 if self.greedy else k for _, k in requests]
        keys = [self._key(m, None if seed is None else seed + k, k) for (m, _), k in zip(requests, index)]
        found = self._lookup(keys)
        missing: dict[str, tuple[Messages, int]] = {}
        for key, (messages, _), k in zip(keys, requests, index):
            if key not in found:
                missing.setdefault(key, (messages, k))
        by_sample: dict[int, list[tuple[str, Messages]]] = {}
        for key, (messages, k) in missing.items():
            by_sample.setdefault(k, []).append((key, messages))
        with self._bar(len(set(keys)), len(set(keys)) - len(missing)) as bar:
            for k, jobs in sorted(by_sample.items()):
                for start in range(0, len(jobs), self.chunk_size):
                    chunk = jobs[start:start + self.chunk_size]

                    def store(results: list[tuple[int, int, str]], chunk: list = chunk) -> None:
                        items = [(chunk[i][0], t) for i, _, t in results]
                        self._store(items)
                        found.update(items)
                        bar.update(len(results))

                    texts = self.backend.generate([m for _, m in chunk], 1, None if seed is None else seed + k,
                                                  on_result=store)
                    for (key, _), row in zip(chunk, texts):
                        if key not in found:
                            self._store([(key, row[0])])
                            found[key] = row[0]
                            bar.update(1)
        return [found[k] for k in keys]

    def _store(self, items: list[tuple[str, str]]) -> None:
        self.stats.generated += len(items)
        if self.cache is not None:
            self.cache.put_many(items, self.model_id)

    def _bar(self, total: int, initial: int):
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=initial, desc=self.desc, unit="completion", mininterval=1.0,
                    disable=not self.progress or total == initial, dynamic_ncols=True)
