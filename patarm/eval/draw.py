"""Draw judge samples through a backend: batched, cached on disk, with a progress bar.

A request is (chat messages, sample index). Requests already in the cache cost nothing; the rest are
sorted by prompt length (less padding) and generated in batches of `batch_size`, and every batch is
flushed to the cache before the next starts, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from patarm.eval.cache import JudgmentCache, judgment_key

Messages = list[dict[str, str]]


@dataclass
class DrawStats:
    """Judge calls: `used` samples consumed, of which `generated` were new and `cached` came from disk."""

    used: int = 0
    generated: int = 0
    cached: int = 0


class Drawer:
    """Draws the k-th judge sample of a prompt. `sampling` (model, temperature, ...) is part of the key.

    With greedy decoding every sample of a prompt is the same text, so only one is generated and reused.
    """

    def __init__(self, backend: Any, cache: JudgmentCache | None = None, sampling: dict[str, Any] | None = None,
                 batch_size: int = 32, seed: int | None = 0, progress: bool = True, desc: str = "judging"):
        self.backend, self.cache = backend, cache if cache is not None else JudgmentCache()
        self.sampling = dict(sampling or {})
        self.greedy = float(self.sampling.get("temperature", 0.0)) <= 0.0
        self.batch_size, self.seed, self.progress, self.desc = max(1, batch_size), seed, progress, desc
        self.stats = DrawStats()
        self._batches = 0  # seeds differ per batch, so draws of the same prompt are independent samples

    def key(self, messages: Messages, index: int) -> str:
        return judgment_key(messages, self.sampling, 0 if self.greedy else index)

    def draw(self, requests: Sequence[tuple[Messages, int]]) -> list[str]:
        """The judge output text for each (messages, sample index) request, in request order."""
        keys = [self.key(m, i) for m, i in requests]
        missing: dict[str, Messages] = {}
        for key, (messages, _) in zip(keys, requests):
            if key not in self.cache and key not in missing:
                missing[key] = messages
        self.stats.used += len(requests)
        self.stats.cached += sum(1 for k in set(keys) if k not in missing)
        if missing:
            self._generate(missing)
        return [self.cache.get(k) for k in keys]

    def _generate(self, missing: dict[str, Messages]) -> None:
        from tqdm.auto import tqdm  # lazily: only runs that generate show a bar

        jobs = sorted(missing.items(), key=lambda kv: len(json.dumps(kv[1], ensure_ascii=False)))
        with tqdm(total=len(jobs), desc=self.desc, unit="judgment", disable=not self.progress) as bar:
            for start in range(0, len(jobs), self.batch_size):
                batch = jobs[start:start + self.batch_size]
                seed = None if self.seed is None else self.seed + self._batches
                self._batches += 1
                outputs = self.backend.generate([m for _, m in batch], num_samples=1, seed=seed)
                for (key, _), texts in zip(batch, outputs):
                    self.cache.put(key, texts[0])
                self.cache.flush()
                self.stats.generated += len(batch)
                bar.update(len(batch))
