"""The IFEval judge measured on the dev pairs: its constraint lines against the checkers, voting@k on its ties."""

from __future__ import annotations

import json

import pytest

from helpers import IFEVAL_ROW as ROW
from helpers import ifeval_pair_row as _row
from patarm.demo.ifeval.pairs import label_pairs
from patarm.demo.ifeval.teacher import judgment_text


def test_the_judges_constraint_lines_are_checked_against_the_checkers_beside_a_majority_guess():
    from patarm.demo.ifeval.judge import constraint_verdicts

    blue, comma = "The sea is blue.", "The sea, it is calm."  # checkers: pass pass / fail fail
    texts = [judgment_text(ROW, blue),  # the teacher's own lines: both right
             "<eval>\nno_comma :: 0 commas :: pass\nexistence :: pass\n</eval>",  # both wrong (comma fails both)
             "<eval>\nno_comma :: fail\n</eval>\n<score>3</score>"]  # right; existence not stated
    measured = constraint_verdicts([(ROW, blue), (ROW, comma), (ROW, comma)], texts)
    by_id = measured.pop("by_id")
    assert measured == {"right": 3, "wrong": 2, "not_stated": 1, "constraints": 6,
                        "majority_guess": 4}  # each id fails on 2 of its 3 responses
    assert by_id == {"keywords:existence": {"right": 1, "of": 3, "majority_guess": 2},
                     "punctuation:no_comma": {"right": 2, "of": 3, "majority_guess": 2}}


def test_voting_breaks_the_judges_greedy_ties_on_the_dev_pairs_and_is_added_to_a_cached_measurement(
        tmp_path, monkeypatch):
    from patarm.demo.downstream.reward_models import reward_model_accuracy
    from patarm.demo.ifeval import judge
    from patarm.demo.ifeval.recipe import parse_args
    from patarm.judge import load_template

    pairs, _, _ = label_pairs([_row(0), _row(1)], [["The sea is blue.", "The sea, it is calm."]] * 2)
    greedy = {"The sea is blue.": 7, "The sea, it is calm.": 7}  # greedy: both pairs tie
    sampled = {"The sea is blue.": [7, 10, None], "The sea, it is calm.": [7, 4, 10]}  # means 8.5 vs 7.0

    class Backend:
        def __init__(self, temperature):
            self.temperature, self.cache = temperature, type("Cache", (), {"close": lambda self: None})()

        def generate(self, prompts, k, seed=None):
            table = sampled if self.temperature else {r: [s] for r, s in greedy.items()}
            texts = [[f"<eval>x</eval>\n<score>{s}</score>" if s else "no score" for s in table[p][:k]]
                     for p in prompts]
            return texts

    monkeypatch.setattr(judge, "_renderer", lambda args, model: lambda pair, response, template: response)
    monkeypatch.setattr(judge, "_judge_backend", lambda args, model, temperature, cache: Backend(temperature))
    template, clock = load_template("pointwise-compact", rubric_mode="primary"), judge.Clock()
    plain = parse_args(["--run_dir", str(tmp_path), "--nltk_data", "", "--judge_readout", "false"])
    measured = judge.judge_accuracy(plain, tmp_path, pairs, template, clock)
    assert (measured["accuracy"], measured["ties"], "voting" in measured) == (0.0, 2, False)
    voted = parse_args(["--run_dir", str(tmp_path), "--nltk_data", "", "--judge_vote_k", "3",
                        "--judge_readout", "false"])
    measured = judge.judge_accuracy(voted, tmp_path, pairs, template, clock)  # the greedy one cached, voting added
    assert measured["voting"] | {"accuracy_ci": None} == {
        "k": 3, "temperature": 1.0, "accuracy": 1.0, "accuracy_ci": None, "pairs": 2, "ties": 0, "right": [1.0, 1.0]}
    assert json.loads((tmp_path / "eval" / "judge_pairs.json").read_text())["voting"]["k"] == 3
    two = judge.judge_accuracy(parse_args(["--run_dir", str(tmp_path), "--nltk_data", "", "--judge_vote_k", "1",
                                           "--judge_readout", "false"]),
                               tmp_path, pairs, template, clock)  # voting@1: one sample each, 7 against 7
    assert (two["voting"]["k"], two["voting"]["accuracy"], two["voting"]["ties"]) == (1, 0.0, 2)
    assert set(reward_model_accuracy(voted, None)) == {"judge", "judge vote@1"}  # the report lists both
    with pytest.raises(ValueError, match="--judge_vote_k must be >= 0"):
        parse_args(["--run_dir", str(tmp_path), "--judge_vote_k", "-1"])
