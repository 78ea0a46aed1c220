"""The dynamic batcher on its own: batch limits, keys, cancellation, a full queue, failures, draining."""

import asyncio
import threading

import pytest

from patarm.serve.batching import BatcherClosed, DynamicBatcher, QueueFull


def test_batches_hold_one_key_and_at_most_max_batch_items():
    runs = []

    def run(key, payloads):
        runs.append((key, list(payloads)))
        return [f"{key}:{p}" for p in payloads]

    async def main():
        b = DynamicBatcher(run, max_batch=4, max_wait_s=0.05, max_queue=100)
        b.start()
        a, c = await asyncio.gather(b.submit("a", list(range(10))), b.submit("c", [0, 1, 2]))
        await b.close()
        return a, c

    a, c = asyncio.run(main())
    assert a == [f"a:{i}" for i in range(10)] and c == ["c:0", "c:1", "c:2"]
    assert all(len(p) <= 4 and all(f"{k}:{x}" in a + c for x in p) for k, p in runs)
    assert sorted(x for k, p in runs if k == "a" for x in p) == list(range(10))
    assert sum(len(p) for _, p in runs) == 13


def test_items_of_a_cancelled_request_are_never_run():
    release, seen = threading.Event(), []

    def run(key, payloads):
        seen.extend(payloads)
        release.wait(10)
        return payloads

    async def main():
        b = DynamicBatcher(run, max_batch=1, max_wait_s=0, max_queue=10)
        b.start()
        first = asyncio.ensure_future(b.submit("k", ["first"]))
        await asyncio.sleep(0.05)  # "first" is running and holds the worker
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(b.submit("k", ["late-1", "late-2"]), 0.05)
        release.set()
        assert await first == ["first"]
        assert await b.submit("k", ["after"]) == ["after"]
        await b.close()

    asyncio.run(main())
    assert seen == ["first", "after"]


def test_a_full_queue_refuses_with_a_retry_time():
    release = threading.Event()

    def run(key, payloads):
        release.wait(10)
        return payloads

    async def main():
        b = DynamicBatcher(run, max_batch=1, max_wait_s=0, max_queue=4)
        b.start()
        held = asyncio.ensure_future(b.submit("k", [1, 2, 3, 4]))  # one running, three queued
        await asyncio.sleep(0.05)
        with pytest.raises(QueueFull) as err:
            await b.submit("k", [5, 6])
        assert err.value.retry_after_s >= 1 and b.depth == 3
        release.set()
        assert await held == [1, 2, 3, 4]
        await b.close()

    asyncio.run(main())


def test_a_failed_batch_fails_its_requests_and_the_worker_goes_on():
    def run(key, payloads):
        if "bad" in payloads:
            raise RuntimeError("model error")
        return payloads

    async def main():
        b = DynamicBatcher(run, max_batch=8, max_wait_s=0, max_queue=10)
        b.start()
        with pytest.raises(RuntimeError, match="model error"):
            await b.submit("k", ["bad"])
        assert await b.submit("k", ["good"]) == ["good"]
        await b.close()

    asyncio.run(main())


def test_close_finishes_queued_items_and_refuses_new_ones():
    def run(key, payloads):
        return [p * 2 for p in payloads]

    async def main():
        b = DynamicBatcher(run, max_batch=2, max_wait_s=1.0, max_queue=10)
        b.start()
        pending = asyncio.ensure_future(b.submit("k", [1, 2, 3]))
        await asyncio.sleep(0)
        await b.close()  # does not wait out max_wait_s: closing flushes at once
        assert await pending == [2, 4, 6]
        with pytest.raises(BatcherClosed):
            await b.submit("k", [4])

    asyncio.run(main())


@pytest.mark.parametrize("max_wait_s, batches", [(2.0, [2]), (0.0, [1, 1])])
def test_the_worker_waits_up_to_max_wait_to_fill_a_batch(max_wait_s, batches):
    sizes = []

    def run(key, payloads):
        sizes.append(len(payloads))
        return payloads

    async def main():
        b = DynamicBatcher(run, max_batch=2, max_wait_s=max_wait_s, max_queue=10)
        b.start()
        first = asyncio.ensure_future(b.submit("k", ["a"]))
        await asyncio.sleep(0.1)  # the second item comes well within 2 s, well after 0 s
        assert await asyncio.gather(first, b.submit("k", ["b"])) == [["a"], ["b"]]
        await b.close()

    asyncio.run(main())
    assert sizes == batches
