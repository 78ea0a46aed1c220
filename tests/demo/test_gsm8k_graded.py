"""The GSM8K recipe's graded verifier teacher, its evidence-verdict consistency checker, the evidence arm's prompt,
voting@k / adaptive voting, the ablation configs and the seeds mode (no model is trained here)."""

from pathlib import Path

import pytest

from patarm.demo.gsm8k import ablations, data, seeds
from patarm.demo.gsm8k.consistency import check, summarize
from patarm.demo.gsm8k.evaluate import judge_template
from patarm.demo.gsm8k.evidence import FIELDS, Evidence, gather, score_of
from patarm.demo.gsm8k.metrics import summarize_scores
from patarm.demo.gsm8k.prompts import ADAPTIVE_REQUEST, judge_prompt, skill_prompt
from patarm.demo.gsm8k.teacher import GradedTeacher, make_teacher
from patarm.demo.gsm8k.vote import adaptive_scores, voted_scores, voting_summary
from patarm.judge import parse_judgment

QUESTION = "Tom has 16 apples and buys 3 bags of 4 apples. He pays $2 per bag. How many apples does he have?"
RIGHT = "He buys 3 * 4 = <<3*4=12>>12 apples.\nHe has 16 + 12 = <<16+12=28>>28 apples.\nA: 28"
WRONG_STEP = "He buys 3 * 4 = <<3*4=13>>13 apples.\nHe has 16 + 13 = <<16+13=29>>29 apples.\nA: 29"
NOT_FOLLOWING = "He buys 3 * 4 = <<3*4=12>>12 apples.\nHe has 16 + 12 = <<16+12=28>>28 apples.\nA: 30"


def _e(correct, wrong=0, follows=True, unused=(), final="28"):
    return Evidence(final, None if correct is None else "28", correct, 2, wrong, "28", follows, tuple(unused))


@pytest.mark.parametrize("evidence, score", [
    (_e(True), 10), (_e(True, wrong=1), 9), (_e(True, 1, False, ("2",)), 7),
    (_e(False), 4), (_e(False, unused=("2",)), 3), (_e(False, 1, False, ("2",)), 1),
    (_e(None), 7), (_e(None, follows=False), 4), (_e(None, 1, False), 1), (_e(None, 1, False, ("2",)), 1),
    (_e(True, final=""), 1), (_e(None, follows=None), 7),
])
def test_graded_scale_by_hand(evidence, score):
    assert score_of(evidence) == score


def test_evidence_is_recomputed_from_the_solution():
    right, wrong, drift = (gather(QUESTION, s, "28") for s in (RIGHT, WRONG_STEP, NOT_FOLLOWING))
    assert (right.correct, right.steps, right.wrong, right.last, right.follows, right.unused) == (
        True,
        2,
        0,
        "28",
        True,
        ("2",),
    )
    assert (wrong.correct, wrong.wrong, wrong.follows) == (False, 1, True)  # 3*4=13 is wrong; 16+13=29 is right
    assert (drift.correct, drift.follows, drift.last) == (False, False, "28")
    hidden = gather(QUESTION, RIGHT, None)
    assert hidden.reference is None and hidden.correct is None and score_of(hidden) == 4  # "2" unused: one issue


@pytest.mark.parametrize("disclose", [True, False])
def test_graded_teacher_states_evidence_then_verdict_then_score(disclose):
    text = GradedTeacher().judge(QUESTION, NOT_FOLLOWING, "28", disclose)
    j = parse_judgment(text, judge_template())
    assert j.tags_ok and j.score == (2 if disclose else 1)
    lines = [line.split(" :: ")[0] for line in j.evaluation.strip().splitlines()]
    assert lines == list(FIELDS) and text.index("</eval>") < text.index("<score>")
    assert ("reference answer :: 28" if disclose else "reference answer :: not mounted") in text
    assert check(text) == ("consistent", "")


