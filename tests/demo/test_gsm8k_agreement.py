"""The evidence arm's answer-agreement resource (`evidence_agreement`): the skill's `answer-agreement` verifier
over the problem's candidates disclosed in the prompt, the teacher's `agreement :: k of n` line and its score,
the consistency check of that line, and the rule on the real pool against the training-free skill."""

import pytest

from patarm.demo.gsm8k import data
from patarm.demo.gsm8k.consistency import check, readout, summarize
from patarm.demo.gsm8k.evaluate import fitted_prompts, judge_template
from patarm.demo.gsm8k.evidence import FIELDS, Evidence, agreement, among, gather, score_of
from patarm.demo.gsm8k.metrics import skill_selection, summarize_scores
from patarm.demo.gsm8k.prompts import skill_prompt
from patarm.demo.gsm8k.teacher import GradedTeacher
from patarm.judge import parse_judgment

QUESTION = "Tom has 16 apples and buys 3 bags of 4 apples. How many apples does he have?"
RIGHT = "He buys 3 * 4 = <<3*4=12>>12 apples.\nHe has 16 + 12 = <<16+12=28>>28 apples.\nA: 28"
RIGHT_TOO = "3 bags of 4 is <<3*4=12>>12, and 16 + 12 = <<16+12=28>>28.\nA: 28.00"
WRONG_STEP = "He buys 3 * 4 = <<3*4=13>>13 apples.\nHe has 16 + 13 = <<16+13=29>>29 apples.\nA: 29"
NO_ANSWER = "He buys some apples."
PEERS = [RIGHT, WRONG_STEP, RIGHT_TOO, NO_ANSWER]


def test_agreement_counts_equivalent_final_answers_among_the_problems_candidates():
    assert agreement(RIGHT, PEERS) == (2, 4)  # 28 and 28.00 are one answer (math-verify)
    assert agreement(WRONG_STEP, PEERS) == (1, 4)
    assert agreement(NO_ANSWER, PEERS) == (1, 4)  # no final answer: shared with none but itself
    near_miss = RIGHT.replace("A: 28", "A: 29")  # made from RIGHT: judged in its place, as many candidates as RIGHT
    assert among(near_miss, PEERS) == ([near_miss, WRONG_STEP, RIGHT_TOO, NO_ANSWER], 0)
    assert agreement(near_miss, PEERS) == (2, 4)  # 29, as WRONG_STEP's
    stranger = "Tom has 28 apples.\nA: 29"  # made from no candidate: judged among them, added at the end
    assert among(stranger, PEERS) == ([*PEERS, stranger], 4) and agreement(stranger, PEERS) == (2, 5)


@pytest.mark.parametrize("agree, issues, score", [((4, 4), 0, 10), ((3, 4), 0, 8), ((2, 4), 1, 5), ((1, 4), 0, 4),
                                                  ((1, 4), 3, 1), ((5, 5), 0, 10), ((1, 5), 2, 2)])
def test_the_agreement_scale_by_hand(agree, issues, score):
    e = Evidence("28", None, None, 2, int(issues >= 1), "28", issues < 2, ("2",) if issues >= 3 else (), agree)
    assert e.issues == issues and score_of(e) == score


def test_the_teacher_states_the_agreement_after_the_steps_evidence_and_scores_by_it():
    teacher = GradedTeacher("primary", "canonical", issues_line=True)
    text = teacher.judge(QUESTION, RIGHT, "28", False, PEERS)
    j = parse_judgment(text, judge_template())
    names = [line.split(" :: ")[0] for line in j.evaluation.strip().splitlines()]
    assert names == [*FIELDS, "agreement", "issues"] and "agreement :: 2 of 4" in text and j.score == 6
    assert check(text) == ("consistent", "")
    assert readout(text) == 6.0
    without = teacher.judge(QUESTION, RIGHT, "28", False)  # no peers: the arithmetic check's rule, no agreement line
    assert "agreement" not in without and parse_judgment(without, judge_template()).score == 7
    mounted = teacher.judge(QUESTION, RIGHT, "28", True, PEERS)  # the reference decides; agreement is still stated
    assert parse_judgment(mounted, judge_template()).score == 10 and check(mounted)[0] == "consistent"


