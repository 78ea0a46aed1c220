"""Any OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, SGLang, a provider) as a backend.

Calls run concurrently on one asyncio loop with at most `concurrency` in flight. A call is retried
with exponential back-off (and jitter; `Retry-After` respected) on 429, 408, 5xx, timeouts,
connection errors and malformed bodies; other 4xx stop the run at once (a bad request or key will
not get better). Each finished call is handed to `on_result` (e.g. the cache) before its worker
takes the next one, so a killed run restarted with the same cache repeats almost nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import ssl
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import certifi
import httpx
from tqdm.auto import tqdm

from patarm.backends.base import AssistantTurn, BackendError, OnResult, ToolCall, parse_arguments, parse_tool_calls
from patarm.data.schema import Messages

RETRY_STATUS = frozenset({408, 409, 425, 429})  # plus every 5xx


class _FatalRequest(BackendError):
    """A response no retry will fix (400, 401, 404...): the run stops starting new calls."""


@dataclass
class _Job:
    index: int  # prompt index
    sample: int
    payload: dict[str, Any]


def _message(body: Any) -> dict | None:
    """choices[0].message of a chat-completion body, or None when the body is not one."""
    try:
        message = body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return None
    return message if isinstance(message, dict) else None


def _text(body: Any) -> str | None:
    message = _message(body)
    content = message.get("content") if message else None
    return content if isinstance(content, str) else None


def run_sync(coro: Coroutine) -> Any:
    """Run `coro` to completion from sync code, also when called inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1) as pool:  # called from async code: give the coroutine its own loop
        return pool.submit(asyncio.run, coro).result()


class OpenAIBackend:
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
                 progress: bool = True):
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.model_id, self.base_url = model, base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.api_key = api_key if api_key is not None else os.environ.get(api_key_env)
        self.params = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, **(extra_body or {})}
        self.concurrency, self.timeout_s, self.max_retries = concurrency, timeout_s, max_retries
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.progress = progress
        self.stats: Counter = Counter()  # requests, ok, retry:<reason>, failed
        self._ssl: ssl.SSLContext | None = None

    def sampling(self) -> dict[str, Any]:
        return dict(self.params)

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None, on_result: OnResult | None = None) -> list[list[str]]:
        """`num_samples` completions per prompt (blocking; runs its own event loop)."""
        return run_sync(self.agenerate(prompts, num_samples, seed, on_result))

    async def agenerate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                        on_result: OnResult | None = None) -> list[list[str]]:
        jobs = []
        for i, messages in enumerate(prompts):
            for s in range(num_samples):
                payload = {"model": self.model_id, "messages": list(messages), "n": 1, **self.params}
                if seed is not None:
                    payload["seed"] = seed + s
                jobs.append(_Job(i, s, payload))
        results: list[list[str | None]] = [[None] * num_samples for _ in prompts]
        if jobs:
            await self._run(jobs, results, on_result)
        return results  # type: ignore[return-value]

    async def _run(self, pending: list[_Job], results: list[list[str | None]], on_result: OnResult | None) -> None:
        """Drain `pending` with `concurrency` workers; raise once all stopped if any call failed."""
        queue = iter(pending)  # shared: each free worker takes the next job (no await inside next())
        failures: list[tuple[_Job, BaseException]] = []
        fatal = asyncio.Event()
        bar = tqdm(total=len(pending), desc=f"{self.model_id}", unit="call", disable=not self.progress,
                   mininterval=1.0, leave=False)

        async def worker() -> None:
            # One client and connection per worker: httpx's pool scans every connection on each request,
            # which at 16+ connections costs more CPU than the request itself.
            async with self._client() as client:
                for job in queue:
                    if fatal.is_set():
                        return
                    try:
                        text = await self._call(client, job.payload, _text)
                    except BackendError as err:
                        failures.append((job, err))
                        if isinstance(err, _FatalRequest):
                            fatal.set()
                        continue
                    if on_result is not None:  # e.g. a durable cache write, off the event loop
                        await asyncio.to_thread(on_result, [(job.index, job.sample, text)])
                    results[job.index][job.sample] = text
                    bar.update()

        try:
            await asyncio.gather(*(worker() for _ in range(min(self.concurrency, len(pending)))))
        finally:
            bar.close()
        if failures:
            self.stats["failed"] += len(failures)
            done = sum(text is not None for row in results for text in row)
            raise BackendError(f"{len(failures)} of {len(pending)} calls to {self.url} failed, "
                               f"{len(pending) - done - len(failures)} not attempted (first: {failures[0][1]}); "
                               "finished calls are kept when a cache is used: rerun to resume")

    def _client(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.AsyncClient(headers=headers, limits=httpx.Limits(max_connections=1), timeout=self.timeout_s,
                                 verify=self._ssl_context())

    async def _call(self, client: httpx.AsyncClient, payload: dict[str, Any], extract: Callable[[Any], Any]) -> Any:
        """One chat completion, retried on transient failures; `extract(body)` is its result (None: the
        body is malformed, retried). Raises BackendError when it gives up."""
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
                    try:
                        value = extract(response.json())
                    except ValueError:
                        value = None
                    if value is not None:
                        self.stats["ok"] += 1
                        return value
                    reason = "malformed body"
                elif code in RETRY_STATUS or code >= 500:
                    reason, retry_after = f"HTTP {code}", response.headers.get("retry-after")
                else:
                    raise _FatalRequest(f"HTTP {code} from {self.url}: {response.text[:300]}")
            self.stats[f"retry:{reason}"] += 1
            if attempt < self.max_retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
        raise BackendError(f"gave up after {self.max_retries + 1} attempts (last: {reason})")

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

    # ------------------------------------------------------------------ tool calling

    def chat_turn(self, messages: list[dict], tools: list[dict], force: str | None = None) -> AssistantTurn:
        """One assistant turn with native `tools` (and `tool_choice` when `force` names one)."""
        wire = []
        for m in messages:  # the wire format wants arguments as JSON strings
            m = dict(m)
            if "tool_calls" in m:
                m["tool_calls"] = [
                    {**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"])}}
                    for c in m["tool_calls"]
                ]
            wire.append(m)
        payload = {"model": self.model_id, "messages": wire, **self.params,
                   "tools": [{"type": "function", "function": t} for t in tools]}
        if force:
            payload["tool_choice"] = {"type": "function", "function": {"name": force}}

        async def call() -> dict:
            async with self._client() as client:
                return await self._call(client, payload, _message)

        message = run_sync(call())
        calls = []
        for i, call_ in enumerate(message.get("tool_calls") or []):
            fn = call_.get("function", {})
            try:
                calls.append(
                    ToolCall(fn.get("name", ""), parse_arguments(fn.get("arguments")), call_.get("id", f"call_{i}"))
                )
            except (ValueError, TypeError) as err:
                calls.append(
                    ToolCall(fn.get("name", ""), {}, call_.get("id", f"call_{i}"), f"malformed arguments: {err}")
                )
        content = message.get("content") or ""
        if not calls and "<tool_call>" in content:  # some servers leave Hermes-style calls in the text
            calls = parse_tool_calls(content)
        return AssistantTurn(content, calls)