def test_adaptive_teacher_writes_a_sample_specific_rubric_first():
    text = GradedTeacher("adaptive").judge(QUESTION, RIGHT, "28", True)
    j = parse_judgment(text, judge_template("adaptive"))
    assert j.tags_ok and "16, 3, 4, 2" in j.rubric and "equals 28" in j.rubric and text.index("<rubric>") == 0
    assert j.score == 9 and check(text) == ("consistent", "")
    with pytest.raises(ValueError, match="no <rubric>"):
        make_teacher("binary", "adaptive")


@pytest.mark.parametrize(
    "text, status",
    [
        # the issue's example: both answers 8, yet fail and 2
        (
            "<eval>\nfinal answer :: 8\nreference answer :: 8\ncorrect :: fail\n</eval>\n<score>2</score>",
            "inconsistent",
        ),
        ("<eval>\nfinal answer :: 8\nreference answer :: 8\ncorrect :: pass\n</eval>\n<score>9</score>", "consistent"),
        (
            "<eval>\nfinal answer :: 8\nreference answer :: 8.0\ncorrect :: pass\n</eval>\n<score>2</score>",
            "inconsistent",
        ),
        (
            "<eval>\nfinal answer :: 8\nreference answer :: not mounted\ncorrect :: fail\n</eval>\n<score>2</score>",
            "consistent",
        ),
        ("<eval>\nfinal answer :: 8\ncorrect :: pass\n</eval>\n<score>9</score>", "incomplete"),
        ("<eval>\nfinal answer :: 8\nreference answer :: 8\ncorrect :: pass\n</eval>", "incomplete"),
    ],
)
def test_consistency_of_binary_judgments(text, status):
    assert check(text)[0] == status


def test_consistency_of_graded_judgments_catches_each_contradiction():
    good = GradedTeacher().judge(QUESTION, RIGHT, "28", True)  # 9: "2" unused
    assert check(good) == ("consistent", "")
    assert check(good.replace("<score>9<", "<score>10<"))[0] == "inconsistent"           # score off the scale
    assert check(good.replace("correct :: pass", "correct :: fail"))[0] == "inconsistent"  # verdict vs answers
    assert check(good.replace("follows :: yes", "follows :: no"))[0] == "inconsistent"     # follows vs last step
    assert check(good.replace("correct :: pass", "correct :: maybe"))[0] == "incomplete"
    hidden = GradedTeacher().judge(QUESTION, RIGHT, "28", False)
    assert check(hidden.replace("correct :: unknown", "correct :: pass"))[0] == "inconsistent"  # no reference stated
    s = summarize([good, good.replace("<score>9<", "<score>3<"), "nonsense"])
    assert (s["consistent"], s["inconsistent"], s["incomplete"]) == (1, 1, 1) and s["consistent_rate"] == 1 / 3


def test_teacher_on_the_real_pool(bench):
    """On the recipe's held-out problems: with the reference the graded teacher picks like Oracle@4, never ties a
    correct with an incorrect candidate at the top, keeps every pair through the δ > 2 filter, and every one of its
    judgments (with and without the reference) is consistent with its own evidence."""
    problems, _ = data.load_problems(bench / "gsm8k")
    heldout = data.split_problems(problems, 100, seed=0)[1]
    teacher = GradedTeacher()
    for disclose in (True, False):
        texts = [[teacher.judge(p.question, s, p.answer, disclose) for s in p.solutions] for p in heldout]
        records = [{"scores": [parse_judgment(t, judge_template()).score for t in row], "correct": p.correct,
                    "valid": [True] * 4} for row, p in zip(texts, heldout)]
        summary = summarize_scores(records)
        assert summarize([t for row in texts for t in row])["consistent_rate"] == 1.0
        if disclose:
            assert summary["top_tied_mixed"] == 0 and summary["pair_accuracy"] == 1.0
            assert summary["best_of_n"] == 100.0 * sum(any(p.correct) for p in heldout) / len(heldout)
            assert all(min(s for s, c in zip(r["scores"], r["correct"]) if c) -
                       max(s for s, c in zip(r["scores"], r["correct"]) if not c) > 2
                       for r in records if any(r["correct"]) and not all(r["correct"]))
        else:
            assert 0.35 < summary["best_of_n"] / 100 < 0.5  # the evidence-only rule: above random, below majority


