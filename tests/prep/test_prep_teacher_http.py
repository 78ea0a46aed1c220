"""The OpenAI-compatible backend behind the generation cache (as a prep teacher) against a real loopback HTTP server
with injected faults.

The server answers from a fault plan keyed by each request's body: 500s, 503s, 429s, hangs past the
client timeout, malformed and empty bodies. The client runs in a subprocess that is SIGKILLed
mid-run and restarted on the same cache; at the end every call is answered exactly once in the
cache and the output, and no call finished before the kill was requested again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from patarm.backends import BackendError, CachedBackend, GenerationCache, cache_key
from patarm.backends.openai import OpenAIBackend
from patarm.backends.stub_server import body_key, canned_completion, serve

REPO = Path(__file__).resolve().parents[2]
N_PROMPTS, N_SAMPLES, CONCURRENCY = 40, 2, 4


def fault_plan(key: str, attempt: int) -> str | None:
    """Faults on the first attempts of most calls, chosen by the key so runs are reproducible."""
    kind = int(key[:8], 16) % 8
    plan = {0: ["500"], 1: ["429"], 2: ["hang"], 3: ["malformed"], 4: ["no_choices"], 5: ["503", "500"]}
    faults = plan.get(kind, [])
    return faults[attempt] if attempt < len(faults) else None


def teacher(model: str, base_url: str, cache=None, **kwargs) -> CachedBackend:
    """What `make_backend({"kind": "openai", ...}, cache=...)` builds for a prep step."""
    return CachedBackend(OpenAIBackend(model, base_url, progress=False, **kwargs), cache, chunk_size=1 << 30,
                         progress=False)


CLIENT = textwrap.dedent("""
    import json, os, sys
    from patarm.backends import make_backend
    base_url, cache, out, n_prompts, n_samples, conc = sys.argv[1:7]
    prompts = [[{"role": "user", "content": f"question {i}"}] for i in range(int(n_prompts))]
    teacher = make_backend({"kind": "openai", "model": "stub-model", "base_url": base_url, "concurrency": int(conc),
                            "timeout_s": 0.4, "max_retries": 6, "backoff_s": 0.01, "max_backoff_s": 0.05,
                            "max_tokens": 2048}, cache=cache, progress=False)
    texts = teacher.generate(prompts, num_samples=int(n_samples), seed=7)
    with open(out + ".tmp", "w") as fh:
        json.dump({"texts": texts, "stats": {"cached": teacher.stats.cached, **teacher.backend.stats}}, fh)
    os.replace(out + ".tmp", out)
""")


def _client(server, tmp_path: Path) -> subprocess.Popen:
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, str(script), server.base_url, str(tmp_path / "cache.sqlite"),
                             str(tmp_path / "out.json"), str(N_PROMPTS), str(N_SAMPLES), str(CONCURRENCY)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _calls() -> dict[str, str]:
    """Every call: the client's cache key -> the server's key (the hash of the request body it sends)."""
    params = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 2048}
    calls = {}
    for i in range(N_PROMPTS):
        messages = [{"role": "user", "content": f"question {i}"}]
        for s in range(N_SAMPLES):
            body = {"model": "stub-model", "messages": messages, "n": 1, **params, "seed": 7 + s}
            calls[cache_key("stub-model", messages, {**params, "seed": 7}, s)] = body_key(body)
    return calls


def test_kill_and_restart_loses_nothing_and_repeats_nothing(tmp_path):
    with serve(fault=fault_plan, latency_s=0.02, hang_s=1.0) as server:
        proc = _client(server, tmp_path)
        deadline = time.monotonic() + 60
        while server.total_successes() < 25 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert not (tmp_path / "out.json").exists(), "the client finished before it could be killed"
        cache = GenerationCache(tmp_path / "cache.sqlite")
        cached_before = cache.keys()
        cache.close()
        finished_before = len(cached_before)
        assert 0 < finished_before < N_PROMPTS * N_SAMPLES
        attempts_before = dict(server.attempts)
        successes_before = dict(server.successes)

        proc = _client(server, tmp_path)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-2000:]

    result = json.loads((tmp_path / "out.json").read_text())
    calls = _calls()
    assert cached_before <= set(calls)
    # Every row is there exactly once, with the server's answer for that exact call.
    assert len(result["texts"]) == N_PROMPTS and all(len(t) == N_SAMPLES for t in result["texts"])
    for i, texts in enumerate(result["texts"]):
        for s, text in enumerate(texts):
            body = {"messages": [{"role": "user", "content": f"question {i}"}], "seed": 7 + s}
            assert text == canned_completion(body)
    assert set(server.successes) == set(calls.values())
    # No call finished (cached) before the kill was sent again after the restart.
    assert all(server.attempts[calls[k]] == attempts_before[calls[k]] for k in cached_before)
    # Only calls answered but not yet recorded when the client died (in flight) were repeated.
    repeated = [b for b in calls.values() if successes_before.get(b) and server.successes[b] > 1]
    assert len(repeated) <= CONCURRENCY and all(server.successes[b] <= 2 for b in calls.values())
    assert result["stats"]["cached"] >= finished_before
    assert {"500", "503", "429", "hang", "malformed", "no_choices"} <= set(server.faults)


def test_retries_each_fault_kind_in_process(tmp_path):
    # a timeout long enough that a call the plan does not hang finishes in time on a starved CPU (0.3 s failed
    # 11 of 24 calls beside two training runs at nice 19); only the planned hangs reach it
    with serve(fault=fault_plan, hang_s=3.0) as server:
        client = teacher("stub-model", server.base_url, tmp_path / "c.sqlite", concurrency=8, timeout_s=2.0,
                         max_retries=4, backoff_s=0.01)
        prompts = [[{"role": "user", "content": f"q{i}"}] for i in range(24)]
        first = client.generate(prompts, num_samples=1)
        assert all(server.successes[k] == 1 for k in server.successes) and len(server.successes) == 24
        assert any(k.startswith("retry:timeout") for k in client.backend.stats)
        assert any(k.startswith("retry:malformed") for k in client.backend.stats)
        calls = sum(server.attempts.values())
        again = teacher("stub-model", server.base_url, tmp_path / "c.sqlite")
        assert again.generate(prompts) == first and sum(server.attempts.values()) == calls  # all from cache


def test_gives_up_then_resumes_without_repeats(tmp_path):
    broken = {"on": True}

    def plan(key, attempt):
        return "503" if broken["on"] and int(key[:8], 16) % 3 == 0 else None

    prompts = [[{"role": "user", "content": f"q{i}"}] for i in range(12)]
    with serve(fault=plan) as server:
        client = teacher("m", server.base_url, tmp_path / "c.sqlite", concurrency=3, max_retries=2, backoff_s=0.01)
        with pytest.raises(BackendError, match="rerun to resume"):
            client.generate(prompts)
        done = dict(server.successes)
        broken["on"] = False
        texts = client.generate(prompts)
    assert len(texts) == 12 and all(server.successes[k] == 1 for k in server.successes)
    assert all(server.attempts[k] == 1 for k in done)  # finished calls were not sent again


def test_bad_request_stops_at_once(tmp_path):
    with serve() as server:
        client = teacher("m", server.base_url.replace("/v1", "/nope"), max_retries=5)
        with pytest.raises(BackendError, match="HTTP 404"):
            client.generate([[{"role": "user", "content": "x"}]] * 3)
        assert client.backend.stats["requests"] <= 3
