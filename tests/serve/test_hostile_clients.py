"""Hostile clients on real sockets against a real server process (loopback): slowloris, huge heads, bad
requests, a token in the query string. Every loop is bounded; every socket is closed."""

import json
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from test_load import FAKE_SERVER, _free_port, _start, _stop

HALF_HEAD = b"POST /v1/judge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"  # never finished


def _health_ms(port: int, probes: int = 7) -> list[float]:
    """Milliseconds of `probes` GET /health, sorted, each on a fresh raw connection (paying its connect; a raw
    socket, so the figure is the server's, not an HTTP client library's set-up)."""
    times = []
    for _ in range(probes):
        start = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = _closed_by_server(s, 10)
        times.append(1000 * (time.perf_counter() - start))
        assert answer and answer.startswith(b"HTTP/1.1 200"), answer
    return sorted(times)


def _answers_fast(times: list[float]) -> bool:
    """All but the slowest probe under 100 ms, and that one under 1 s: on this shared 2-core machine one
    probe in a few is descheduled for a while by other tenants, whatever the server does. This catches a
    stalled event loop (seconds, before issue 22); the latency figure is bench/serve_hostile.py's."""
    return times[-2] < 100 and times[-1] < 1000


def _half_open(port: int, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(HALF_HEAD)
        socks.append(s)
    return socks


def _closed_by_server(s: socket.socket, wait_s: float) -> bytes | None:
    """What the server wrote before closing, or None if it is still open after `wait_s`."""
    s.settimeout(wait_s)
    data = b""
    try:
        while len(data) < 65536:
            chunk = s.recv(4096)
            if not chunk:
                return data
            data += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        return data
    return data


@pytest.fixture
def server(request):
    args = getattr(request, "param", ())
    port = _free_port()
    proc = _start(port, "--max-queue", "4", *args)
    yield port, f"http://127.0.0.1:{port}"
    _stop(proc)


@pytest.mark.parametrize("server", [("--head-timeout-s", "2", "--max-connections", "64")], indirect=True)
def test_200_idle_half_sent_sockets_leave_health_fast_and_are_closed_after_the_head_deadline(server):
    port, url = server
    socks = _half_open(port, 200)
    try:
        times = _health_ms(port)  # the longest-idle are evicted to make room; nothing refuses /health
        assert _answers_fast(times), times
        authorised = httpx.post(url + "/v1/judge", json={"items": [{"prompt": "p", "response": "r"}]}, timeout=10)
        assert authorised.status_code == 200
        deadline = time.monotonic() + 4  # head deadline 2 s (+ margin): every idle socket is closed by now
        answers = [_closed_by_server(s, max(1.0, deadline - time.monotonic())) for s in socks]
        assert all(a is not None for a in answers), f"{sum(a is None for a in answers)} sockets still open"
        said = [a for a in answers if a]
        assert said and all(a.startswith(b"HTTP/1.1 408") for a in said)
        assert json.loads(said[0].split(b"\r\n\r\n", 1)[1])["detail"]
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("server", [("--head-timeout-s", "1",)], indirect=True)
def test_an_idle_keep_alive_connection_is_closed_silently_at_the_head_deadline(server):
    """No unsolicited 408 on a connection a client may reuse: it would read it as its next answer."""
    port, _ = server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = b""
        while b"\r\n\r\n" not in first or not first.endswith(b"}"):  # the whole JSON answer (bounded by recv)
            chunk = s.recv(65536)
            assert chunk, first
            first += chunk
        assert first.startswith(b"HTTP/1.1 200")
        assert _closed_by_server(s, 5) == b""  # closed after ~1 s, with nothing written


def test_a_64_mb_header_is_refused_at_the_head_limit_while_health_stays_fast(server):
    port, url = server
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    sent, refused = [0], threading.Event()

    def send_big_header() -> None:
        chunk = b"a" * (1 << 20)
        try:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ")
            for _ in range(64):  # 64 MB at most
                s.sendall(chunk)
                sent[0] += len(chunk)
            s.sendall(b"\r\n\r\n")
        except OSError:  # the server closed the connection: the rest is refused
            refused.set()

    thread = threading.Thread(target=send_big_header)
    thread.start()
    try:
        times = _health_ms(port)
        assert _answers_fast(times), times
        thread.join(30)
        answer = _closed_by_server(s, 10)
    finally:
        s.close()
        thread.join(30)
    assert answer is not None and answer.startswith(b"HTTP/1.1 431"), answer[:200] if answer else answer
    assert "65536 bytes" in json.loads(answer.split(b"\r\n\r\n", 1)[1])["detail"]
    assert refused.is_set() or sent[0] < 64 << 20


def test_a_request_that_is_not_http_gets_a_json_400(server):
    port, _ = server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"\x00\x01 NOT HTTP AT ALL\r\n\r\n")
        answer = _closed_by_server(s, 10)
    assert answer is not None and answer.startswith(b"HTTP/1.1 400")
    assert b"application/json" in answer and json.loads(answer.split(b"\r\n\r\n", 1)[1])["detail"]


def test_a_token_sent_in_the_query_string_is_not_written_to_the_access_log():
    port = _free_port()

    proc = subprocess.Popen([sys.executable, str(FAKE_SERVER), "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # uvicorn's access log goes to stdout
    try:
        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health?token=SeCrEt-123", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        else:
            pytest.fail("the fake server did not start")
    finally:
        proc.terminate()
        log = proc.communicate(timeout=30)[0]
    assert "GET /health HTTP/1.1" in log and "SeCrEt-123" not in log