def test_evidence_arm_discloses_the_arithmetic_check_not_the_reference():
    pair = data.make_pairs([data.Problem("gsm8k-0001", QUESTION, "28", ["a", "b"], [RIGHT, WRONG_STEP], [True, False])],
                           1, 0, False, "gsm8k-judge-graded", evidence=True)[0]
    text = skill_prompt(pair, pair.rejected, judge_template())[-1]["content"]
    assert "wrong steps :: fail :: 1 of 2" in text and "unused numbers :: fail :: 2" in text
    assert "reference-answer" not in text and "A: 28" not in text
    plain = judge_prompt(QUESTION, WRONG_STEP, "28", "gsm8k-judge-graded")[-1]["content"]
    assert "wrong steps ::" not in plain and "reference-answer" in plain
    assert ADAPTIVE_REQUEST in skill_prompt(pair, pair.chosen, judge_template("adaptive"))[-1]["content"]
    with pytest.raises(ValueError, match="arithmetic-check"):
        judge_prompt(QUESTION, RIGHT, None, "gsm8k-judge", evidence=True)


def test_voting_at_k_and_adaptive_voting_spend_calls_only_on_ties():
    samples = [[9, 9, 9], [9, 2, 2], [2, 2, 2], [None, None, None]]
    assert voted_scores(samples, 1) == [9, 9, 2, None] and voted_scores(samples, 3) == [9, 13 / 3, 2, None]
    assert adaptive_scores(samples, 3) == ([9, 5.5, 2, None], 6)  # the tied two get one more draw each
    assert adaptive_scores([[9, 9], [2, 2]], 2) == ([9, 2], 2)    # no tie: one call per candidate
    records = [{"correct": [True, False, False, False], "valid": [True] * 4, "sample_scores": samples}]
    v = voting_summary(records, 3)
    assert v["vote@1"]["best_of_n"] == 50.0 and v["vote@1"]["top_tied_mixed"] == 1 and v["vote@1"]["calls"] == 4
    assert v["vote@3"]["best_of_n"] == 100.0 and v["vote@3"]["calls"] == 12
    assert v["adaptive@3"]["best_of_n"] == 100.0 and v["adaptive@3"]["calls"] == 6


