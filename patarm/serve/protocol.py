"""uvicorn's h11 protocol with the connection limits a server facing untrusted clients needs.

uvicorn bounds the size of a request head through h11 (`h11_max_incomplete_event_size`: past it h11
refuses the request), but it has no time limit on receiving a head: its keep-alive timer stops at the
first byte, so a client that never finishes its headers holds a connection forever (slowloris; uvicorn
issue #157's `--timeout-request-start` was never added), and with `--limit-concurrency` enough of them
turn every other request away with 503. This subclass adds:

- a head deadline: a connection must complete each request head within `head_timeout_s` of opening or of
  its previous response (else 408 and close; an idle keep-alive connection is closed silently); the body's
  own time limit is the app's (`Guard`);
- a connection cap without collateral damage: past `max_connections` the connection that has waited
  longest for a head is closed, not the new one (a busy connection is never closed; when every one is
  busy the new connection gets 503);
- JSON bodies for the errors the server itself answers (431, 400, 408, 503), like the app's.

The h11 parser, not httptools, because h11 is the one with a head-size limit.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 64 * 1024
MAX_CONNECTIONS = 1024
_REASONS = {400: b"Bad Request", 408: b"Request Timeout", 431: b"Request Header Fields Too Large",
            503: b"Service Unavailable"}


def raw_json_response(status: int, detail: str) -> bytes:
    """A complete `Connection: close` HTTP/1.1 response with a JSON body, written before h11 has a request."""
    body = json.dumps({"detail": detail}).encode()
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
            % (status, _REASONS[status], len(body))) + body


class GuardedH11Protocol(H11Protocol):
    """One connection. Settings are class attributes; `protocol_class(...)` makes a configured subclass."""

    head_timeout_s: float = HEAD_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_bytes = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._waiting_since = self.loop.time()
        self._arm_head_deadline()
        if len(self.connections) > self.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._waiting_for_head():
            self._head_bytes += len(data)
        super().data_received(data)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a head arrived: the app's limits take over until the response is sent
            self._head_bytes = 0
            self._cancel_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self._waiting_for_head():
            self._waiting_since = self.loop.time()
            self._arm_head_deadline()

    def send_400_response(self, msg: str) -> None:
        """h11 refused the request: too large a head (431), or not HTTP (400)."""
        limit = self.config.h11_max_incomplete_event_size or MAX_HEAD_BYTES
        if self._head_bytes > limit:
            self._close_with(431, f"the request head passed the limit of {limit} bytes")
        else:
            self._close_with(400, "not a valid HTTP/1.1 request")

    # ------------------------------------------------------------------ internals

    def _waiting_for_head(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm_head_deadline(self) -> None:
        self._cancel_head_deadline()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _cancel_head_deadline(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._waiting_for_head() and not self.transport.is_closing():
            self._close_with(408, f"no complete request head within {self.head_timeout_s:g} s")

    def _close_with(self, status: int, detail: str) -> None:
        """Answer `status` and close, where a request has begun arriving; an idle connection (no byte of a
        next request) is closed silently, as keep-alive timeouts are: a client that reuses it must not read
        an unsolicited 408 as the answer to its next request. Never writes into a response the app started."""
        if not self.transport.is_closing():
            if self._waiting_for_head() and (self._head_bytes or status != 408):
                self.transport.write(raw_json_response(status, detail))
            self.transport.close()

    def _make_room(self) -> None:
        """Close the connection that has waited longest for a request head; if none waits, this one (503)."""
        idle = [c for c in self.connections if isinstance(c, GuardedH11Protocol) and c._waiting_for_head()
                and not c.transport.is_closing()]
        victim = min(idle, key=lambda c: c._waiting_since, default=None)
        if victim is None:
            self._close_with(503, f"the server holds its limit of {self.max_connections} busy connections; "
                                  "retry shortly")
        else:
            victim._close_with(408, "closed to make room: no complete request head while the server was full")


def protocol_class(*, head_timeout_s: float = HEAD_TIMEOUT_S,
                   max_connections: int = MAX_CONNECTIONS) -> type[GuardedH11Protocol]:
    """A `GuardedH11Protocol` with these settings (uvicorn's `http=` takes a class, not an instance)."""
    if head_timeout_s <= 0 or max_connections < 1:
        raise ValueError("head_timeout_s must be > 0 and max_connections >= 1")
    return type("ConfiguredH11Protocol", (GuardedH11Protocol,),
                {"head_timeout_s": head_timeout_s, "max_connections": max_connections})
