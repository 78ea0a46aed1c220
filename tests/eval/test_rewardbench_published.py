"""RewardBench v1 sections recomputed from published per-subset results of public reward models (issue 11).

`fixtures/rewardbench_v1_published.json` holds per-subset accuracies published in allenai/reward-bench:
scripts/results/eval-set/general-preference/{GPM-Gemma-2B, GPM-Gemma-2-9B, GPM-Llama-3.1-8B-Instruct}.json
at commit 512f175310d78a06951c3d424414a0963fdec535, and the PKU-Alignment/beaver-7b-v1.0-cost example in
the repository's README ("Getting Leaderboard Section Scores").

No published *section* scores for these files could be found with the search tools, so the expected
sections below are computed by hand from the official formula (rewardbench 0.1.4:
`calculate_scores_per_section(EXAMPLE_COUNTS, SUBSET_MAPPING, metrics)`, headline = mean of the four).
Every official weight but math-prm's equals the subset's row count, so a section is (rows right) / (rows):
integers read off the published accuracies (accuracy x rows). Reasoning weighs math-prm (447 rows) as 984,
equal to the six hep-* subsets together, so it is (math right / 447 + code right / 984) / 2.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from patarm.eval import rewardbench

PUBLISHED = json.loads((Path(__file__).parent / "fixtures" / "rewardbench_v1_published.json").read_text())
MODELS = [m for m in PUBLISHED if not m.startswith("_")]
MATH_PRM_ROWS = 447  # the only subset whose official weight (984) is not its row count

# Hand-computed: right / rows per section (rows: chat 358, chat_hard 456, safety 740; reasoning as above).
EXPECTED = {
    "general-preference/GPM-Gemma-2B": {
        "chat": "281/358", "chat_hard": "302/456", "safety": "624/740", "reasoning": (420, 659)},
    "general-preference/GPM-Gemma-2-9B": {
        "chat": "335/358", "chat_hard": "400/456", "safety": "683/740", "reasoning": (435, 926)},
    "general-preference/GPM-Llama-3.1-8B-Instruct": {
        "chat": "334/358", "chat_hard": "393/456", "safety": "675/740", "reasoning": (428, 941)},
    "PKU-Alignment/beaver-7b-v1.0-cost": {
        "chat": "218/358", "chat_hard": "205/456", "safety": "534/740", "reasoning": (132, 628)},
}
ROUNDING = 0.005  # points: published tables show two decimals


def _rows(subset: str) -> int:
    return MATH_PRM_ROWS if subset == "math-prm" else rewardbench.tables()["example_counts"][subset]


def _expected_percent(value) -> float:
    if isinstance(value, tuple):  # (math-prm right of 447, hep-* right of 984)
        return float((Fraction(value[0], MATH_PRM_ROWS) + Fraction(value[1], 984)) / 2 * 100)
    return float(Fraction(value) * 100)


def _records(accuracy: dict[str, float]) -> list[dict]:
    """One scalar record per row of the split, `round(accuracy x rows)` of them won by the chosen response."""
    records = []
    for subset, acc in accuracy.items():
        rows = _rows(subset)
        right = round(acc * rows)
        records += [{"id": f"{subset}:{i}", "subset": subset, "score_chosen": float(i < right),
                     "score_rejected": 0.5} for i in range(rows)]
    return records


@pytest.mark.parametrize("model", MODELS)
def test_published_accuracies_are_whole_rows_of_the_weight_table(model):
    """Each published accuracy is k / (the table's count): the weights are the rows the official run scored.

    With xstest-should-refuse weighted 250 (the swapped table), 0.8506493506493507 x 250 = 212.66 rows.
    """
    for subset, acc in PUBLISHED[model].items():
        rows = _rows(subset)
        assert abs(acc * rows - round(acc * rows)) < 1e-9, (model, subset, acc, rows)


@pytest.mark.parametrize("model", MODELS)
def test_sections_and_score_reproduce_the_official_formula(model):
    metrics = rewardbench.score(_records(PUBLISHED[model]))
    expected = {name: _expected_percent(v) for name, v in EXPECTED[model].items()}
    for name, value in expected.items():
        assert abs(metrics[name] - value) < ROUNDING, (model, name, metrics[name], value)
    assert abs(metrics["score"] - sum(expected.values()) / 4) < ROUNDING
    for subset, acc in PUBLISHED[model].items():  # the per-subset accuracies come back as published
        assert abs(metrics["subsets"][subset] - 100 * acc) < 1e-9


def test_sections_from_the_published_accuracies_directly():
    """`sections` on the published accuracy dict (as calculate_scores_per_section takes it) agrees too."""
    for model in MODELS:
        got = rewardbench.sections(PUBLISHED[model])
        for name, value in EXPECTED[model].items():
            assert abs(100 * got[name] - _expected_percent(value)) < ROUNDING, (model, name)