def test_recipe_arguments_check_arms_teacher_and_ablations():
    from patarm.demo.gsm8k.recipe import parse_args

    base = parse_args([])
    assert base.teacher == "graded" and base.skill == "gsm8k-judge-graded" and "evidence" in base.arms
    assert (base.teacher_numbers, base.teacher_issues_line, base.max_new_tokens) == ("canonical", True, 104)
    assert base.evidence_agreement and base.evidence_max_new_tokens == 112
    assert not parse_args(["--evidence_agreement", "false"]).evidence_agreement
    binary = ["--teacher", "binary", "--teacher_numbers", "as-written", "--teacher_issues_line", "false"]
    assert parse_args([*binary, "--arms", "reference"]).skill == "gsm8k-judge"
    config = str(Path(ablations.__file__).parents[1] / "configs" / "gsm8k-binary.yaml")
    assert parse_args(["--config", config]).teacher == "binary"
    with pytest.raises(ValueError, match="evidence arm needs teacher graded"):
        parse_args(binary)
    with pytest.raises(ValueError, match="add --teacher_numbers as-written --teacher_issues_line false"):
        parse_args(["--teacher", "binary", "--arms", "reference"])
    changed = {}
    for name in ablations.names():
        args = parse_args(["--ablation", name])
        assert args.arms == ["reference"] and args.run_dir.endswith(name) and args.seed == base.seed
        changed[name] = {k for k, v in vars(args).items() if v != getattr(parse_args(["--ablation", "baseline"]), k)}
    assert changed == {"baseline": set(), "f-constant": {"margin", "run_dir", "ablation"},
                       "label-reward": {"reward", "run_dir", "ablation"},
                       "sft-more": {"grpo_steps", "sft_epochs", "run_dir", "ablation"},
                       "rubric-adaptive": {"rubric_mode", "max_new_tokens", "run_dir", "ablation"},
                       "numbers-canonical": {"teacher_issues_line", "max_new_tokens", "run_dir", "ablation"},
                       "as-written": {"teacher_numbers", "teacher_issues_line", "max_new_tokens", "run_dir",
                                      "ablation"}}
    with pytest.raises(ValueError, match="issues-line.* default since 2026-12-06.*--ablation baseline"):
        parse_args(["--ablation", "issues-line"])  # it became the default: not run twice by --ablation all
    with pytest.raises(ValueError, match="teacher_numbers canonical .* needs teacher graded"):
        parse_args(["--teacher", "binary", "--arms", "reference", "--teacher_numbers", "canonical",
                    "--teacher_issues_line", "false"])
    with pytest.raises(ValueError, match="teacher_issues_line .* needs teacher graded"):
        parse_args(["--teacher", "binary", "--arms", "reference", "--teacher_numbers", "as-written"])
    with pytest.raises(ValueError, match="no such ablation"):
        parse_args(["--ablation", "nope"])
    with pytest.raises(ValueError, match="sft_epochs must be > 0"):
        parse_args(["--sft_epochs", "0"])
    assert parse_args(["--ablation", "sft-more"]).sft_epochs == 2.7  # the CPU time of RL set + GRPO-PAR


def _fake_report(seed: int, run_dir: str = "") -> dict:
    m = {"pair_accuracy": 0.5 + seed / 10, "best_of_n": 50.0 + seed, "top_tied_mixed": 0.1, "format_valid": 1.0,
         "consistency": {"consistent_rate": 1.0}}
    expected = {**m, "best_of_n": 60.0 + seed}
    verdict = {"verdicts": 8, "said_pass": 0.25, "accuracy": 0.5 + seed / 4, "correct_share": 0.5,
               "p_pass_auc": 0.7}
    sft = m | {"expected": expected, "verdict": verdict}
    return {"arms": {"reference": {"stages": {"sft": sft, "grpo": m}, "bt": m, "prep": {"sft": {"sft_rows": 8}}}},
            "seconds": 1.0}


