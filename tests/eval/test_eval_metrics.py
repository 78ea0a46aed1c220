"""Benchmark metrics on tiny hand-computed cases (the arithmetic is worked out in the comments)."""

from __future__ import annotations

import math

import pytest

from patarm.eval import judgebench, rewardbench, rewardbench2, rmbench
from patarm.eval.records import RecordError
from patarm.eval.registry import BENCHMARKS, get


def approx(x):
    return pytest.approx(x, abs=1e-9)


# ---- RM-Bench ----

def test_rmbench_single_record_strict_and_half():
    # chosen [5,5,5] vs rejected [4,6,5]: every row of M is [1, 0, tie].
    # strict: hard = (M01 + M02 + M12)/3 = (0+0+0)/3 = 0; normal = (1+0+0)/3; easy = (M10+M20+M21)/3 = (1+1+0)/3
    rec = {"id": 1, "domain": "chat", "score_chosen": [5, 5, 5], "score_rejected": [4, 6, 5]}
    m = rmbench.score([rec])
    assert m["chat"] == {"hard": approx(0), "normal": approx(100 / 3), "easy": approx(200 / 3),
                         "avg": approx(100 / 3)}
    assert m["overall"] == m["chat"]
    # half: M rows [1, 0, .5] -> hard (0 + .5 + .5)/3 = 1/3; normal (1 + 0 + .5)/3 = .5; easy (1+1+0)/3
    h = rmbench.score([rec], tie_policy="half")["chat"]
    assert (h["hard"], h["normal"], h["easy"]) == (approx(100 / 3), approx(50), approx(200 / 3))


def test_rmbench_triangles_orientation():
    # Only chosen[0] (concise) beats rejected[2] (markdown): cell (0, 2) is above the diagonal -> hard.
    rec = {"id": 1, "domain": "code", "score_chosen": [3, 0, 0], "score_rejected": [5, 5, 1]}
    m = rmbench.score([rec])["code"]
    assert m["hard"] == approx(100 / 3) and m["normal"] == 0 and m["easy"] == 0


def test_rmbench_safety_pools_and_overall_is_mean_over_domains():
    win = {"score_chosen": [9, 9, 9], "score_rejected": [1, 1, 1]}
    lose = {"score_chosen": [1, 1, 1], "score_rejected": [9, 9, 9]}
    recs = [dict(win, id=1, domain="safety-refuse"), dict(lose, id=2, domain="safety-response"),
            dict(win, id=3, domain="chat")]
    m = rmbench.score(recs)
    assert set(m) == {"chat", "safety", "overall"}
    assert m["safety"]["avg"] == approx(50)  # one all-win and one all-lose prompt pooled
    assert m["chat"]["avg"] == approx(100)
    assert m["overall"]["avg"] == approx(75)  # mean over the two domains, not over the three prompts


def test_rmbench_votes_and_missing_scores():
    votes = [[1, 0, -2], [3, 1, 0], [0, 0, 1]]  # >0 wins; 0 ties (strict: 0); <0 loses
    rec = {"id": 1, "domain": "math", "votes": votes}
    m = rmbench.score([rec])["math"]
    # hard cells (0,1)=0 (0,2)=0 (1,2)=0 -> 0; normal 1,1,1 -> 100; easy (1,0)=1 (2,0)=0 (2,1)=0 -> 1/3
    assert (m["hard"], m["normal"], m["easy"]) == (approx(0), approx(100), approx(100 / 3))
    none = {"id": 2, "domain": "chat", "score_chosen": [None, 2, 2], "score_rejected": [1, 1, 1]}
    assert rmbench.matrix(none)[0] == [0.0, 0.0, 0.0]  # a missing score is a tie, so wrong under strict


# ---- RewardBench v1 ----

