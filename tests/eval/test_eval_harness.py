"""The judging harness with a scripted backend: voting rules, adaptive voting, pairwise, caching, outputs."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patarm.backends import CachedBackend, GenerationCache
from patarm.eval import registry
from patarm.eval.harness import judge_items, limit_items, run_benchmark
from patarm.eval.judging import JudgingPlan, win_counts
from patarm.eval.voting import should_stop

_RESPONSE = re.compile(r"<response>\n(.*?)\n</response>", re.S)
_PAIR = re.compile(r"<response_a>\n(.*?)\n</response_a>.*<response_b>\n(.*?)\n</response_b>", re.S)


class ScriptedJudge:
    """A backend whose judgments follow the response length: score = min(10, len), decision = longer.

    `bias="A"` always answers A (a pure position bias); `flaky=k` makes every k-th call unparseable.
    """

    model_id = "scripted"

    def __init__(self, bias: str | None = None, flaky: int = 0, temperature: float = 0.0):
        self.bias, self.flaky, self.calls, self.temperature = bias, flaky, 0, temperature

    def sampling(self):
        return {"temperature": self.temperature}

    def generate(self, prompts, num_samples=1, seed=None, metadata=None, on_result=None):
        out = []
        for messages in prompts:
            texts = []
            for _ in range(num_samples):
                self.calls += 1
                texts.append(self._one(messages[-1]["content"]))
            out.append(texts)
        return out

    def _one(self, content: str) -> str:
        if self.flaky and self.calls % self.flaky == 0:
            return "no tags at all"
        if m := _PAIR.search(content):
            a, b = len(m.group(1)), len(m.group(2))
            d = self.bias or ("A" if a > b else "B" if b > a else "tie")
            return f"<rubric>1. length</rubric>\n<eval>longer is better</eval>\n<decision>{d}</decision>"
        n = len(_RESPONSE.search(content).group(1))
        return f"<rubric>1. length</rubric>\n<eval>ok</eval>\n<score>{min(10, n)}</score>"


def rm_items():
    # chosen variants have lengths 3, 5, 7; rejected 4, 4, 4.
    return [{"id": 1, "domain": "chat", "prompt": [{"role": "user", "content": "q"}], "judge_domain": "chat",
             "candidates": ["aaa", "aaaaa", "aaaaaaa", "bbbb", "bbbb", "bbbb"]}]


def jb_items():
    base = {"source": "livebench-math", "prompt": [{"role": "user", "content": "q"}], "judge_domain": "math",
            "response_model": "m"}
    return [dict(base, id="p1", pair_id="p1", label="A>B", candidates=["long answer one", "short"]),
            dict(base, id="p2", pair_id="p2", label="B>A", candidates=["brief", "long answer two"]),
            dict(base, id="p3", pair_id="p3", label="A>B", candidates=["tiny", "long answer three"])]


def drawer(backend, temperature=0.0, cache=None):
    backend.temperature = temperature
    return CachedBackend(backend, cache, chunk_size=4, progress=False)


def test_pointwise_mean_records_and_metrics():
    judged = judge_items("rmbench", rm_items(), drawer(ScriptedJudge()), JudgingPlan())
    record = judged[0].record
    assert record["score_chosen"] == [3, 5, 7] and record["score_rejected"] == [4, 4, 4]
    m = registry.get("rmbench").score([record])["chat"]
    # M = [[0,0,0],[1,1,1],[1,1,1]]: hard (0,1)(0,2)(1,2) = 1/3; normal 2/3; easy (1,0)(2,0)(2,1) = 1
    assert (round(m["hard"], 6), round(m["normal"], 6), m["easy"]) == (33.333333, 66.666667, 100.0)


def test_pairwise_both_orders_and_position_consistency():
    d = drawer(ScriptedJudge())
    judged = judge_items("judgebench", jb_items(), d, JudgingPlan(mode="pairwise"))
    assert [j.record["decisions"] for j in judged] == [["A", "B"], ["B", "A"], ["B", "A"]]
    assert all(all(j.consistent) for j in judged)
    assert [registry.get("judgebench").item_result(j.record) for j in judged] == [True, True, False]
    biased = judge_items("judgebench", jb_items(), drawer(ScriptedJudge(bias="A")), JudgingPlan(mode="pairwise"))
    assert not any(c for j in biased for c in j.consistent)  # always "A": never consistent
    assert not any(registry.get("judgebench").item_result(j.record) for j in biased)  # the votes cancel


def test_majority_and_mean_voting_at_n():
    backend = ScriptedJudge(flaky=3)  # every 3rd judgment unparseable
    opts = JudgingPlan(num_samples=3, voting="majority")
    judged = judge_items("judgebench", jb_items(), drawer(backend, temperature=1.0), opts)
    assert backend.calls == 3 * 2 * 3  # n samples x 2 candidates x 3 items
    for j in judged:
        assert isinstance(j.record["decisions"][0], list) and len(j.record["decisions"][0]) == 3
    mean = judge_items("judgebench", jb_items(), drawer(ScriptedJudge(flaky=3), 1.0), JudgingPlan(num_samples=3))
    assert mean[0].record["score_A"] == 10 and mean[0].record["score_B"] == 5  # mean of the valid samples


def test_greedy_samples_are_generated_once():
    backend = ScriptedJudge()
    judge_items("judgebench", jb_items(), drawer(backend, temperature=0.0), JudgingPlan(num_samples=4))
    assert backend.calls == 6  # one per response: identical greedy samples are generated once and reused


def test_adaptive_exact_matches_majority_with_fewer_calls():
    opts = JudgingPlan(mode="pairwise", num_samples=8, voting="adaptive")
    d = drawer(ScriptedJudge(), temperature=1.0)
    adaptive = judge_items("judgebench", jb_items(), d, opts)
    fixed = judge_items("judgebench", jb_items(), drawer(ScriptedJudge(), 1.0),
                        JudgingPlan(mode="pairwise", num_samples=8, voting="majority"))
    bench = registry.get("judgebench")
    assert [bench.item_result(a.record) for a in adaptive] == [bench.item_result(f.record) for f in fixed]
    # a unanimous judge: after 4 draws the lead (8) could still be tied by the 8 votes left; after 5 (10 > 6) not
    assert [a.draws for a in adaptive] == [{"0,1": 5}] * 3
    assert d.stats.used == 3 * 5 * 2
    lenient = drawer(ScriptedJudge(), temperature=1.0)
    judge_items("judgebench", jb_items(), lenient, JudgingPlan(mode="pairwise", num_samples=8, voting="adaptive",
                                                                 confidence=0.95))
    assert lenient.stats.used < d.stats.used


def test_adaptive_pointwise_rmbench_uses_fewer_calls():
    d = drawer(ScriptedJudge(), temperature=1.0)
    judged = judge_items("rmbench", rm_items(), d, JudgingPlan(num_samples=6, voting="adaptive"))
    assert judged[0].record["votes"][2][0] > 0 and judged[0].record["votes"][0][0] < 0
    assert d.stats.used == 6 * 4  # unanimous: each comparison closes after 4 of 6 draws
    assert set(judged[0].draws.values()) == {4}


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 6), st.integers(0, 6), st.integers(1, 6), st.integers(1, 2))
def test_exact_stop_rule_never_changes_the_outcome(a, b, n_left, per_draw):
    drawn = max(1, (a + b + per_draw - 1) // per_draw)
    n = drawn + n_left
    if should_stop(a, b, drawn, n, 1.0, per_draw):
        sign = (a > b) - (a < b)
        for future in itertools.product((-1, 0, 1), repeat=n_left * per_draw):
            total = a - b + sum(future)
            assert (total > 0) - (total < 0) == sign


def test_pairwise_needs_comparisons():
    items = [{"id": 1, "subset": "Math", "prompt": "q", "candidates": ["a", "b"], "num_correct": 1}]
    with pytest.raises(ValueError, match="pointwise"):
        judge_items("rewardbench2", items, drawer(ScriptedJudge()), JudgingPlan(mode="pairwise"))
    # samples: (3, 3) a tie at the top counts for both; (5, 1) for the first; (None, None) for nobody
    assert win_counts([[3, 5, None], [3, 1, None]]) == [2.0, 1.0]


def test_cache_resumes_without_regenerating(tmp_path):
    path = tmp_path / "cache.sqlite"
    first = ScriptedJudge()
    judge_items("judgebench", jb_items(), drawer(first, cache=GenerationCache(path)), JudgingPlan(mode="pairwise"))
    assert first.calls == 6
    again = ScriptedJudge()
    out = judge_items(
        "judgebench", jb_items(), drawer(again, cache=GenerationCache(path)), JudgingPlan(mode="pairwise")
    )
    assert again.calls == 0 and out[0].record["decisions"] == ["A", "B"]
    assert len(GenerationCache(path)) == 6


def test_run_benchmark_writes_rescorable_samples(tmp_path):
    from patarm.eval.runner import rescore

    result = run_benchmark("judgebench", jb_items(), drawer(ScriptedJudge()), JudgingPlan(mode="pairwise"), tmp_path)
    samples = tmp_path / "judgebench" / "samples.jsonl"
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(rows) == 3 and rows[0]["judge_outputs"]["0,1"]["ab"][0]["decision"] == "A"
    assert rescore("judgebench", samples) == result["metrics"]
    assert result["run"]["position_consistency"] == 100.0 and result["run"]["judge_calls"] == 6
    assert json.loads((tmp_path / "judgebench" / "metrics.json").read_text())["headline"] == result["headline"]


def test_limit_keeps_every_stratum():
    items = [{"id": i, "domain": d} for d in ("chat", "code", "safety") for i in range(5)]
    assert [it["domain"] for it in limit_items(items, 4)] == ["chat", "code", "safety", "chat"]
    assert limit_items(items, None) == items