def test_seeds_mode_and_ablation_table_without_training(tmp_path):
    from patarm.demo.gsm8k.recipe import parse_args

    args = parse_args(["--run_dir", str(tmp_path), "--seeds", "0", "1", "2", "--split_seed", "7"])
    seen = []

    def run_one(a):
        base = Path(a.run_dir) / "reference" / "eval" / "base.jsonl"
        seen.append((a.seed, a.split_seed, a.run_dir, a.seeds, base.is_file() and base.read_text()))
        if a.seed == 0:  # the first seed judges the base model; the others start from its judgments
            base.parent.mkdir(parents=True)
            base.write_text('{"problem": "p"}\n')
        return _fake_report(a.seed)

    result = seeds.run_seeds(args, run_one)
    assert [s[4] for s in seen] == [False, '{"problem": "p"}\n', '{"problem": "p"}\n']
    assert [s[:2] for s in seen] == [(0, 7), (1, 7), (2, 7)] and seen[1][2].endswith("seed-1") and seen[0][3] is None
    mean, se, values = result["summary"]["reference"]["grpo"]["best_of_n"]
    assert (mean, values) == (51.0, [50.0, 51.0, 52.0]) and abs(se - 1 / 3 ** 0.5) < 1e-12
    assert "51.00 ± 0.58" in (tmp_path / "report-seeds.md").read_text()
    # the verdict-probability scores of a stage are a judge of their own in the seeds' table
    assert result["summary"]["reference"]["sft, verdict probability"]["best_of_n"][2] == [60.0, 61.0, 62.0]
    assert "| sft, verdict probability | reference | " in (tmp_path / "report-seeds.md").read_text()
    # the verdict against the truth: its own table, only for stages that report it on every seed
    cells = result["verdicts"]["reference"]
    assert list(cells) == ["sft"] and {k: v[2] for k, v in cells["sft"].items()} == {
        "said_pass": [0.25] * 3, "accuracy": [0.5, 0.75, 1.0], "p_pass_auc": [0.7] * 3}
    assert "| sft | reference | 0.250 ± 0.000 | 0.750 ± 0.144 | 0.700 ± 0.000 |" in (
        tmp_path / "report-seeds.md").read_text()
    runs = []
    out = ablations.run_all(["--ablation", "all", "--run_dir", str(tmp_path / "abl")], parse_args,
                            lambda a: runs.append(a) or _fake_report(0))
    assert [a.ablation for a in runs] == ablations.names() and runs[1].run_dir == str(
        tmp_path / "abl" / runs[1].ablation
    )
    assert (
        out["rows"][0]["ablation"] == "baseline"
        and "| label-reward |" in (tmp_path / "abl" / "ablations.md").read_text()
    )


def test_the_recipe_flags_reach_the_stage_configs(tmp_path):
    """What run_arm passes to `patarm sft` / `patarm grpo` parses into the stages' dataclasses."""
    from patarm.demo.gsm8k.recipe import CONFIG_DIR
    from patarm.demo.gsm8k.stages import stage_args

    data_args, grpo_args, _ = stage_args("grpo", str(CONFIG_DIR / "gsm8k-grpo.yaml"), tmp_path, "--model_name_or_path",
                                         "x", "--max_steps", "40", "--max_prompt_length", "448",
                                         "--max_completion_length", "96", "--rubric_mode", "adaptive", "--margin",
                                         "constant", "--reward", "label")
    assert (data_args.rubric_mode, data_args.margin, data_args.reward) == ("adaptive", "constant", "label")
    assert (grpo_args.max_steps, grpo_args.max_completion_length) == (40, 96)
    # the KL experiment's stage config is the GRPO config with beta alone changed
    _, kl_args, _ = stage_args("grpo", str(CONFIG_DIR / "gsm8k-grpo-kl.yaml"), tmp_path, "--model_name_or_path", "x")
    plain_data, plain, _ = stage_args("grpo", str(CONFIG_DIR / "gsm8k-grpo-par.yaml"), tmp_path,
                                      "--model_name_or_path", "x")
    assert (kl_args.beta, plain.beta) == (0.04, 0.0)  # the KL experiment was measured on PAR alone
    assert {k for k, v in vars(kl_args).items() if v != getattr(plain, k)} - {"distributed_state"} == {"beta"}
    # the default: PAR alone (the default before 2026-12-04) with the skill's evidence check added, nothing else
    ev_data, ev_args, _ = stage_args("grpo", str(CONFIG_DIR / "gsm8k-grpo.yaml"), tmp_path, "--model_name_or_path", "x")
    assert {k for k, v in vars(ev_data).items() if v != getattr(plain_data, k)} == {"extra_rewards"}
    assert plain_data.extra_rewards in (None, [])
    assert ev_data.extra_rewards == ["patarm.demo.gsm8k.consistency:evidence_reward"]
    assert {k for k, v in vars(ev_args).items() if v != getattr(plain, k)} - {"distributed_state"} == set()
    sft = stage_args("sft", str(CONFIG_DIR / "gsm8k-sft.yaml"), tmp_path, "--model_name_or_path", "x",
                     "--max_length", "560", "--num_train_epochs", "2")
    assert any(getattr(a, "max_length", None) == 560 and getattr(a, "num_train_epochs", None) == 2 for a in sft)


