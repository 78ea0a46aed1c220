"""The ASGI middleware in front of every route: metrics, bearer-token auth, body size and read-time limits.

It runs before FastAPI parses anything: an unauthenticated request is refused (401) before its body is
read; a body over the limit is refused from its Content-Length, or as soon as the bytes read pass the
limit (413); a body that takes longer than the time limit to arrive is refused (408); a body with
NaN or Infinity (not JSON, though Python parses them) is refused (422). The token is compared in
constant time and never logged.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from patarm.serve.metrics import ServeMetrics

ASGIApp = Callable[[dict, Callable, Callable], Awaitable[None]]
ROUTES = ("/v1/judge", "/get_reward", "/v1/chat/completions", "/health", "/metrics")
OPEN_PATHS = ("/health",)  # liveness probes need no token and reveal nothing
BODY_METHODS = ("POST", "PUT", "PATCH")


class _Reject(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None):
        self.status, self.detail, self.headers = status, detail, headers or {}


async def send_json(send: Callable, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    data = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


def route_label(path: str) -> str:
    """The metrics label of a path: a known route, else "other" (bounded label cardinality)."""
    return path if path in ROUTES else "other"


class Guard:
    """Wraps the app: `token` (None: no auth), `max_body_bytes`, `body_timeout_s`."""

    def __init__(self, app: ASGIApp, *, metrics: ServeMetrics, token: str | None, max_body_bytes: int,
                 body_timeout_s: float):
        self.app, self.metrics = app, metrics
        self._token = token.encode() if token else None
        self.max_body_bytes, self.body_timeout_s = max_body_bytes, body_timeout_s

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), [500]

        async def send_recording(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            self._check_auth(scope)
            if scope["method"] in BODY_METHODS:
                receive = await self._buffered(scope, receive)
            await self.app(scope, receive, send_recording)
        except _Reject as reject:
            status[0] = reject.status
            await send_json(send, reject.status, {"detail": reject.detail}, reject.headers)
        finally:
            self.metrics.observe_request(route_label(scope["path"]), status[0], time.perf_counter() - start)

    def _check_auth(self, scope: dict) -> None:
        if self._token is None or scope["path"] in OPEN_PATHS:
            return
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, given = header.partition(b" ")
        # compare_digest: the time taken does not depend on how much of the token matched
        if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self._token):
            raise _Reject(401, "missing or wrong bearer token (send `Authorization: Bearer <token>`)",
                          {"WWW-Authenticate": "Bearer"})

    async def _buffered(self, scope: dict, receive: Callable) -> Callable:
        """Read the whole body within the limits; return a `receive` that replays it."""
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            raise _Reject(413, f"the body has {int(length)} bytes; the limit is {self.max_body_bytes} "
                               "(split the batch into smaller requests)")
        chunks: list[bytes] = []

        async def read() -> None:
            size = 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _Reject(400, "the client went away while sending the body")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body_bytes:
                    raise _Reject(413, f"the body passed the limit of {self.max_body_bytes} bytes "
                                       "(split the batch into smaller requests)")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return

        try:
            await asyncio.wait_for(read(), self.body_timeout_s)
        except asyncio.TimeoutError:
            raise _Reject(408, f"the body did not arrive within {self.body_timeout_s:g} s") from None
        body, sent = b"".join(chunks), [False]
        _refuse_non_finite(body)

        async def replay() -> dict:
            if not sent[0]:
                sent[0] = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay


def _reject_constant(name: str) -> Any:
    raise _Reject(422, f"the body has {name}, which JSON does not allow: send a finite number or null")


def _refuse_non_finite(body: bytes) -> None:
    """Python's JSON parser (FastAPI's) accepts NaN and ±Infinity; refuse them (422) before any route sees
    them. Only bodies that contain those words are parsed here, so ordinary requests pay a substring scan."""
    if b"NaN" in body or b"Infinity" in body:
        try:
            json.loads(body, parse_constant=_reject_constant)
        except ValueError:  # not JSON at all: the route answers 422 for that
            pass
