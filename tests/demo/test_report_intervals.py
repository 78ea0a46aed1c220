"""The demo reports put a 95 % interval beside each accuracy: quickstart, GSM8K and downstream."""

from __future__ import annotations

import pytest

from patarm.demo.downstream.eval import measure
from patarm.demo.downstream.report import policy_table
from patarm.demo.gsm8k import metrics
from patarm.demo.gsm8k.report import results_table
from patarm.demo.report import stage_table
from patarm.eval.pairs import summarize


def test_quickstart_stage_table_shows_the_pair_accuracy_interval():
    records = [{"correct": k % 4 != 0, "chosen": [], "rejected": []} for k in range(40)]  # 30 of 40 right
    s = summarize(records)
    lo, hi = s["accuracy_ci"]
    assert s["accuracy"] == 0.75 and 0.55 < lo < 0.75 < hi < 0.9
    assert f"| 0.750 [{lo:.3f}, {hi:.3f}] |" in stage_table({"sft": s})
    assert "| 0.500 |" in stage_table({"old": {"accuracy": 0.5, "format_valid": 1.0, "margin": 0.0}})  # old reports


def test_gsm8k_intervals_resample_problems():
    same = {"scores": [9, 1, 1, 1], "correct": [True, False, False, False], "valid": [True] * 4}  # 3 of 3 pairs right
    wrong = {"scores": [1, 9, 9, 9], "correct": [True, False, False, False], "valid": [True] * 4}  # 0 of 3
    s = metrics.summarize_scores([same, wrong] * 10)
    assert s["pair_accuracy"] == 0.5 and s["best_of_n"] == 50.0
    lo, hi = s["pair_accuracy_ci"]
    assert 0.2 < lo < 0.5 < hi < 0.8
    assert s["best_of_n_ci"] == pytest.approx([100 * lo, 100 * hi])  # one value per problem: the same resampling
    report = {"arms": {"reference": {"stages": {"sft": s | {"expected": {**s, "best_of_n": 75.0}}}}},
              "baselines": {"single": {"m": 40.0}, "best_single": 40.0, "random": 25.0, "majority_vote": 30.0,
                            "oracle": 60.0, "problems": 20, "ci": {"single:m": [20.0, 60.0]}}}
    table = results_table(report)
    assert f"0.500 [{lo:.3f}, {hi:.3f}]" in table and "| single model: m | 40.00 [20.0, 60.0] |" in table
    assert "| SFT, verdict probability | reference | 0.500" in table and "| 75.00 [" in table
    # the GRPO stage's row names its reward: the label-reward ablation is not GRPO-PAR
    report["arms"]["reference"]["stages"]["grpo"] = s
    assert "| SFT + GRPO-PAR | reference |" in results_table(report)
    report["arguments"] = {"reward": "label", "margin": "graded"}
    assert "| SFT + GRPO (label reward) | reference |" in results_table(report)
    report["arguments"] = {"reward": "par", "margin": "constant"}
    assert "| SFT + GRPO-PAR, constant f(δ) | reference |" in results_table(report)


def test_downstream_verified_accuracy_interval_resamples_prompts():
    items = [{"prompt": [{"role": "user", "content": f"q{k}"}], "kind": "x"} for k in range(2)]
    import patarm.demo.downstream.eval as de

    flat = [(items[0], "a"), (items[0], "b"), (items[1], "c"), (items[1], "d")]
    verdicts = {"a": True, "b": True, "c": False, "d": True}
    orig = de.verified
    de.verified = lambda item, r: verdicts[r]
    try:
        out = measure(flat, {})
    finally:
        de.verified = orig
    assert out["verified"] == 0.75 and len(out["verified_ci"]) == 2
    table = policy_table({"start": {"sampled": out}}, "sampled")
    assert f"0.750 [{out['verified_ci'][0]:.3f}, {out['verified_ci'][1]:.3f}]" in table


def test_gsm8k_prep_table_shows_each_sides_rollout_scores_first_and_last():
    from patarm.demo.gsm8k.report import prep_table

    def step(i, chosen, rejected):
        return {"step": i, "pair_accuracy": 0.5, "chosen_score": chosen, "rejected_score": rejected}

    # 10 steps: the first and last 20 % are 2 steps each; both sides drift up (the judge says `pass` more)
    curve = [step(1, 6, 4), step(2, 8, 4)] + [step(i, 7, 5) for i in range(3, 9)] + [step(9, 9, 8), step(10, 9, 9)]
    arm = {"prep": {"rl": {"pool": 80, "kept": 60, "dropped": {}}, "sft": {"sft_rows": 800}}, "grpo_curve": curve}
    old = dict(arm, grpo_curve=[{k: v for k, v in c.items() if "score" not in k} | {"chosen_score": None,
                                                                                   "rejected_score": None}
                                for c in curve])
    table = prep_table({"arms": {"reference": arm, "older": old}}).splitlines()
    assert table[2].endswith("| 0.500 → 0.500 | 7.00 / 4.00 → 9.00 / 8.50 |")
    assert table[3].endswith("| 0.500 → 0.500 | — |")  # a run logged before the per-side scores were
