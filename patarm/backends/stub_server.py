"""A small OpenAI-compatible chat-completions server on loopback, for tests, benchmarks and dry runs.

It answers `POST /v1/chat/completions` with a canned (or caller-computed) completion after a fixed
latency, can inject faults per request (500, 429, a hang past the client's timeout, malformed or
truncated bodies), and counts attempts and successful answers per request body, so a test can prove
that a client repeated no finished call. Run it standalone with
`python -m patarm.backends.stub_server --port 8000 --latency 0.2`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# fault(key, attempt) -> one of: None (answer), "500", "503", "429", "hang", "malformed", "no_choices"
FaultPlan = Callable[[str, int], "str | None"]
Responder = Callable[[dict[str, Any]], str]


def body_key(body: dict[str, Any]) -> str:
    """sha256 of a request body's canonical JSON: the server's own name for a call."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def canned_completion(body: dict[str, Any]) -> str:
    """A deterministic pointwise judgment derived from the request, so answers can be checked."""
    digest = body_key({"messages": body.get("messages"), "seed": body.get("seed")})
    return (f"<rubric>\n1. The response answers the request.\n</rubric>\n<eval>\nstub judgment {digest[:12]}\n"
            f"</eval>\n<score>{1 + int(digest[:4], 16) % 10}</score>")


class StubServer(ThreadingHTTPServer):
    daemon_threads = True  # a handler still sleeping on an injected hang never blocks shutdown
    request_queue_size = 128  # many clients connect at once; the default backlog of 5 drops some

    def __init__(self, port: int = 0, latency_s: float = 0.0, fault: FaultPlan | None = None,
                 responder: Responder = canned_completion, hang_s: float = 2.0):
        super().__init__(("127.0.0.1", port), _Handler)
        self.latency_s, self.fault, self.responder, self.hang_s = latency_s, fault, responder, hang_s
        self.lock = threading.Lock()
        self.attempts: Counter = Counter()  # key -> requests received
        self.successes: Counter = Counter()  # key -> valid completions sent
        self.faults: Counter = Counter()  # fault name -> times injected

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def total_successes(self) -> int:
        with self.lock:
            return sum(self.successes.values())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real inference servers do
    # One buffered write per response and no Nagle: otherwise headers and body leave in two packets and
    # delayed ACKs add ~40 ms to every call, which would be the stub's latency, not the client's.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True
    server: StubServer

    def log_message(self, *args: Any) -> None:  # quiet: tests read counters, not logs
        pass

    def _send(self, code: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, b'{"error": "not found"}')
            return
        srv, key = self.server, body_key(body)
        with srv.lock:
            attempt = srv.attempts[key]
            srv.attempts[key] += 1
        fault = srv.fault(key, attempt) if srv.fault else None
        if fault:
            with srv.lock:
                srv.faults[fault] += 1
        time.sleep(srv.hang_s if fault == "hang" else srv.latency_s)
        try:
            self._answer(body, key, fault)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout) or was killed
            pass

    def _answer(self, body: dict[str, Any], key: str, fault: str | None) -> None:
        if fault in ("500", "503"):
            self._send(int(fault), b'{"error": "injected server error"}')
        elif fault == "429":
            self._send(429, b'{"error": "rate limited"}', {"Retry-After": "0"})
        elif fault == "malformed":
            self._send(200, b'{"choices": [{"message": {"content": "trunc')
        elif fault == "no_choices":
            self._send(200, b'{"object": "chat.completion", "choices": []}')
        elif fault == "hang":
            self._send(504, b'{"error": "the client should have timed out"}')
        else:
            text = self.server.responder(body)
            payload = json.dumps({"id": key[:16], "object": "chat.completion", "model": body.get("model"),
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": text}}]})
            self._send(200, payload.encode())
            with self.server.lock:  # counted once the full answer has been handed to the socket
                self.server.successes[key] += 1


@contextmanager
def serve(**kwargs: Any) -> Iterator[StubServer]:
    """Run a StubServer in a background thread for the duration of the block."""
    server = StubServer(**kwargs)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--max-seconds", type=float, default=None, help="stop after this long (default: never)")
    args = parser.parse_args(argv)
    server = StubServer(args.port, args.latency)
    print(server.base_url, flush=True)
    if args.max_seconds is not None:
        threading.Timer(args.max_seconds, server.shutdown).start()
    server.serve_forever(poll_interval=0.05)
    server.server_close()


if __name__ == "__main__":
    main()