def test_a_judgment_is_held_to_the_agreement_it_states():
    text = GradedTeacher("primary", "canonical", issues_line=True).judge(QUESTION, RIGHT, "28", False, PEERS)
    assert check(text.replace("<score>6</score>", "<score>8</score>"))[0] == "inconsistent"
    assert check(text.replace("agreement :: 2 of 4", "agreement :: 3 of 4").replace("<score>6", "<score>8")) == (
        "consistent", "")  # checked against its own lines, not against the prompt
    assert check(text.replace("agreement :: 2 of 4", "agreement :: 5 of 4"))[0] == "incomplete"
    assert readout(text.replace("agreement :: 2 of 4", "agreement :: many")) is None


def test_the_evidence_arm_prompt_discloses_the_agreement_of_the_pairs_problem():
    problem = data.Problem("gsm8k-0001", QUESTION, "28", ["a", "b", "c", "d"], PEERS, [True, False, True, False])
    pair = data.make_pairs([problem], 1, 0, False, "gsm8k-judge-graded", evidence=True, agreement=True)[0]
    assert pair.metadata["peers"] == PEERS
    text = skill_prompt(pair, pair.chosen, judge_template())[-1]["content"]
    assert pair.chosen in (RIGHT, RIGHT_TOO)  # 28 and 28.00: one answer, two candidates give it
    assert "answer-agreement :: 0.5 :: final answer '28" in text and "' shared by 2/4 candidates" in text
    assert "wrong steps :: pass :: 0 of 2" in text and "reference-answer" not in text
    plain = data.make_pairs([problem], 1, 0, False, "gsm8k-judge-graded", evidence=True)[0]
    assert "peers" not in plain.metadata
    assert "answer-agreement" not in skill_prompt(plain, plain.chosen, judge_template())[-1]["content"]
    # evaluation asks the same way: each candidate among its problem's candidates

    class Whole:  # a tokenizer that never needs to cut
        def apply_chat_template(self, messages, **_):
            return [0]

    prompts = fitted_prompts([problem], False, "gsm8k-judge-graded", Whole(), 10**6, True, agreement=True)
    assert [("shared by 2/4" in p[-1]["content"]) for p in prompts] == [True, False, True, False]


def test_the_prompt_states_the_score_rule_the_agreement_enters():
    """With agreement `rule` (the recipe's default) the system prompt states the score rule every agreement judgment
    follows — the skill's procedure alone says 7 - 3 x issues for an unknown verdict, which they contradict."""
    import re

    from patarm.demo.gsm8k.prompts import AGREEMENT_RULE

    problem = data.Problem("gsm8k-0001", QUESTION, "28", ["a", "b", "c", "d"], PEERS, [True, False, True, False])
    ruled = data.make_pairs([problem], 1, 0, False, "gsm8k-judge-graded", evidence=True, agreement="rule")[0]
    facts = data.make_pairs([problem], 1, 0, False, "gsm8k-judge-graded", evidence=True, agreement="facts")[0]
    assert ruled.metadata["score_rule"] and "score_rule" not in facts.metadata and facts.metadata["peers"] == PEERS
    system = skill_prompt(ruled, ruled.rejected, judge_template())[0]["content"]
    assert system.endswith(AGREEMENT_RULE) and "7 - 3 x issues" in system  # after the procedure it amends
    assert AGREEMENT_RULE not in skill_prompt(facts, facts.rejected, judge_template())[0]["content"]
    reference = data.make_pairs([problem], 1, 0, True, "gsm8k-judge-graded", agreement="rule")[0]  # no evidence
    assert AGREEMENT_RULE not in skill_prompt(reference, reference.chosen, judge_template())[0]["content"]
    # the rule as stated is the teacher's scale (evidence.score_of), line for line
    base, per_k = map(int, re.search(r"(\d+) \+ (\d+) x k - issues", AGREEMENT_RULE).groups())
    for k in range(1, 5):
        for issues in range(4):
            e = Evidence("28", None, None, 2, int(issues >= 1), "28", issues < 2, ("2",) if issues >= 3 else (),
                         (k, 4))
            assert score_of(e) == max(1, min(10, base + per_k * k - e.issues))
    # ... and names the lines in the teacher's order ([*FIELDS, "agreement", "issues"])
    assert f"agreement :: k of n after {FIELDS[-1]}, then issues :: N" in AGREEMENT_RULE

    class Whole:  # a tokenizer that never needs to cut
        def apply_chat_template(self, messages, **_):
            return [0]

    prompts = fitted_prompts([problem], False, "gsm8k-judge-graded", Whole(), 10**6, True, agreement="rule")
    assert all(p[0]["content"].endswith(AGREEMENT_RULE) for p in prompts)
    from patarm.demo.gsm8k.recipe import parse_args

    assert (parse_args([]).agreement, parse_args(["--evidence_score_rule", "false"]).agreement) == ("rule", "facts")
    assert parse_args(["--evidence_agreement", "false"]).agreement is None


