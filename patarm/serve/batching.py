"""Dynamic batching across requests, with a bounded queue, on one model worker thread.

Requests put their items on one queue. The worker takes the oldest item's key (items of different
keys — judge items, or chat requests with different sampling — never share a batch), waits until
`max_batch` items of that key are queued or the oldest has waited `max_wait_s`, and runs the batch
on its single worker thread, so the event loop stays free while the model computes. A full queue
raises `QueueFull` (→ 429 with Retry-After); items of a cancelled request are dropped unrun.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

# run(key, payloads) -> one result per payload, in order
RunFn = Callable[[Hashable, list[Any]], Sequence[Any]]


class QueueFull(Exception):
    """The queue cannot take the request's items now; retry after `retry_after_s` seconds."""

    def __init__(self, depth: int, capacity: int, retry_after_s: int):
        self.retry_after_s = retry_after_s
        super().__init__(f"the queue holds {depth} of {capacity} rollouts; retry in {retry_after_s} s")


class BatcherClosed(Exception):
    """The server is shutting down and takes no new work."""


@dataclass
class _Entry:
    key: Hashable
    payload: Any
    future: asyncio.Future
    weight: int = 1  # rollouts this item costs (its n)
    enqueued: float = field(default_factory=time.monotonic)


class DynamicBatcher:
    """Batch items across requests: at most `max_batch` per run, waiting at most `max_wait_s` to fill a
    batch, at most `max_queue` items waiting. `on_batch(size, seconds)` and `on_depth(depth)` feed metrics."""

    def __init__(self, run: RunFn, *, max_batch: int = 32, max_wait_s: float = 0.01, max_queue: int = 1024,
                 on_batch: Callable[[int, float], None] | None = None,
                 on_depth: Callable[[int], None] | None = None):
        if max_batch < 1 or max_queue < 1 or max_wait_s < 0:
            raise ValueError("max_batch and max_queue must be >= 1 and max_wait_s >= 0")
        self.run, self.max_batch, self.max_wait_s, self.max_queue = run, max_batch, max_wait_s, max_queue
        self.on_batch, self.on_depth = on_batch, on_depth
        self._queue: deque[_Entry] = deque()
        self._arrived: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closing = False
        self._batch_s = 0.0  # moving average of a batch's run time, for Retry-After

    @property
    def depth(self) -> int:
        """Rollouts waiting (items × their n; not yet taken into a batch): what the queue limit counts."""
        return sum(e.weight for e in self._queue)

    def start(self) -> None:
        """Start the worker on the running event loop."""
        self._arrived = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="patarm-serve-model")
        self._worker = asyncio.get_running_loop().create_task(self._loop(), name="patarm-serve-batcher")

    async def submit(self, key: Hashable, payloads: Sequence[Any], weights: Sequence[int] | None = None) -> list[Any]:
        """Queue `payloads` under `key` and wait for their results (in order); a failed batch raises here.
        `weights` (default 1 each) are what each payload counts against `max_queue`: its rollouts."""
        if self._closing or self._worker is None:
            raise BatcherClosed("the server is shutting down")
        weights = list(weights) if weights is not None else [1] * len(payloads)
        if self.depth + sum(weights) > self.max_queue:
            self._drop_cancelled()
            if self.depth + sum(weights) > self.max_queue:
                raise QueueFull(self.depth, self.max_queue, self.retry_after_s())
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in payloads]
        self._queue.extend(_Entry(key, p, f, w) for p, f, w in zip(payloads, futures, weights))
        self._changed()
        try:
            return list(await asyncio.gather(*futures))
        except BaseException:
            for f in futures:  # a timed-out or failed request: its queued items will not be run
                if not f.cancel() and not f.cancelled():
                    f.exception()  # retrieved: no "exception was never retrieved" noise for siblings
            raise

    def retry_after_s(self) -> int:
        """Seconds until the queue has likely drained by one request's worth (at least 1)."""
        batches = math.ceil(self.depth / self.max_batch)
        return max(1, math.ceil(batches * self._batch_s))

    async def close(self) -> None:
        """Take no new work, finish every queued item, then stop the worker thread."""
        self._closing = True
        if self._worker is not None:
            self._changed()
            await self._worker
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    # ------------------------------------------------------------------ internals

    def _changed(self) -> None:
        if self.on_depth:
            self.on_depth(self.depth)
        if self._arrived is not None:
            self._arrived.set()

    def _drop_cancelled(self) -> None:
        live = [e for e in self._queue if not e.future.done()]
        if len(live) != len(self._queue):
            self._queue = deque(live)
            self._changed()

    def _ready(self, key: Hashable) -> int:
        return sum(1 for e in self._queue if e.key == key and not e.future.done())

    async def _loop(self) -> None:
        assert self._arrived is not None
        while True:
            self._drop_cancelled()
            if not self._queue:
                if self._closing:
                    return
                self._arrived.clear()
                await self._arrived.wait()
                continue
            head = self._queue[0]
            deadline = head.enqueued + self.max_wait_s
            while not self._closing and self._ready(head.key) < self.max_batch:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), remaining)
                except asyncio.TimeoutError:
                    break
            await self._run_batch(self._take(head.key))

    def _take(self, key: Hashable) -> list[_Entry]:
        batch, rest = [], deque()
        for e in self._queue:
            if e.future.done():
                continue
            (batch if e.key == key and len(batch) < self.max_batch else rest).append(e)
        self._queue = rest
        self._changed()
        return batch

    async def _run_batch(self, batch: list[_Entry]) -> None:
        if not batch:
            return
        start = time.monotonic()
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                self._executor, self.run, batch[0].key, [e.payload for e in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"the scorer returned {len(results)} results for {len(batch)} items")
        except Exception as err:  # every request in the batch fails loudly; the worker keeps going
            for e in batch:
                if not e.future.done():
                    e.future.set_exception(err)
            return
        finally:
            elapsed = time.monotonic() - start
            self._batch_s = elapsed if self._batch_s == 0 else 0.8 * self._batch_s + 0.2 * elapsed
            if self.on_batch:
                self.on_batch(len(batch), elapsed)
        for e, r in zip(batch, results):
            if not e.future.done():
                e.future.set_result(r)
