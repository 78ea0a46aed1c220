"""The deterministic readout A(τ): weights, veto, caps, pairwise decisions and best-of-N ties."""

import pytest

from patarm.judge.judgment import EvidenceItem as E
from patarm.judge.judgment import Judgment
from patarm.skills.readout import (
    check_rules,
    load_rules,
    readout_best_of_n,
    readout_pairwise,
    readout_pointwise,
    score_evidence,
)

RULES = load_rules({"scale": [1, 10], "weights": {"correctness": 3, "style": 1, "*": 1},
                    "veto": {"criteria": ["constraint:*"], "score": 1},
                    "caps": [{"criteria": ["correctness"], "max": 4}],
                    "criterion_scales": {"judge-*": [1, 10]}})


def test_weighted_mean_maps_to_scale():
    assert score_evidence([E("correctness", "", "pass"), E("style", "", "fail")], RULES).score == pytest.approx(
        1 + 9 * 3 / 4
    )
    assert score_evidence([E("style", "", "uncertain")], RULES).score == pytest.approx(5.5)
    assert score_evidence([E("judge-score", "", 10.0)], RULES).score == 10.0  # numeric on its own scale
    assert score_evidence([E("style", "", None)], RULES).score is None


def test_hard_constraint_veto_and_cap():
    vetoed = score_evidence([E("correctness", "", "pass"), E("constraint:no-comma", "", "fail")], RULES)
    assert vetoed.score == 1 and vetoed.fired == ["veto: constraint:no-comma"]
    capped = score_evidence([E("correctness", "", "fail"), E("style", "", "pass"), E("x", "", "pass"),
                             E("y", "", "pass"), E("z", "", "pass")], RULES)
    assert capped.score == 4 and capped.fired[0].startswith("cap 4")


def test_pairwise_and_best_of_n():
    good = Judgment("", evidence=[E("correctness", "", "pass")])
    bad = Judgment("", evidence=[E("correctness", "", "fail")])
    assert readout_pairwise(good, bad, RULES) == "A" and readout_pairwise(bad, good, RULES) == "B"
    assert readout_pairwise(good, good, RULES) == "tie"
    assert readout_pointwise(Judgment("", evidence=[E("style", "", "pass")]), RULES).score == 10
    index, scores = readout_best_of_n([bad, good, good], RULES)
    assert index == 1 and scores == [1.0, 10.0, 10.0]  # ties → lowest index
    assert readout_best_of_n([Judgment(""), Judgment("", score=3.0)], RULES)[0] == 1  # decision field fallback


def test_rule_validation():
    assert check_rules({"scale": [5, 1], "weights": {"a": -2}, "caps": [{"max": 3}], "bogus": 1}) == [
        ("bogus", "unknown aggregation field"), ("scale", "must be [low, high] with low < high"),
        ("weights.a", "must be a number >= 0"), ("caps", "must be a list of {criteria: [patterns], max: number}")]
    with pytest.raises(ValueError):
        load_rules({"scale": [1]})
