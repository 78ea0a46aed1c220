"""PAR, margins and the format penalty against hand-computed numbers (paper §3.1, §5.3)."""

import pytest

from patarm.rewards import (
    IncompletePairError,
    PairRewards,
    constant_margin,
    format_penalty,
    get_margin_fn,
    graded_margin,
    label_rewards,
    par_rewards,
)


@pytest.mark.parametrize("delta, expected", [(-1, 0), (0, 0), (0.01, 1.2), (2, 1.2), (2.01, 1.4), (9, 1.4)])
def test_graded_margin(delta, expected):
    assert graded_margin(delta) == expected


def test_constant_and_configured_margins():
    assert constant_margin(0.1) == 1.3 and constant_margin(0) == 0
    f = get_margin_fn({"name": "graded", "low": 1.0, "high": 2.0, "threshold": 1.0})
    assert (f(0.5), f(1.5)) == (1.0, 2.0)
    assert get_margin_fn("patarm.rewards.constant_margin")(3) == 1.3
    assert get_margin_fn("patarm.rewards:graded_margin")(3) == 1.4
    with pytest.raises(ValueError, match="margin function"):
        get_margin_fn("no.such.module.fn")


def test_par_hand_computed():
    # s̄^c = (8 + 5 + 9) / 3 = 22/3 ≈ 7.333, s̄^r = (4 + 6 + 2) / 3 = 4
    chosen, rejected = par_rewards([8, 5, 9], [4, 6, 2])
    # chosen: 8-4=4 → 1.4; 5-4=1 → 1.2; 9-4=5 → 1.4
    assert chosen == [1.4, 1.2, 1.4]
    # rejected: 7.33-4=3.33 → 1.4; 7.33-6=1.33 → 1.2; 7.33-2=5.33 → 1.4
    assert rejected == [1.4, 1.2, 1.4]


def test_par_unsatisfied_and_constant():
    # s̄^c = 5, s̄^r = 6: chosen 7 > 6 (δ=1 → 1.3), 3 < 6 → 0; rejected 8 > 5 → 0, 4 < 5 (δ=1 → 1.3)
    assert par_rewards([7, 3], [8, 4], margin="constant") == ([1.3, 0.0], [0.0, 1.3])


def test_par_ties_earn_nothing():
    assert par_rewards([5, 5], [5, 5]) == ([0.0, 0.0], [0.0, 0.0])


def test_par_invalid_scores():
    # mean over valid scores only: s̄^c = 8, s̄^r = 3; a None rollout earns 0
    assert par_rewards([8, None], [3, None]) == ([1.4, 0.0], [1.4, 0.0])
    # no valid score on one side: no preference signal for the whole pair
    assert par_rewards([8, 9], [None, None]) == ([0.0, 0.0], [0.0, 0.0])
    assert par_rewards([None], [1]) == ([0.0], [0.0])


def test_par_callable_margin():
    chosen, rejected = par_rewards([6], [4], margin=lambda d: d / 10)
    assert chosen == [pytest.approx(0.2)] and rejected == [pytest.approx(0.2)]


def test_format_penalty():
    good = "<rubric>a</rubric><eval>e</eval><score>7</score>"
    assert format_penalty(good) == 0.0
    assert format_penalty("<eval>e</eval><score>7</score>") == -0.5  # tags wrong (no rubric), score valid
    assert format_penalty("<rubric>a</rubric><eval>e</eval><score>70</score>") == -1.0
    assert format_penalty("<eval>e</eval>") == -1.0  # both wrong: the invalid score dominates


def _call(rewards, completions, pair_id, side, **kw):
    return rewards.par(completions, pair_id=pair_id, side=side, **kw)


def test_trl_reward_functions_group_pairs_and_log():
    def j(s):
        return [{"role": "assistant", "content": f"<rubric>a</rubric><eval>e</eval><score>{s}</score>"}]

    completions = [j(8), j(9), j(2), j(4), j(3), "<eval>x</eval><score>6</score>", j(7), j(7)]
    pair_id = ["p", "p", "p", "p", "q", "q", "q", "q"]
    side = ["chosen", "chosen", "rejected", "rejected", "chosen", "chosen", "rejected", "rejected"]
    metrics = {}
    r = PairRewards()
    par = _call(r, completions, pair_id, side, log_metric=lambda k, v: metrics.__setitem__(k, v))
    # pair p: s̄^c = 8.5, s̄^r = 3 → chosen 1.4, 1.4; rejected 1.4 (δ=6.5), 1.4 (δ=4.5)
    # pair q: s̄^c = 4.5, s̄^r = 7 → nothing satisfied
    assert par == [1.4, 1.4, 1.4, 1.4, 0, 0, 0, 0]
    assert r.format(completions) == [0, 0, 0, 0, 0, -0.5, 0, 0]
    assert metrics["par/pair_accuracy"] == 0.5
    assert metrics["par/margin"] == pytest.approx(((8.5 - 3) + (4.5 - 7)) / 2)
    # per side over every valid rollout of the call: chosen 8, 9, 3, 6; rejected 2, 4, 7, 7
    assert (metrics["par/chosen_score"], metrics["par/rejected_score"]) == (6.5, 5.0)
    assert metrics["format/bad_tags_rate"] == 1 / 8 and metrics["format/invalid_score_rate"] == 0
    names = [f.__name__ for f in r.reward_funcs()]
    assert names == ["par", "format"]


@pytest.mark.parametrize("pair_id, side", [
    (["p", "p"], ["chosen", "chosen"]),                      # rejected side missing
    (["p", "p", "p"], ["chosen", "chosen", "rejected"]),     # uneven: rollouts split across calls
])
def test_incomplete_pair_raises(pair_id, side):
    with pytest.raises(IncompletePairError, match="pair 'p' is incomplete"):
        _call(PairRewards(), ["<score>5</score>"] * len(side), pair_id, side)


def test_margin_metric_nan_when_no_valid_pair():
    metrics = {}
    _call(PairRewards(), ["junk", "junk"], ["p", "p"], ["chosen", "rejected"],
          log_metric=lambda k, v: metrics.__setitem__(k, v))
    assert "par/margin" not in metrics and metrics["format/invalid_score_rate"] == 1.0
    assert "par/chosen_score" not in metrics and "par/rejected_score" not in metrics


def test_label_reward_hand_computed():
    """The pointwise ablation: ±1 per rollout against the label, whatever the other side scored."""
    assert label_rewards([8, 5.5, None], [5.5, 6, 1], threshold=5.5) == ([1.0, -1.0, -1.0], [1.0, -1.0, 1.0])
    # unlike PAR, a pair whose sides both score high still pays the chosen side
    assert label_rewards([9], [8], 5.5) == ([1.0], [-1.0]) and par_rewards([9], [8]) == ([1.2], [1.2])


def test_trl_reward_functions_with_the_label_reward():
    j = lambda s: [{"role": "assistant", "content": f"<rubric>a</rubric><eval>e</eval><score>{s}</score>"}]  # noqa: E731
    completions = [j(8), j(3), j(2), j(7)]
    r = PairRewards(kind="label")
    assert r.label_threshold == 5.5  # the middle of the template's 1-10 range
    assert _call(r, completions, ["p"] * 4, ["chosen", "chosen", "rejected", "rejected"]) == [1, -1, 1, -1]
    assert PairRewards(kind="label", label_threshold=2.5).par(
        completions, ["p"] * 4, ["chosen", "chosen", "rejected", "rejected"]
    ) == [1, 1, 1, -1]
    with pytest.raises(ValueError, match="reward must be one of"):
        PairRewards(kind="pointwise")
