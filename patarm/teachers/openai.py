"""A teacher behind any OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, SGLang, a provider).

Calls run concurrently on one asyncio loop with at most `concurrency` in flight. A call is retried
with exponential back-off (and jitter; `Retry-After` respected) on 429, 408, 5xx, timeouts,
connection errors and malformed bodies; other 4xx stop the run at once (a bad request or key will
not get better). Every finished call is written to the on-disk cache (group-committed with the calls
finishing alongside it) before its worker takes the next one, so a killed run restarted with the
same cache repeats no finished call and loses none.
"""

from __future__ import annotations

import asyncio
import os
import random
import ssl
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Sequence

import certifi
import httpx
from tqdm.auto import tqdm

from patarm.teachers.base import Messages, TeacherError
from patarm.teachers.cache import TeacherCache, cache_key, open_cache

RETRY_STATUS = frozenset({408, 409, 425, 429})  # plus every 5xx


class _FatalRequest(TeacherError):
    """A response no retry will fix (400, 401, 404...): the run stops starting new calls."""


@dataclass
class _Job:
    index: int  # prompt index
    sample: int
    key: str
    payload: dict[str, Any]


class _GroupCommit:
    """Writes finished calls to the cache off the event loop. Calls that finish while a commit is
    running go into the next commit together, so one fsync covers many calls under load; `put`
    returns only once its call is durably stored."""

    def __init__(self, cache: TeacherCache, model: str):
        self.cache, self.model = cache, model
        self.pending: list[tuple[str, str, asyncio.Future]] = []
        self.task: asyncio.Task | None = None

    async def put(self, key: str, text: str) -> None:
        future = asyncio.get_running_loop().create_future()
        self.pending.append((key, text, future))
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._drain())
        await future

    async def _drain(self) -> None:
        while self.pending:
            batch, self.pending = self.pending, []
            try:
                await asyncio.to_thread(self.cache.put_many, [(k, t) for k, t, _ in batch], self.model)
            except Exception as err:  # e.g. a full disk: every waiting call fails loudly
                for *_, future in batch:
                    future.set_exception(err)
                continue
            for *_, future in batch:
                future.set_result(None)


def _completion_text(response: httpx.Response) -> str | None:
    """choices[0].message.content of a 200 body, or None when the body is not a chat completion."""
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) else None