def test_unanimous_problems_give_the_n_of_n_rows_no_pair_has():
    """`unanimous_pairs`: problems whose candidates all give one final answer (28.00 = 28), in order, two of their
    candidates placed for the teacher, whose judgment then states `agreement :: 4 of 4` and scores 2 + 2 x 4 —
    what a (correct, incorrect) pair's sides never state."""
    rows = [data.Problem("gsm8k-0001", QUESTION, "28", list("abcd"), PEERS, [True, False, True, False]),
            data.Problem("gsm8k-0002", QUESTION, "28", list("abcd"), [RIGHT, RIGHT_TOO, RIGHT, RIGHT_TOO], [True] * 4),
            data.Problem("gsm8k-0003", QUESTION, "28", list("abcd"), [WRONG_STEP] * 4, [False] * 4),
            data.Problem("gsm8k-0004", QUESTION, "28", list("ab"), [RIGHT, RIGHT], [True] * 2)]
    pairs, manifest = data.unanimous_pairs(rows, 2, seed=0, skill="gsm8k-judge-graded", agreement="rule")
    assert [p.metadata["problem"] for p in pairs] == ["gsm8k-0002", "gsm8k-0003"]
    assert (manifest.rows_in, manifest.rows_out, dict(manifest.dropped)) == (3, 2, {"not_unanimous": 1})
    teacher = GradedTeacher("primary", "canonical", issues_line=True)
    for p in pairs:
        assert p.metadata["evidence"] and not p.metadata["disclose"] and p.metadata["score_rule"]
        assert p.metadata["unanimous"] == "4 of 4" and p.metadata["peers"] and p.chosen in p.metadata["peers"]
        text = teacher.judge(p.question, p.chosen, "28", False, p.metadata["peers"])
        assert "agreement :: 4 of 4" in text and check(text)[0] == "consistent"
    right = parse_judgment(teacher.judge(QUESTION, RIGHT, "28", False, pairs[0].metadata["peers"]))
    assert right.score == 10  # no issues, all four agree
    assert data.unanimous_pairs(rows, 5, seed=0, skill="s")[1].rows_out == 3
    assert data.unanimous_pairs(rows, 2, seed=0, skill="s")[0][0].to_dict() == data.unanimous_pairs(
        rows, 2, seed=0, skill="s")[0][0].to_dict()  # seeded


def test_the_agreement_rule_picks_above_the_training_free_skill_on_the_real_pool(bench):
    """The teacher's agreement rule on the recipe's held-out problems (seed 0): best-of-4 above the training-free
    skill (answer agreement + calculator checks read out by its aggregation rules) and majority vote; every
    judgment consistent with its own lines."""
    problems, _ = data.load_problems(bench / "gsm8k")
    heldout = data.split_problems(problems, 100, seed=0)[1]
    teacher = GradedTeacher("primary", "canonical", issues_line=True)
    texts = [[teacher.judge(p.question, s, p.answer, False, list(p.solutions)) for s in p.solutions] for p in heldout]
    records = [{"scores": [parse_judgment(t, judge_template()).score for t in row], "correct": p.correct,
                "valid": [True] * 4} for row, p in zip(texts, heldout)]
    picked = summarize_scores(records)["best_of_n"]
    assert picked > skill_selection(heldout) > 50.0 and round(picked, 2) == 50.67
    assert summarize([t for row in texts for t in row])["consistent_rate"] == 1.0
    assert gather(heldout[0].question, heldout[0].solutions[0], None, peers=list(heldout[0].solutions)).agree[1] == 4


