"""Run the app on uvicorn: in the foreground (`serve_forever`, the CLI) or on a thread (`ServerThread`, for
tests, benchmarks and in-process use).

Shutdown is uvicorn's graceful one (SIGINT/SIGTERM): stop accepting connections, let every in-flight
request finish (at most `graceful_timeout_s`), then the app's lifespan shutdown drains the batcher.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from typing import Any

import uvicorn

from patarm.serve.protocol import HEAD_TIMEOUT_S, MAX_CONNECTIONS, MAX_HEAD_BYTES, protocol_class

log = logging.getLogger("patarm.serve")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on (host, port); port 0 picks a free one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart on the same port at once
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class _NoQueryString(logging.Filter):
    """The access log shows paths without their query string: no route takes one, and a client that puts its
    token there (`?token=...`) must not see it written to the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and len(record.args) >= 3 and isinstance(record.args[2], str):
            record.args = (*record.args[:2], record.args[2].split("?", 1)[0], *record.args[3:])
        return True


def uvicorn_config(app: Any, *, log_level: str = "info", graceful_timeout_s: float = 30.0,
                   max_connections: int = MAX_CONNECTIONS, head_timeout_s: float = HEAD_TIMEOUT_S,
                   max_head_bytes: int = MAX_HEAD_BYTES, access_log: bool = True) -> uvicorn.Config:
    """uvicorn on the h11 parser with a head-size limit (h11's own), a head deadline and a connection cap
    (`patarm.serve.protocol`). The access log has method, path and status only: headers (the bearer
    token) and query strings are never logged."""
    config = uvicorn.Config(app, lifespan="on", log_level=log_level, access_log=access_log,
                            timeout_graceful_shutdown=int(graceful_timeout_s) + 1, timeout_keep_alive=30,
                            http=protocol_class(head_timeout_s=head_timeout_s, max_connections=max_connections),
                            h11_max_incomplete_event_size=max_head_bytes)
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _NoQueryString) for f in access.filters):
        access.addFilter(_NoQueryString())
    return config


def serve_forever(app: Any, sock: socket.socket, **config_kwargs: Any) -> None:
    """Serve on a bound socket until SIGINT/SIGTERM; logs the URL it listens on (useful with port 0)."""
    log.warning("patarm serve: listening on %s", url_of(sock))
    uvicorn.Server(uvicorn_config(app, **config_kwargs)).run(sockets=[sock])


class ServerThread:
    """`with ServerThread(app) as url:` serves on a free loopback port in a thread; leaving the block shuts
    the server down gracefully and joins the thread (nothing outlives it)."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, *, start_timeout_s: float = 30.0,
                 **config_kwargs: Any):
        config_kwargs.setdefault("log_level", "warning")
        self.server = uvicorn.Server(uvicorn_config(app, **config_kwargs))
        self.sock = bind(host, port)
        self.url = url_of(self.sock)
        self.start_timeout_s = start_timeout_s
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="patarm-serve-uvicorn", daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server on {self.url} did not start")
            time.sleep(0.01)
        return self.url

    def stop(self, timeout_s: float = 60.0) -> None:
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout_s)
        self.sock.close()
        if self.thread.is_alive():
            raise RuntimeError(f"the server on {self.url} did not stop within {timeout_s:g} s")

    def __exit__(self, *exc: Any) -> None:
        self.stop()
