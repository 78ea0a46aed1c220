"""Load and faults on loopback: concurrent clients, a server killed and restarted mid-load, SIGTERM."""

import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from conftest import running
from serve_fakes import FakeScorer, expected_score

from patarm.serve.client import JudgeClient

FAKE_SERVER = Path(__file__).with_name("serve_fakes.py")
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(port: int, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(FAKE_SERVER), "--port", str(port), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the fake server on port {port} did not start (exit code {proc.poll()})")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(30)


def _items(client_id: int, seq: int) -> list[dict]:
    """1 to 4 items whose responses are unique to (client, request, item)."""
    return [{"prompt": "p", "response": f"c{client_id}-r{seq}-i{k}", "id": f"c{client_id}-r{seq}-i{k}"}
            for k in range(1 + (client_id + seq) % 4)]


def _check(items: list[dict], results: list[dict]) -> None:
    assert [r["id"] for r in results] == [i["id"] for i in items]
    assert [r["mean"] for r in results] == [expected_score(i["response"]) for i in items]


def test_concurrent_clients_get_every_answer_matched_to_its_request():
    clients, seconds = 12, 3.0
    fake = FakeScorer(delay_s=0.005)
    with running(fake, max_batch=16, max_wait_ms=5) as url:
        def client_loop(client_id: int) -> int:
            sent, end = 0, time.monotonic() + seconds
            with httpx.Client(base_url=url, timeout=30) as http:
                for seq in itertools.count():
                    if time.monotonic() > end:
                        return sent
                    items = _items(client_id, seq)
                    r = http.post("/v1/judge", json={"items": items, "request_id": f"c{client_id}-r{seq}"})
                    assert r.status_code == 200 and r.json()["request_id"] == f"c{client_id}-r{seq}"
                    _check(items, r.json()["results"])
                    sent += len(items)

        with ThreadPoolExecutor(clients) as pool:
            answered = sum(pool.map(client_loop, range(clients)))
    assert answered == fake.items_run > clients  # nothing dropped, nothing judged twice
    assert max(fake.batches) > 1  # requests really shared batches


def test_a_server_killed_and_restarted_mid_load_answers_every_item_exactly_once():
    port, clients, requests_each = _free_port(), 8, 40
    url = f"http://127.0.0.1:{port}"
    answers: Counter = Counter()
    lock, retries = threading.Lock(), []
    proc = _start(port, "--delay-s", "0.01")
    try:
        def client_loop(client_id: int) -> None:
            with JudgeClient(url, timeout_s=10, max_retries=60, backoff_s=0.05, max_backoff_s=0.5) as client:
                for seq in range(requests_each):
                    items = _items(client_id, seq)
                    results = client.judge(items)
                    _check(items, results)
                    with lock:
                        answers.update(r["id"] for r in results)
                retries.append(client.retries)

        with ThreadPoolExecutor(clients) as pool:
            futures = [pool.submit(client_loop, c) for c in range(clients)]
            while sum(answers.values()) < 100:
                time.sleep(0.01)
            proc.kill()  # SIGKILL mid-load: in-flight answers are lost
            proc.wait(30)
            time.sleep(0.3)
            proc = _start(port, "--delay-s", "0.01")
            for f in futures:
                f.result()
    finally:
        _stop(proc)
    expected = {i["id"] for c in range(clients) for s in range(requests_each) for i in _items(c, s)}
    assert set(answers) == expected and set(answers.values()) == {1}
    assert sum(retries) > 0  # the kill really hit requests in flight


def test_sigterm_finishes_the_request_in_flight_then_exits(tmp_path):
    port, started = _free_port(), tmp_path / "batch-started"
    url = f"http://127.0.0.1:{port}"
    proc = _start(port, "--delay-s", "1.0", "--started-file", str(started))
    try:
        answer = []
        worker = threading.Thread(target=lambda: answer.append(
            httpx.post(url + "/v1/judge", json={"items": [{"prompt": "p", "response": "last"}]}, timeout=30)))
        worker.start()
        deadline = time.monotonic() + 10
        while not started.exists():  # the request's batch is being judged
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGTERM)
        worker.join(30)
        assert proc.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has drained
        assert answer[0].status_code == 200 and answer[0].json()["results"][0]["mean"] == expected_score("last")
        with pytest.raises(httpx.ConnectError):
            httpx.get(url + "/health")
    finally:
        _stop(proc)