@pytest.mark.slow
def test_the_evidence_arm_carries_the_agreement_through_every_stage(tmp_path, bench):
    """The evidence arm end to end at a tiny size (~13 s): the SFT rows state the agreement the prompt discloses, the
    RL pairs carry the problem's candidates to GRPO's prompt builder, evaluation judges each candidate among its
    problem's candidates, and the arm generates up to its own `evidence_max_new_tokens`."""
    import json

    from test_gsm8k_recipe import TINY

    from helpers import run_cli
    from patarm.demo.gsm8k.prompts import AGREEMENT_RULE
    from patarm.io import read_jsonl

    run = tmp_path / "run"
    run_cli("quickstart", "--recipe", "gsm8k-skill", "--model", "tiny", "--run_dir", run, "--data_dir",
            bench / "gsm8k", *TINY, "--arms", "evidence", "--bt_baseline", "false", "--vote_k", "0",
            "--sft_problems", "3", "--rl_problems", "2", "--sft_near_misses", "1", "--rl_near_misses", "1",
            "--evidence_max_new_tokens", "72", "--sft_unanimous", "2", "--rl_temperature", "1.3")
    arm = run / "evidence"
    rows = read_jsonl(arm / "prep" / "pointwise" / "sft.jsonl")
    for row in rows:
        prompt, judgment = row["messages"][-2]["content"], row["messages"][-1]["content"]
        shared = prompt.split("' shared by ")[1].split(" candidates")[0]  # "k/n", as the verifier discloses it
        assert f"agreement :: {shared.replace('/', ' of ')}" in judgment and check(judgment)[0] == "consistent"
    # the near miss is judged in the place of the solution it was made from: both sides of its pair among 4
    assert json.loads((arm / "prep" / "pointwise" / "manifest.json").read_text())["near_misses"]["rows"] == 1
    assert all(" of 4\n" in r["messages"][-1]["content"] for r in rows)
    # two rows of problems whose four candidates agree (`sft_unanimous`): 4 of 4, kept out of the pairs file
    manifest = json.loads((arm / "prep" / "pointwise" / "manifest.json").read_text())
    assert manifest["unanimous"]["rows"] == 2 and manifest["sft_rows"] == len(rows)
    assert sum("agreement :: 4 of 4" in r["messages"][-1]["content"] for r in rows) == 2
    unanimous = {r["pair_id"] for r in rows if "agreement :: 4 of 4" in r["messages"][-1]["content"]}
    assert not unanimous & {p["id"] for p in read_jsonl(arm / "prep" / "pointwise" / "pairs.jsonl")}
    assert "(1 near misses, 2 unanimous)" in (run / "report.md").read_text()
    assert all(r["messages"][0]["content"].endswith(AGREEMENT_RULE) for r in rows)  # the default states its rule
    assert all(len(p["metadata"]["peers"]) == 4 for p in read_jsonl(arm / "prep" / "rl" / "pairs.jsonl"))
    assert json.loads((arm / "prep" / "rl" / "manifest.json").read_text())["temperature"] == 1.3
    assert json.loads((run / "report.json").read_text())["arms"]["evidence"]["stages"].keys() >= {"sft", "grpo"}
    # the arm's own judgment budget (the agreement line is longer), in GRPO and in SFT's max_length (TINY: 256 + 64)
    grpo = json.loads((arm / "grpo" / "patarm_config.json").read_text())["training"]
    sft = json.loads((arm / "sft" / "patarm_config.json").read_text())["training"]
    assert (grpo["max_completion_length"], sft["max_length"]) == (72, 256 + 72 + 16)


def test_the_plot_legend_says_what_the_evidence_arm_discloses():
    from patarm.demo.gsm8k.report import arm_label

    assert arm_label({"arguments": {"evidence_agreement": True}}, "evidence") == (
        "arithmetic check + answer agreement disclosed, reference not")
    assert arm_label({"arguments": {"evidence_agreement": True, "evidence_score_rule": True}}, "evidence") == (
        "arithmetic check + answer agreement (+ its score rule) disclosed, reference not")
    assert "agreement" not in arm_label({"arguments": {"evidence_agreement": False}}, "evidence")
    assert arm_label({}, "reference") == "reference mounted"
