"""The GSM8K skill recipe's pieces: split, pairs, verifier teacher, prompts, metrics, and the pool's known figures."""

import pytest

from patarm.demo.gsm8k import data, metrics
from patarm.demo.gsm8k.data import Problem
from patarm.demo.gsm8k.evaluate import judge_template
from patarm.demo.gsm8k.prompts import skill_prompt
from patarm.demo.gsm8k.teacher import FAIL_SCORE, NOT_MOUNTED, PASS_SCORE, VerifierTeacher
from patarm.judge import parse_judgment


def _problem(k: int, correct=(True, False, True, False), answers=("18", "20", "18", "7")) -> Problem:
    return Problem(f"gsm8k-{k:04d}", f"question {k}?", "18", ["a", "b", "c", "d"],
                   [f"Some work.\nA: {x}" for x in answers], list(correct))


@pytest.fixture(scope="module")
def pool(bench):
    problems, manifest = data.load_problems(bench / "gsm8k")
    return problems, manifest


def test_pool_reproduces_the_known_figures(pool):
    problems, manifest = pool
    assert len(problems) == 1319 and manifest.rows_out == 1319 and not manifest.dropped
    b = metrics.pool_baselines(problems)
    assert [round(v, 2) for v in b["single"].values()] == [21.68, 39.04, 34.72, 56.25]
    assert round(b["oracle"], 2) == 67.25
    assert b["random"] < b["majority_vote"] < b["oracle"]


def test_split_is_by_problem_seeded_and_disjoint(pool):
    problems, _ = pool
    train, heldout = data.split_problems(problems, 100, seed=0)
    assert len(heldout) == 100 and len(train) == 1219
    assert not {p.id for p in train} & {p.id for p in heldout}
    assert [p.id for p in data.split_problems(problems, 100, seed=0)[1]] == [p.id for p in heldout]
    assert [p.id for p in data.split_problems(problems, 100, seed=1)[1]] != [p.id for p in heldout]
    sft, rl = data.take(train, 50), data.take(train, 20, start=50)
    assert all(p.mixed for p in sft + rl) and not {p.id for p in sft} & {p.id for p in rl}
    with pytest.raises(ValueError, match="lower sft_problems"):
        data.take(train, 10_000)


def test_pairs_are_a_correct_and_an_incorrect_solution_of_one_problem():
    problems = [_problem(1), _problem(2, correct=(True, True, True, True))]
    pairs = data.make_pairs(problems, per_problem=3, seed=0, disclose=True, skill="gsm8k-judge")
    assert len(pairs) == 3 and len({p.id for p in pairs}) == 3  # the all-correct problem yields none
    for p in pairs:
        c, i = p.metadata["chosen_source"], p.metadata["rejected_source"]
        assert c in ("a", "c") and i in ("b", "d") and p.metadata["problem"] == "gsm8k-0001"
        assert p.metadata["reference"] == "18" and p.metadata["disclose"] is True
    assert [p.id for p in pairs] == [p.id for p in data.make_pairs(problems, 3, 0, True, "gsm8k-judge")]


@pytest.mark.parametrize("disclose", [True, False])
def test_teacher_states_both_answers_before_the_score(disclose):
    pair = data.make_pairs([_problem(1)], 1, 0, disclose, "gsm8k-judge")[0]
    outputs = VerifierTeacher().generate([[], []], metadata=[{"pair": pair, "side": "chosen"},
                                                              {"pair": pair, "side": "rejected"}])
    template = judge_template()
    chosen, rejected = (parse_judgment(o[0], template) for o in outputs)
    assert chosen.score == PASS_SCORE and rejected.score == FAIL_SCORE and chosen.tags_ok and rejected.tags_ok
    text = outputs[1][0]
    lines = text.splitlines()
    answer_line = next(k for k, line in enumerate(lines) if line.startswith("final answer ::"))
    reference_line = next(k for k, line in enumerate(lines) if line.startswith("reference answer ::"))
    assert answer_line < reference_line < text.index("<score>") and text.index("</eval>") < text.index("<score>")
    assert lines[reference_line].endswith("18" if disclose else NOT_MOUNTED)
    assert lines[answer_line].split(":: ")[1] in ("20", "7")


