"""The graded teacher's issues line (`teacher_issues_line`, the default since 2026-12-06): the count of issues stated
before the score, and the consistency checker holding a judgment to it (no model is trained here)."""

import pytest

from patarm.demo.gsm8k.consistency import check, readout
from patarm.demo.gsm8k.evaluate import judge_template
from patarm.demo.gsm8k.evidence import FIELDS, ISSUES
from patarm.demo.gsm8k.teacher import GradedTeacher, make_teacher
from patarm.judge import parse_judgment

QUESTION = "Tom has 16 apples and buys 3 bags of 4 apples. He pays $2 per bag. How many apples does he have?"
# 3*4=13 is a wrong step, the answer 30 is not the last step's 29, and "2" is never used: three issues
THREE_ISSUES = "He buys 3 * 4 = <<3*4=13>>13 apples.\nHe has 16 + 13 = <<16+13=29>>29 apples.\nA: 30"
RIGHT = "He pays 2 a bag. He buys 3 * 4 = <<3*4=12>>12 apples.\nHe has 16 + 12 = <<16+12=28>>28 apples.\nA: 28"


@pytest.mark.parametrize("response, issues, score", [(THREE_ISSUES, 3, 1), (RIGHT, 0, 10)])
def test_the_teacher_states_the_count_last_and_the_same_score(response, issues, score):
    plain = GradedTeacher().judge(QUESTION, response, "28", True)
    text = GradedTeacher(issues_line=True).judge(QUESTION, response, "28", True)
    j = parse_judgment(text, judge_template())
    assert [line.split(" :: ")[0] for line in j.evaluation.strip().splitlines()] == [*FIELDS, ISSUES]
    assert f"{ISSUES} :: {issues}\n</eval>" in text and text.replace(f"\n{ISSUES} :: {issues}", "") == plain
    assert j.score == parse_judgment(plain, judge_template()).score == score
    assert check(text) == ("consistent", "") and readout(text) == score


def test_a_count_that_is_not_the_stated_issues_is_inconsistent():
    text = GradedTeacher(issues_line=True).judge(QUESTION, THREE_ISSUES, "28", True)
    miscounted = text.replace(f"{ISSUES} :: 3", f"{ISSUES} :: 2")
    assert check(miscounted) == ("inconsistent", "issues :: 2 but the stated evidence has 3")
    # the seed-0 slip the line is for: `follows :: no` stated, the score written as if `yes`
    slip = text.replace("<score>1</score>", "<score>2</score>").replace(f"{ISSUES} :: 3", f"{ISSUES} :: 2")
    assert check(slip)[0] == "inconsistent"
    assert readout(miscounted) == 1  # the readout recomputes from the facts, whatever the count says


def test_the_binary_teacher_counts_no_issues():
    with pytest.raises(ValueError, match="counts no issues"):
        make_teacher("binary", issues_line=True)
    assert make_teacher("graded", issues_line=True).sampling()["issues_line"] is True
