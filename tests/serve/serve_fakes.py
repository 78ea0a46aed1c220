"""A fake scorer for the server's HTTP behaviour, and a script that serves it in a subprocess.

The fake score of a response is a pure function of its text (`expected_score`), so a client can check
that every answer belongs to its own request. `delay_s` makes each batch take that long.

    python tests/serve/serve_fakes.py --port N [--delay-s 0.05] [--max-batch 8] [--token-env VAR] [--started-file F]
        [--head-timeout-s 10] [--max-connections 1024] [--max-body-bytes N]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import threading
import time
from collections.abc import Sequence

from patarm.judge.judgment import Judgment
from patarm.serve.scorer import Sampling, ScoreItem, Scorer, ScoreResult, mean_score


def expected_score(response: str) -> float:
    """The fake judge's score of `response`: 1..10 from a hash of the text."""
    return float(1 + int(hashlib.sha256(response.encode()).hexdigest()[:6], 16) % 10)


class FakeScorer(Scorer):
    """Scores by `expected_score`; "unparseable" in a response gives no valid score; "explode" fails the batch."""

    name = "fake"

    def __init__(self, delay_s: float = 0.0, started_file: str | None = None):
        self.delay_s, self.started_file = delay_s, started_file  # the file is touched when a batch starts
        self.batches: list[int] = []  # items per run() call
        self.items_run = 0
        self.lock = threading.Lock()

    def prepare(self, item: ScoreItem) -> ScoreItem:
        if item.template not in (None, "pointwise"):
            raise ValueError(f"template {item.template!r} is not bundled")
        return item

    def run(self, prepared: Sequence[ScoreItem]) -> list[ScoreResult]:
        with self.lock:
            self.batches.append(len(prepared))
            self.items_run += len(prepared)
        if self.started_file:
            open(self.started_file, "a").close()
        if self.delay_s:
            time.sleep(self.delay_s)
        if any("explode" in p.response for p in prepared):
            raise RuntimeError("the fake judge exploded")
        out = []
        for p in prepared:
            valid = "unparseable" not in p.response
            score = expected_score(p.response) if valid else None
            text = f"<rubric>1. fake</rubric><eval>ok</eval><score>{score:g}</score>" if valid else "no tags"
            judgments = [Judgment(text=text, score=score, tags_ok=valid, evaluation="ok" if valid else None)
                         for _ in range(p.n)]
            scores = [j.score for j in judgments]
            out.append(ScoreResult(scores, mean_score(scores), judgments))
        return out

    def complete(self, messages_batch: Sequence[list[dict[str, str]]], sampling: Sampling) -> list[list[str]]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return [[f"echo {i}: {m[-1]['content'][:sampling.max_tokens]}" for i in range(sampling.n)]
                for m in messages_batch]


def main(argv: list[str]) -> None:
    from patarm.serve.app import ServeConfig, create_app
    from patarm.serve.server import bind, serve_forever

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--delay-s", type=float, default=0.0)
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--max-queue", type=int, default=1024)
    p.add_argument("--timeout-s", type=float, default=60.0)
    p.add_argument("--token-env", default=None)
    p.add_argument("--started-file", default=None)
    p.add_argument("--head-timeout-s", type=float, default=10.0)
    p.add_argument("--max-connections", type=int, default=1024)
    p.add_argument("--max-body-bytes", type=int, default=4 * 1024 * 1024)
    ns = p.parse_args(argv)
    config = ServeConfig(max_batch=ns.max_batch, max_queue=ns.max_queue, timeout_s=ns.timeout_s,
                         max_body_bytes=ns.max_body_bytes,
                         token=os.environ[ns.token_env] if ns.token_env else None, model_name="fake")
    app = create_app(FakeScorer(ns.delay_s, ns.started_file), config)
    serve_forever(app, bind("127.0.0.1", ns.port), log_level="info", graceful_timeout_s=ns.timeout_s,
                  head_timeout_s=ns.head_timeout_s, max_connections=ns.max_connections)


if __name__ == "__main__":
    main(sys.argv[1:])