def test_teacher_agrees_with_the_pool_flags(pool):
    problems, _ = pool
    pairs = data.make_pairs(problems[:60], 1, 0, False, "gsm8k-judge")
    meta = [{"pair": p, "side": s} for p in pairs for s in ("chosen", "rejected")]
    scores = [parse_judgment(o[0], judge_template()).score
              for o in VerifierTeacher().generate([[]] * len(meta), metadata=meta)]
    assert scores == [PASS_SCORE, FAIL_SCORE] * len(pairs) and len(pairs) > 10


def test_reference_is_in_the_prompt_only_when_disclosed():
    shown, hidden = (data.make_pairs([_problem(1)], 1, 0, d, "gsm8k-judge")[0] for d in (True, False))
    text = lambda msgs: "\n".join(m["content"] for m in msgs)  # noqa: E731
    assert "reference-answer" in text(skill_prompt(shown, shown.chosen)) and "18" in text(
        skill_prompt(shown, shown.chosen)
    )
    assert "reference-answer" not in text(skill_prompt(hidden, hidden.chosen))


def test_best_of_n_breaks_ties_uniformly_and_ranks_missing_scores_last():
    assert metrics.best_of_n([9, 2, 9, None], [True, False, False, True]) == 0.5
    assert metrics.best_of_n([None, 2, None, None], [False, True, False, False]) == 1.0
    assert metrics.best_of_n([None] * 4, [True, False, False, False]) == 0.25


def test_pair_accuracy_counts_ties_and_missing_scores_wrong():
    assert metrics.pair_hits([9, 9, 2], [True, False, False]) == (1, 2)
    assert metrics.pair_hits([None, 2], [True, False]) == (0, 1)
    s = metrics.summarize_scores([{"scores": [9, 9, 2, None], "correct": [True, False, False, True],
                                   "valid": [True, True, True, False]}])
    assert s["pairs"] == 4 and s["pair_accuracy"] == 0.25 and s["format_valid"] == 0.75 and s["top_tied"] == 1
    assert s["best_of_n"] == 50.0


def test_majority_vote_and_oracle_on_answer_clusters():
    # answers 18, 20, 18, 7: the cluster {18} wins, its members are correct
    assert metrics.majority_vote([f"A: {x}" for x in ("18", "20", "18", "7")], [True, False, True, False]) == 1.0
    # four different answers: a uniform pick among four clusters
    assert metrics.majority_vote([f"A: {x}" for x in ("1", "2", "3", "18")], [False, False, False, True]) == 0.25
    # 18.0 and 18 are one cluster under math-verify
    assert metrics.majority_vote(["A: 18.0", "A: 18", "A: 3", "A: 4"], [True, True, False, False]) == 1.0
    b = metrics.pool_baselines([_problem(1), _problem(2, correct=(False,) * 4, answers=("1", "2", "3", "4"))])
    assert b["oracle"] == 50.0 and b["single"]["a"] == 50.0 and b["majority_vote"] == 50.0


def test_corpus_and_grpo_rows_use_the_skill_prompt_builder():
    from patarm.prep.corpus import pointwise_corpus
    from patarm.train.rows import load_prompt_builder, pairs_to_judge_rows

    pairs = data.make_pairs([_problem(1), _problem(2)], 1, 0, True, "gsm8k-judge")
    rows, manifest = pointwise_corpus(pairs, VerifierTeacher(), judge_template(), 2.0, render=skill_prompt)
    assert manifest.rows_out == 2 and len(rows) == 4
    assert all("reference-answer" in r["messages"][-2]["content"] for r in rows)
    build = load_prompt_builder("patarm.demo.gsm8k.prompts:skill_prompt")
    assert build is skill_prompt
    grpo_rows = pairs_to_judge_rows(pairs, judge_template(), build=build)
    assert [r["prompt"] for r in grpo_rows] == [r["messages"][:-1] for r in rows]
    with pytest.raises(ValueError, match="not an importable"):
        load_prompt_builder("patarm.demo.gsm8k.prompts:nothing_here")
