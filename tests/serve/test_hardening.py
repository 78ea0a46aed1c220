"""Hardening of the request paths (issue 22): non-finite numbers, rollout-counted queue limits, work
cancelled when its client leaves, names that are never paths, bounded caches."""

import time

import httpx
import pytest
from conftest import running
from serve_fakes import FakeScorer


@pytest.mark.parametrize("path, body", [
    ("/v1/judge", '{"items": [{"prompt": "p", "response": "r", "n": NaN}]}'),
    ("/v1/judge", '{"items": [{"prompt": NaN, "response": "r"}]}'),
    ("/get_reward", '{"query": ["<|im_start|>user\\nq<|im_end|>\\n<|im_start|>assistant\\na"], "labels": [Infinity]}'),
    ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "hi"}], "temperature": -Infinity}'),
    ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e999}'),
    ("/v1/judge", '{"items": [{"prompt": "p", "response": "r", "n": 1e999}]}'),
])
def test_nan_and_infinity_are_422_not_500(client, path, body):
    r = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/json"


def test_a_string_that_says_nan_is_still_accepted(client):
    r = client.post("/v1/judge", json={"items": [{"prompt": "NaN or Infinity?", "response": "NaN"}]})
    assert r.status_code == 200


def test_the_queue_limit_counts_rollouts_not_items():
    with running(FakeScorer(), max_queue=4) as url:
        chat = httpx.post(url + "/v1/chat/completions", timeout=30,
                          json={"messages": [{"role": "user", "content": "hi"}], "n": 16})
        judge = httpx.post(url + "/v1/judge", timeout=30, json={"items": [{"prompt": "p", "response": "r", "n": 5}]})
        fits = httpx.post(url + "/v1/judge", timeout=30, json={"items": [{"prompt": "p", "response": "r", "n": 4}]})
    assert chat.status_code == 413 and "16 judge rollouts" in chat.json()["detail"]
    assert judge.status_code == 413 and "queue holds 4" in judge.json()["detail"]
    assert fits.status_code == 200


def test_a_client_that_disconnects_cancels_its_queued_work():
    fake = FakeScorer(delay_s=0.25)
    items = [{"prompt": "p", "response": f"r{i}"} for i in range(16)]
    with running(fake, max_batch=1, max_wait_ms=0) as url:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url + "/v1/judge", json={"items": items}, timeout=httpx.Timeout(10, read=0.4))
        time.sleep(1.5)  # 16 items × 0.25 s would still be running without cancellation
        ran = fake.items_run
        time.sleep(0.6)
        assert fake.items_run == ran  # nothing more runs
    assert ran <= 4


def test_domain_spellings_do_not_grow_the_rubric_cache():
    from patarm.rubrics import _load_rubrics, load_primary_rubrics

    for i in range(200):
        load_primary_rubrics(" " * (i % 7) + ("CHAT" if i % 2 else "chat") + " " * (i // 7))
    assert _load_rubrics.cache_info().currsize <= 64
    with pytest.raises(ValueError, match="no primary rubric"):
        load_primary_rubrics("../rubrics/chat")
