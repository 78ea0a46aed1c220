"""The server's HTTP behaviour with a fake scorer: answers, auth, limits, overload, timeouts, idempotency."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from conftest import running
from serve_fakes import FakeScorer, expected_score

CHATML = "<|im_start|>user\n{p}<|im_end|>\n<|im_start|>assistant\n"


def _wait_for(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_each_item_gets_its_own_score_mean_and_judgment_fields(client):
    items = [{"prompt": "Say hi.", "response": f"hello {i}", "id": f"item-{i}"} for i in range(5)]
    items.append({"prompt": [{"role": "user", "content": "x"}], "response": "unparseable", "n": 3})
    r = client.post("/v1/judge", json={"items": items, "request_id": "req-1"})
    assert r.status_code == 200 and r.headers["x-request-id"] == "req-1"
    body = r.json()
    assert body["request_id"] == "req-1" and body["model"] == "fake"
    for i, result in enumerate(body["results"][:5]):
        assert result["id"] == f"item-{i}"
        assert result["scores"] == [expected_score(f"hello {i}")] == [result["mean"]]
        assert set(result["judgments"][0]) >= {"score", "tags_ok", "errors", "rubric", "evaluation", "text"}
    assert body["results"][5] == {**body["results"][5], "scores": [None] * 3, "mean": None}


def test_health_and_prometheus_metrics(client):
    assert client.get("/health").json()["status"] == "ok"
    client.post("/v1/judge", json={"items": [{"prompt": "p", "response": "unparseable"}]})
    client.post("/v1/judge", json={"items": [{"prompt": "p"}]})  # no response: 422
    text = client.get("/metrics").text
    for line in ['patarm_serve_requests_total{route="/v1/judge",status="200"} 1.0',
                 'patarm_serve_requests_total{route="/v1/judge",status="422"} 1.0',
                 "patarm_serve_parse_failures_total 1.0", "patarm_serve_judgments_total 1.0",
                 "patarm_serve_batch_size_count 1.0", "patarm_serve_queue_depth 0.0",
                 'patarm_serve_request_seconds_count{route="/v1/judge"} 2.0']:
        assert line in text


def test_a_token_is_required_compared_and_never_logged(fake, capfd):
    token = "s3cret-token-value"
    with running(fake, server={"log_level": "info"}, token=token) as url:  # logs every access
        body = {"items": [{"prompt": "p", "response": "r"}]}
        assert httpx.post(url + "/v1/judge", json=body).status_code == 401
        wrong = httpx.post(url + "/v1/judge", json=body, headers={"Authorization": "Bearer s3cret-token-valuE"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        assert httpx.post(url + "/v1/judge", json=body, headers={"Authorization": f"Basic {token}"}).status_code == 401
        assert httpx.get(url + "/metrics").status_code == 401
        assert httpx.get(url + "/health").status_code == 200  # liveness stays open
        ok = httpx.post(url + "/v1/judge", json=body, headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
    assert fake.items_run == 1  # refused requests never reached the judge
    out, err = capfd.readouterr()
    assert '"POST /v1/judge HTTP/1.1" 401' in out + err and '"POST /v1/judge HTTP/1.1" 200' in out + err
    assert token not in out + err


def test_size_limits_give_413(fake):
    with running(fake, max_body_bytes=2000, max_items=3) as url:
        big = {"items": [{"prompt": "p", "response": "x" * 3000}]}
        assert httpx.post(url + "/v1/judge", json=big).status_code == 413

        def chunks():  # no Content-Length: the limit is enforced while reading
            for _ in range(10):
                yield b" " * 500
        r = httpx.post(url + "/v1/judge", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        many = {"items": [{"prompt": "p", "response": str(i)} for i in range(4)]}
        assert httpx.post(url + "/v1/judge", json=many).status_code == 413
        assert httpx.post(url + "/v1/judge", json={"items": many["items"][:3]}).status_code == 200


def test_a_full_queue_answers_429_with_retry_after():
    # 1 s a batch and three new items: the queue (3 waiting) stays over its 4 even if one batch ends between the
    # health check and the request (with 0.3 s and two items that race lost on a slow 2-core machine)
    fake = FakeScorer(delay_s=1.0)
    with running(fake, max_batch=1, max_queue=4) as url, ThreadPoolExecutor(1) as pool:
        held = pool.submit(httpx.post, url + "/v1/judge", timeout=30,
                           json={"items": [{"prompt": "p", "response": str(i)} for i in range(4)]})
        _wait_for(lambda: httpx.get(url + "/health").json()["queue_depth"] == 3)
        three = [{"prompt": "p", "response": x} for x in "abc"]
        r = httpx.post(url + "/v1/judge", json={"items": three})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert held.result().status_code == 200


def test_a_slow_answer_gives_408_and_a_retry_with_the_same_id_reuses_the_work():
    fake = FakeScorer(delay_s=0.6)
    with running(fake, timeout_s=0.2) as url:
        body = {"items": [{"prompt": "p", "response": "slow"}]}
        assert httpx.post(url + "/v1/judge", json=body).status_code == 408
        body["request_id"] = "retry-me"
        assert httpx.post(url + "/v1/judge", json=body).status_code == 408
        _wait_for(lambda: fake.items_run == 2)  # both computations finish in the background
        time.sleep(0.7)
        retried = httpx.post(url + "/v1/judge", json=body)
        assert retried.status_code == 200 and retried.json()["results"][0]["mean"] == expected_score("slow")
        assert fake.items_run == 2  # the retry was answered from the finished computation


def test_request_ids_are_idempotent_and_bound_to_their_body(fake, client):
    body = {"items": [{"prompt": "p", "response": "once"}], "request_id": "id-1"}
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: client.post("/v1/judge", json=body).json(), range(4)))
    assert all(a == answers[0] for a in answers) and fake.items_run == 1
    other = {"items": [{"prompt": "p", "response": "twice"}], "request_id": "id-1"}
    assert client.post("/v1/judge", json=other).status_code == 409
    assert client.post("/v1/judge", json=other, headers={"X-Request-Id": "id-2"}).status_code == 409  # body id wins
    assert client.post("/v1/judge", json={"items": other["items"]}, headers={"X-Request-Id": "id-2"}).status_code == 200
    assert client.post("/v1/judge", json={"items": other["items"]}, headers={"X-Request-Id": "a b"}).status_code == 400


def test_items_from_concurrent_requests_share_batches():
    fake = FakeScorer(delay_s=0.05)
    with running(fake, max_batch=8, max_wait_ms=50) as url, httpx.Client(base_url=url) as c:
        def one(i):
            r = c.post("/v1/judge", json={"items": [{"prompt": "p", "response": f"r{i}"}]}).json()
            return r["results"][0]["mean"] == expected_score(f"r{i}")
        with ThreadPoolExecutor(16) as pool:
            assert all(pool.map(one, range(32)))
    assert sum(fake.batches) == 32 and max(fake.batches) > 1 and max(fake.batches) <= 8


def test_chat_completions_follow_the_openai_shape(client):
    r = client.post("/v1/chat/completions", json={"model": "x", "messages": [{"role": "user", "content": "abc"}],
                                                   "n": 2, "max_tokens": 64, "extra_field": True})
    body = r.json()
    assert r.status_code == 200 and body["object"] == "chat.completion" and body["model"] == "fake"
    assert [c["message"]["content"] for c in body["choices"]] == ["echo 0: abc", "echo 1: abc"]
    assert {c["message"]["role"] for c in body["choices"]} == {"assistant"}
    assert client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "a"}],
                                                     "stream": True}).status_code == 400
    assert client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "a"}],
                                                     "max_tokens": 10 ** 6}).status_code == 400


def test_get_reward_follows_openrlhf_and_splits_prompt_from_response(client):
    prompts = [CHATML.format(p=f"question {i}") for i in range(3)]
    responses = ["blue", "unparseable", "<think>hmm</think>\n\ngreen"]
    queries = ["<|endoftext|>" + p + r + "<|im_end|>" for p, r in zip(prompts, responses)]
    with_prompts = client.post("/get_reward", json={"query": queries, "prompts": prompts, "labels": ["", "", ""]})
    without = client.post("/get_reward", json={"query": queries})
    assert with_prompts.json() == without.json()
    body = with_prompts.json()
    assert body["rewards"] == [expected_score("blue"), 1.0, expected_score("green")]
    assert body["scores"] == [(x - 1) / 9 for x in body["rewards"]]
    assert body["extra_logs"] == {"judge_valid": [1.0, 0.0, 1.0]}
    bad = client.post("/get_reward", json={"query": [queries[0], "plain text, no template"]})
    assert bad.status_code == 400 and "query 1" in bad.json()["detail"]
    assert client.post("/get_reward", json={"query": queries, "prompts": prompts[:2]}).status_code == 400


def test_bad_items_name_the_item_and_judge_failures_give_500(client):
    items = [{"prompt": "p", "response": "ok"}, {"prompt": "p", "response": "ok", "template": "nope"}]
    r = client.post("/v1/judge", json={"items": items})
    assert r.status_code == 400 and r.json()["detail"].startswith("items[1]: template 'nope'")
    assert client.post("/v1/judge", json={"items": [{"prompt": "p", "response": "r", "n": 99}]}).status_code == 422
    assert client.post("/v1/judge", json={"items": [{"prompt": [], "response": "r"}]}).status_code == 422
    failed = client.post("/v1/judge", json={"items": [{"prompt": "p", "response": "explode"}]})
    assert failed.status_code == 500 and "exploded" in failed.json()["detail"]
    assert client.post("/v1/judge", json={"items": [{"prompt": "p", "response": "fine"}]}).status_code == 200


def test_shutdown_finishes_the_request_in_flight():
    from patarm.serve.app import ServeConfig, create_app
    from patarm.serve.server import ServerThread

    fake = FakeScorer(delay_s=0.5)
    server = ServerThread(create_app(fake, ServeConfig()))
    url = server.__enter__()
    answers = []
    worker = threading.Thread(target=lambda: answers.append(
        httpx.post(url + "/v1/judge", json={"items": [{"prompt": "p", "response": "last"}]}, timeout=30)))
    worker.start()
    _wait_for(lambda: fake.batches)  # the item is being judged
    server.stop()  # what SIGTERM does: stop accepting, finish in-flight requests, drain the batcher
    worker.join(30)
    assert answers[0].status_code == 200 and answers[0].json()["results"][0]["mean"] == expected_score("last")
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health")
