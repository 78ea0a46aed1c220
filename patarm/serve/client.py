"""A synchronous client for `patarm serve`, shared by the TRL, verl and OpenRLHF adapters.

Every logical call gets one request id, reused by each of its retries, so the server answers it once
even when an attempt is lost (see `patarm.serve.idempotency`). Retries, with exponential back-off
(jittered; `Retry-After` respected), cover connection errors, timeouts, 408, 429, 503 and other 5xx
— e.g. a server restarted mid-run; any other 4xx is a bad request and raises at once.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Sequence
from typing import Any

import httpx

RETRY_STATUS = frozenset({408, 425, 429})  # plus every 5xx
DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV, TOKEN_ENV = "PATARM_SERVE_URL", "PATARM_SERVE_TOKEN"


class ServeError(RuntimeError):
    """A call the server refused (4xx) or that failed after every retry."""


class JudgeClient:
    """`JudgeClient(url)`: `judge(items)` → one result dict per item (scores, mean, judgments).

    `token` (else the `PATARM_SERVE_TOKEN` environment variable) is sent as a bearer token. One attempt
    may take `timeout_s`; `backoff_s * 2**attempt` (capped at `max_backoff_s`, jittered down to half)
    is the wait before the next. `max_items` splits large batches into several requests.
    """

    def __init__(self, url: str | None = None, *, token: str | None = None, timeout_s: float = 600.0,
                 max_retries: int = 10, backoff_s: float = 0.5, max_backoff_s: float = 30.0, max_items: int = 256):
        self.url = (url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout_s, self.max_retries = timeout_s, max_retries
        self.backoff_s, self.max_backoff_s, self.max_items = backoff_s, max_backoff_s, max_items
        self.retries = 0  # attempts that had to be repeated, for the caller's logs
        self._http: httpx.Client | None = None

    def __getstate__(self) -> dict:  # picklable (TRL and Ray copy reward functions): no open connections
        return {**self.__dict__, "_http": None}

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(headers=self._headers, timeout=self.timeout_s)
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def __enter__(self) -> JudgeClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def post(self, path: str, body: dict[str, Any], request_id: str | None = None) -> dict[str, Any]:
        """POST `body` with retries; every attempt carries the same request id."""
        request_id = request_id or uuid.uuid4().hex
        headers = {"X-Request-Id": request_id}
        last = "no attempt"
        for attempt in range(self.max_retries + 1):
            if attempt:
                self.retries += 1
            retry_after = None
            try:
                response = self.http.post(self.url + path, json=body, headers=headers)
            except httpx.TransportError as err:  # refused, reset, timed out: the server may be restarting
                last = f"{type(err).__name__}: {err}"
            else:
                if response.status_code == 200:
                    return response.json()
                last = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code not in RETRY_STATUS and response.status_code < 500:
                    raise ServeError(f"{self.url}{path} refused the request ({last})")
                retry_after = response.headers.get("retry-after")
            if attempt < self.max_retries:
                time.sleep(self._wait(attempt, retry_after))
        raise ServeError(f"{self.url}{path} failed {self.max_retries + 1} times (last: {last})")

    def _wait(self, attempt: int, retry_after: str | None) -> float:
        wait = min(self.max_backoff_s, self.backoff_s * 2 ** attempt) * random.uniform(0.5, 1.0)
        if retry_after and retry_after.isdigit():
            wait = max(wait, float(retry_after))
        return wait

    def judge(self, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """One result per item (in order), in requests of at most `max_items` items."""
        results: list[dict[str, Any]] = []
        for start in range(0, len(items), self.max_items):
            chunk = list(items[start:start + self.max_items])
            request_id = uuid.uuid4().hex
            answer = self.post("/v1/judge", {"items": chunk, "request_id": request_id}, request_id)
            if len(answer.get("results", ())) != len(chunk):
                raise ServeError(f"{self.url}/v1/judge answered {len(answer.get('results', ()))} results "
                                 f"for {len(chunk)} items")
            results.extend(answer["results"])
        return results

    def get_reward(self, queries: Sequence[str], prompts: Sequence[str] | None = None) -> dict[str, Any]:
        """OpenRLHF's contract: {"rewards", "scores", "extra_logs"} for rendered prompt+response queries."""
        merged: dict[str, Any] = {"rewards": [], "scores": [], "extra_logs": {}}
        for start in range(0, len(queries), self.max_items):
            body: dict[str, Any] = {"query": list(queries[start:start + self.max_items])}
            if prompts is not None:
                body["prompts"] = list(prompts[start:start + self.max_items])
            answer = self.post("/get_reward", body)
            merged["rewards"] += answer["rewards"]
            merged["scores"] += answer["scores"]
            for key, values in answer.get("extra_logs", {}).items():
                merged["extra_logs"].setdefault(key, []).extend(values)
        return merged

    def health(self) -> dict[str, Any]:
        response = self.http.get(self.url + "/health")
        response.raise_for_status()
        return response.json()