class OpenAITeacher:
    """Chat completions from `base_url` (e.g. "http://127.0.0.1:8000/v1") for `model`.

    Sampling: temperature, top_p, max_tokens, and `extra_body` (merged into every request, e.g.
    {"top_k": 20}). Sample i of a prompt is its own request (n=1) with seed `seed + i` when a seed is
    given. timeout_s bounds one request end to end; backoff_s * 2**attempt (capped at max_backoff_s,
    jittered down to half) is the wait before retry `attempt + 1`.
    """

    def __init__(self, model: str, base_url: str = "http://127.0.0.1:8000/v1", *, api_key: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", temperature: float = 0.0, top_p: float = 1.0,
                 max_tokens: int = 2048, extra_body: dict[str, Any] | None = None, concurrency: int = 16,
                 timeout_s: float = 600.0, max_retries: int = 8, backoff_s: float = 1.0, max_backoff_s: float = 60.0,
                 cache: TeacherCache | str | os.PathLike | None = None, progress: bool = True):
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.model, self.url = model, base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key if api_key is not None else os.environ.get(api_key_env)
        self.params = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, **(extra_body or {})}
        self.concurrency, self.timeout_s, self.max_retries = concurrency, timeout_s, max_retries
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.cache, self.progress = open_cache(cache), progress
        self.stats: Counter = Counter()  # requests, ok, cached, retry:<reason>, failed
        self._ssl: ssl.SSLContext | None = None

    # ------------------------------------------------------------------ public API

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None) -> list[list[str]]:
        """`num_samples` completions per prompt (blocking; runs its own event loop)."""
        coro = self.agenerate(prompts, num_samples, seed, metadata)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        with ThreadPoolExecutor(1) as pool:  # called from async code: give the coroutine its own loop
            return pool.submit(asyncio.run, coro).result()

    async def agenerate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                        metadata: Sequence[dict] | None = None) -> list[list[str]]:
        jobs = self._jobs(prompts, num_samples, seed)
        results: list[list[str | None]] = [[None] * num_samples for _ in prompts]
        found = self.cache.get_many(j.key for j in jobs) if self.cache is not None else {}
        pending = []
        for job in jobs:
            if job.key in found:
                results[job.index][job.sample] = found[job.key]
            else:
                pending.append(job)
        self.stats["cached"] += len(jobs) - len(pending)
        if pending:
            await self._run(pending, results, len(jobs))
        return results  # type: ignore[return-value]

    # ------------------------------------------------------------------ internals

    def _jobs(self, prompts: Sequence[Messages], num_samples: int, seed: int | None) -> list[_Job]:
        jobs = []
        for i, messages in enumerate(prompts):
            for s in range(num_samples):
                payload = {"model": self.model, "messages": list(messages), "n": 1, **self.params}
                if seed is not None:
                    payload["seed"] = seed + s
                key = cache_key(self.model, messages, {**self.params, "seed": seed}, s)
                jobs.append(_Job(i, s, key, payload))
        return jobs

    async def _run(self, pending: list[_Job], results: list[list[str | None]], total: int) -> None:
        """Drain `pending` with `concurrency` workers; raise once all stopped if any call failed."""
        queue = iter(pending)  # shared: each free worker takes the next job (no await inside next())
        failures: list[tuple[_Job, BaseException]] = []
        fatal = asyncio.Event()
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        bar = tqdm(total=total, initial=total - len(pending), desc=f"teacher {self.model}", unit="call",
                   disable=not self.progress, mininterval=1.0)
        writer = _GroupCommit(self.cache, self.model) if self.cache is not None else None

        async def worker() -> None:
            # One client and connection per worker: httpx's pool scans every connection on each request,
            # which at 16+ connections costs more CPU than the request itself.
            async with httpx.AsyncClient(headers=headers, limits=httpx.Limits(max_connections=1),
                                         timeout=self.timeout_s, verify=self._ssl_context()) as client:
                for job in queue:
                    if fatal.is_set():
                        return
                    try:
                        text = await self._call(client, job.payload)
                    except TeacherError as err:
                        failures.append((job, err))
                        if isinstance(err, _FatalRequest):
                            fatal.set()
                        continue
                    if writer is not None:
                        await writer.put(job.key, text)
                    results[job.index][job.sample] = text
                    bar.update()

        try:
            await asyncio.gather(*(worker() for _ in range(min(self.concurrency, len(pending)))))
        finally:
            bar.close()
        if failures:
            self.stats["failed"] += len(failures)
            done = sum(text is not None for row in results for text in row)
            where = f"; the {done} finished calls are cached in {self.cache.path}, rerun to resume" \
                if self.cache is not None else ""
            raise TeacherError(f"{len(failures)} of {len(pending)} teacher calls to {self.url} failed, "
                               f"{total - done - len(failures)} not attempted (first: {failures[0][1]}){where}")

    async def _call(self, client: httpx.AsyncClient, payload: dict[str, Any]) -> str:
        """One chat completion, retried on transient failures; raises TeacherError when it gives up."""
        reason = "none"
        for attempt in range(self.max_retries + 1):
            retry_after = None
            self.stats["requests"] += 1
            try:
                response = await asyncio.wait_for(client.post(self.url, json=payload), self.timeout_s)
            except (asyncio.TimeoutError, httpx.TimeoutException):
                reason = "timeout"
            except httpx.TransportError as err:
                reason = f"connection ({type(err).__name__})"
            else:
                code = response.status_code
                if code == 200:
                    text = _completion_text(response)
                    if text is not None:
                        self.stats["ok"] += 1
                        return text
                    reason = "malformed body"
                elif code in RETRY_STATUS or code >= 500:
                    reason, retry_after = f"HTTP {code}", response.headers.get("retry-after")
                else:
                    raise _FatalRequest(f"HTTP {code} from {self.url}: {response.text[:300]}")
            self.stats[f"retry:{reason}"] += 1
            if attempt < self.max_retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
        raise TeacherError(f"gave up after {self.max_retries + 1} attempts (last: {reason})")

    def _ssl_context(self) -> ssl.SSLContext:
        """One TLS context for all workers (building one loads the CA bundle: ~15 ms of CPU each)."""
        if self._ssl is None:
            self._ssl = ssl.create_default_context(cafile=certifi.where())
        return self._ssl

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before the next attempt: jittered exponential back-off, at least Retry-After."""
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** attempt) * random.uniform(0.5, 1.0)
        try:
            return max(delay, min(float(retry_after), self.max_backoff_s)) if retry_after else delay
        except ValueError:  # an HTTP-date Retry-After: fall back to our own schedule
            return delay