def test_rewardbench_weighted_sections():
    recs = [
        {"id": 1, "subset": "alpacaeval-easy", "score_chosen": 2.0, "score_rejected": 1.0},
        {"id": 2, "subset": "alpacaeval-easy", "score_chosen": 1.0, "score_rejected": 1.0},  # tie: wrong
        {"id": 3, "subset": "alpacaeval-hard", "score_chosen": 3, "score_rejected": -1},
        {"id": 4, "subset": "math-prm", "score_chosen": 1, "score_rejected": 0},
        {"id": 5, "subset": "hep-python", "score_chosen": 0, "score_rejected": 1},
    ]
    m = rewardbench.score(recs)
    chat = (0.5 * 100 + 1.0 * 95) / (100 + 95) * 100  # 74.3590: weighted by EXAMPLE_COUNTS
    reasoning = (1.0 * 984 + 0.0 * 164) / (984 + 164) * 100  # 85.7143: math-prm counted as 984
    assert m["chat"] == approx(chat) and m["reasoning"] == approx(reasoning)
    assert "safety" not in m and "chat_hard" not in m
    assert m["score"] == approx((chat + reasoning) / 2)
    assert m["subsets"]["alpacaeval-easy"] == approx(50)
    assert rewardbench.score(recs, tie_policy="half")["subsets"]["alpacaeval-easy"] == approx(75)


def test_rewardbench_tables_match_official():
    t = rewardbench.tables()
    subsets = [s for group in t["sections"].values() for s in group]
    assert len(subsets) == 23 == len(set(subsets)) == len(t["example_counts"])
    assert t["example_counts"]["math-prm"] == 984
    assert sum(t["example_counts"][s] for s in t["sections"]["reasoning"]) == 984 + 6 * 164


def test_rewardbench_decisions_records():
    def one(decisions, policy=None):
        rec = {"id": 1, "subset": "donotanswer", "decisions": decisions}
        rewardbench.validate(rec)
        return rewardbench.item_result(rec, policy)

    assert one(["A"]) == 1.0  # chosen shown as A and preferred
    assert one(["B"]) == 0.0
    assert one(["tie"]) == 0.5 and one([None]) == 0.5  # official generative rule: tie/unparseable = 0.5
    assert one(["tie"], "strict") == 0.0
    assert one(["A", "B"]) == 1.0  # d_BA "B" flips to "A": both orders agree
    assert one(["A", "A"]) == 0.5  # position bias: the orders cancel
    assert one([["A", "A", "B"], ["B"]]) == 1.0  # voting@n slots: 2 - 1 + 1 = 2 > 0


# ---- RewardBench 2 ----

def test_rewardbench2_best_of_4():
    recs = [
        {"id": 1, "subset": "Math", "scores": [3, 3, 1, 0], "num_correct": 1},  # 2 tied at max -> 1/2
        {"id": 2, "subset": "Math", "scores": [1, 2, 0, 0], "num_correct": 1},  # correct not at max -> 0
        {"id": 3, "subset": "Math", "scores": [5, 1, 1, 1], "num_correct": 1},  # -> 1
        {"id": 4, "subset": "Focus", "scores": [None, 1, 1, 1], "num_correct": 1},  # missing never wins -> 0
    ]
    m = rewardbench2.score(recs)
    assert m["Math"] == approx(50) and m["Focus"] == approx(0)
    assert m["score"] == approx(25)  # unweighted mean of the headline subsets present


def test_rewardbench2_ties_formula():
    recs = [
        # prompt 1. ref: correct [9], incorrect [5, 4] -> accurate, margin 4.
        {"id": "ref:1", "subset": "Ties", "scores": [9, 5, 4], "num_correct": 1},
        # tied: correct [8, 7, 6] (spread 2), incorrect [2] -> accurate, margin 4.
        {"id": "tied:1", "subset": "Ties", "scores": [8, 7, 6, 2], "num_correct": 3},
    ]
    # 0.3*1 + 0.3*1 + 0.2*(4 > 2) + 0.2*(min(4, 4) > 2) + 0.01*tanh(4/2 - 1)
    one = 0.3 + 0.3 + 0.2 + 0.2 + 0.01 * math.tanh(1.0)
    assert rewardbench2.score(recs)["Ties"] == approx(100 * one)
    recs += [
        # prompt 2. ref: correct [3], incorrect [5] -> wrong, margin -2.
        {"id": "ref:2", "subset": "Ties", "scores": [3, 5], "num_correct": 1},
        # tied: correct [5, 5] (spread 0), incorrect [1] -> accurate, margin 4.
        {"id": "tied:2", "subset": "Ties", "scores": [5, 5, 1], "num_correct": 2},
    ]
    # ref acc 1/2, tied acc 1; preferred: (4>2, 4>0) -> 1; hard: (4>2, min(-2,4)=-2>0) -> 1/2;
    # margin terms: tanh(1) and tanh(-2/0 - 1) = tanh(-inf) = -1 -> mean (tanh(1) - 1)/2
    two = 0.3 * 1 + 0.3 * 0.5 + 0.2 * 1 + 0.2 * 0.5 + 0.01 * (math.tanh(1.0) - 1) / 2
    m = rewardbench2.score(recs)
    assert m["Ties"] == approx(100 * two)  # 74.8808
    assert m["score"] == m["Ties"]