def test_sft_rows_stating_follows_no_are_repeated_and_counted():
    """`follows_no_repeat`: the teacher's rare `follows :: no` rows (here the final answer 30 after a last step of
    28, and decimals dropped) appear that many times; the others once; the manifest counts both."""
    from patarm.data import Manifest
    from patarm.demo.gsm8k.recipe import parse_args
    from patarm.demo.gsm8k.stages import repeat_follows_no

    rounding = "Each gets 24 / 11 = <<24/11=2.1818>>2.1818 cookies.\nA: 2"
    texts = [GradedTeacher().judge(QUESTION, s, "28", True) for s in (RIGHT, WRONG_STEP, NOT_FOLLOWING, rounding)]
    rows = [{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": t}], "pair_id": str(k)}
            for k, t in enumerate(texts)]
    once, manifest = repeat_follows_no(rows, 1, Manifest()), Manifest()
    assert once == rows
    thrice = repeat_follows_no(rows, 3, manifest)
    assert [r["pair_id"] for r in thrice] == ["0", "1", "2", "3", "2", "3", "2", "3"]
    assert (manifest.extra["follows_no_rows"], manifest.extra["sft_rows"]) == (2, 8)
    with pytest.raises(ValueError, match="follows_no_repeat"):
        parse_args(["--follows_no_repeat", "0"])


def test_consistency_command_reads_eval_records(tmp_path, capsys):
    from patarm.demo.gsm8k.consistency import main
    from patarm.io import write_jsonl

    good = GradedTeacher().judge(QUESTION, RIGHT, "28", True)
    write_jsonl([{"problem": "gsm8k-0007", "texts": [good, good.replace("<score>9<", "<score>4<")]}],
                tmp_path / "grpo.jsonl")
    assert main([str(tmp_path / "grpo.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "1/2 consistent (0.500), 1 inconsistent, 0 incomplete" in out and "gsm8k-0007" not in out
    assert main(["--each", str(tmp_path / "grpo.jsonl")]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert listed == ["  gsm8k-0007 [1] inconsistent: score 4 but the stated evidence gives 9"]
    write_jsonl([{"problem": "gsm8k-0008", "texts": [good.replace("<score>9<", "<score>4<"),
                                                      good.replace("<score>9<", "<score>4<"),
                                                      good.replace("follows :: yes", "follows :: no"), good]}],
                tmp_path / "sft.jsonl")
    assert main(["--kinds", str(tmp_path / "sft.jsonl")]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert listed == ["      2  inconsistent: score 4 but the stated evidence gives 9",
                      "      1  inconsistent: follows :: no but last step …, final answer …"]
    assert main([]) == 2
    with pytest.raises(SystemExit) as exc:  # a missing file: one line, exit 2, no traceback
        main([str(tmp_path / "missing.jsonl")])
    assert exc.value.code == 2 and "missing.jsonl" in capsys.readouterr().err


def test_training_free_skill_baseline_breaks_ties_uniformly():
    from patarm.demo.gsm8k.metrics import skill_selection

    agree = data.Problem("gsm8k-0001", QUESTION, "28", list("abcd"), [RIGHT, WRONG_STEP, RIGHT, NOT_FOLLOWING],
                         [True, False, True, False])
    assert skill_selection([agree]) == 100.0  # answer agreement: the two 28s
    split = data.Problem("gsm8k-0002", QUESTION, "28", list("ab"), [NOT_FOLLOWING, RIGHT], [False, True])
    assert skill_selection([split]) == 50.0   # one answer each, every step right: a uniform pick, not index 0
    wrong = data.Problem("gsm8k-0003", QUESTION, "28", list("ab"), [WRONG_STEP, RIGHT], [False, True])
    assert skill_selection([wrong]) == 100.0  # the calculator check breaks the tie


def test_the_readout_scores_the_facts_a_judgment_states_not_its_own_verdict():
    from patarm.demo.gsm8k.consistency import readout, readout_records

    good = GradedTeacher().judge(QUESTION, RIGHT, "28", True)  # consistent, score 9
    assert readout(good) == 9.0
    # a judgment that states the right facts but concludes wrongly is read out from its facts
    assert readout(good.replace("correct :: pass", "correct :: fail").replace("<score>9<", "<score>3<")) == 9.0
    wrong = good.replace("reference answer :: 28", "reference answer :: 30")  # the stated answers now differ
    assert readout(wrong) == 3.0  # fail 4 − 1 issue (the unused number)
    assert readout(good.replace("wrong steps :: ", "steps wrong :: ")) is None  # a fact the scale needs is missing
    hidden = GradedTeacher().judge(QUESTION, RIGHT, "28", False)
    assert readout(hidden) == 4.0  # no reference: 7 − 3 × 1 issue
    records = readout_records([{"texts": [good, wrong, "nonsense"], "correct": [True, False, False],
                                "scores": [1.0, 9.0, 5.0], "valid": [True] * 3}])
    assert records[0]["scores"] == [9.0, 3.0, None] and records[0]["valid"] == [True, True, False]


def test_the_verdict_follows_the_two_answers_it_compares():
    """The teacher writes `correct` right after `final answer` and `reference answer` (FIELDS' order): there the
    SFT judge's verdict probability separates pairs (docs/gsm8k-skill.md, "The verdict in probability")."""
    from patarm.demo.gsm8k.evidence import eval_lines

    lines = eval_lines(gather(QUESTION, RIGHT, "28"))
    assert [line.split(" :: ")[0] for line in lines] == list(FIELDS)
    assert FIELDS[:3] == ("final answer", "reference answer", "correct")
    assert lines[2] == "correct :: pass"


def test_the_evidence_reward_holds_a_judgment_to_the_facts_it_states():
    from patarm.demo.gsm8k.consistency import evidence_reward
    from patarm.train.grpo import extra_reward_funcs

    good = GradedTeacher().judge(QUESTION, RIGHT, "28", True)
    says_fail = good.replace("correct :: pass", "correct :: fail")  # the stated answers are equal
    doubled = good.replace("follows ::", "last step :: 28\nfollows ::")  # consistent, but a field stated twice
    missing = "\n".join(line for line in good.splitlines() if not line.startswith("unused numbers"))
    chat = [{"role": "assistant", "content": good}]  # TRL's conversational completions
    assert "correct :: pass" in good and "last step :: 28" in good
    assert evidence_reward([good, says_fail, doubled, missing, chat], pair_id=["p"] * 5) == [0.0, -1.0, -1.0, -1.0,
                                                                                             0.0]
    assert extra_reward_funcs(["patarm.demo.gsm8k.consistency:evidence_reward"]) == [evidence_reward]
    with pytest.raises(ValueError, match="extra_rewards entry 'patarm.demo.gsm8k.consistency:nope' is not an"):
        extra_reward_funcs(["patarm.demo.gsm8k.consistency:nope"])
    with pytest.raises(ValueError, match="is not a function"):
        extra_reward_funcs(["patarm.demo.gsm8k.consistency:FIELDS"])


def test_the_base_row_names_the_base_model():
    """The report's base row says which model was judged: SmolLM2 by default (its spec or its GGUF), else `--model`."""
    from patarm.demo.gsm8k.report import stage_names

    def name(model):
        return stage_names({"arguments": {"model": model}})["base"]

    assert name("smollm2") == name("gguf:/tmp/SmolLM2-135M-Instruct.Q4_1.gguf") == "base (SmolLM2-135M-Instruct)"
    assert name("/models/Qwen3-1.7B") == "base (Qwen3-1.7B)" and name("tiny") == "base (tiny)"
    assert stage_names({"arguments": {"model": "tiny", "reward": "label"}})["grpo"] == "SFT + GRPO (label reward)"