def test_rewardbench2_ties_zero_over_zero_is_nan_then_zero():
    # tied spread 0 and min margin 0 -> 0/0 = nan -> margin term 0 (official nan_to_num)
    recs = [{"id": "ref:7", "subset": "ties", "scores": [2, 2], "num_correct": 1},
            {"id": "tied:7", "subset": "ties", "scores": [2, 2, 2], "num_correct": 2}]
    # ref: margin 0 -> wrong; tied: margin 0 -> wrong; preferred 0 > 0 false; hard false
    assert rewardbench2.score(recs)["ties"] == approx(0.0)


# ---- JudgeBench ----

def _jb(label, decisions, source="mmlu-pro-law"):
    return {"pair_id": "p", "source": source, "label": label, "decisions": decisions}


@pytest.mark.parametrize("label, decisions, correct", [
    ("A>B", ["A", "A"], False),   # second flips to B>A: +1 - 1 = 0 (position bias)
    ("A>B", ["A", "B"], True),    # +1 +1
    ("A>B", [None, "B"], True),     # 0 +1
    ("A>B", ["tie", "tie"], False),   # 0
    ("B>A", ["B", "A"], True),    # +1 +1
    ("B>A", ["B", "B"], False),   # +1 -1
    ("A>B", ["A"], True),           # single game
    ("A>B", [["A", "B", "A"], ["B", "A", "tie"]], True),  # voting@3: +1 -1 +1 +1 -1 +0 = 1
])
def test_judgebench_pair_rule(label, decisions, correct):
    rec = _jb(label, decisions)
    judgebench.validate(rec)
    assert judgebench.item_result(rec) is correct


def test_judgebench_categories():
    recs = [_jb("A>B", ["A", "B"], "mmlu-pro-math"), _jb("A>B", ["B", "A"], "livebench-math"),
            _jb("B>A", ["B", "A"], "livebench-reasoning"), _jb("A>B", ["A", "B"], "livecodebench")]
    m = judgebench.score(recs)
    # mmlu-pro-math is knowledge (prefix mmlu-pro), not math
    assert m == {"overall": 75.0, "knowledge": 100.0, "math": 0.0, "reasoning": 100.0, "coding": 100.0}


# ---- validation ----

@pytest.mark.parametrize("name, record, field", [
    ("rmbench", {"id": 1, "domain": "poetry", "score_chosen": [1, 2, 3], "score_rejected": [1, 2, 3]}, "domain"),
    ("rmbench", {"id": 1, "domain": "chat", "score_chosen": [1, 2], "score_rejected": [1, 2, 3]}, "score_chosen"),
    ("rmbench", {"id": 1, "domain": "chat", "score_chosen": [1, "x", 3], "score_rejected": [1, 2, 3]},
     "score_chosen"),
    ("rewardbench", {"id": 1, "subset": "x", "score_chosen": 1}, "score_rejected"),
    ("rewardbench", {"id": 1, "subset": "x", "decisions": ["A>>B"]}, "decisions"),
    ("rewardbench2", {"id": 1, "subset": "Math", "scores": [1, 2], "num_correct": 3}, "num_correct"),
    ("rewardbench2", {"id": "7", "subset": "Ties", "scores": [1, 2], "num_correct": 1}, "id"),
    ("judgebench", {"pair_id": 1, "source": "x", "label": "A=B", "decisions": ["A>B"]}, "label"),
    ("judgebench", {"pair_id": 1, "source": "x", "label": "A>B"}, "decisions"),
])
def test_validation_names_the_field(name, record, field):
    with pytest.raises(RecordError) as err:
        get(name).validate(record)
    assert err.value.field == field and field in str(err.value)


def test_registry_modules_share_an_interface():
    for name, module in BENCHMARKS.items():
        assert module.NAME == name
        for fn in ("load", "validate", "score", "item_result", "headline", "comparisons", "make_record"):
            assert callable(getattr(module, fn)), (name, fn)
        assert module.score([]) in ({}, {"subsets": {}})
