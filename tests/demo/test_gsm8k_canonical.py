"""The graded teacher's canonical spelling of numbers (`teacher_numbers: canonical`): one spelling per plain number,
the same checks and score as the numbers as written (no model is trained here)."""

import pytest

from patarm.demo.gsm8k.consistency import check
from patarm.demo.gsm8k.evaluate import judge_template
from patarm.demo.gsm8k.evidence import canonical_number
from patarm.demo.gsm8k.teacher import GradedTeacher, make_teacher
from patarm.judge import parse_judgment


@pytest.mark.parametrize("written, canonical", [
    ("5,600", "5600"), ("5600.00", "5600"), ("$5,600.50", "5600.5"), ("75.00", "75"), ("0.0", "0"), ("-0.0", "0"),
    ("-3.250", "-3.25"), ("007", "7"), ("0.5", "0.5"), ("12.", "12"), ("350000.0", "350000"),
    ("5.01", "5.01"), ("1/2", "1/2"), ("12 apples", "12 apples"), ("1,23", "1,23"), ("", ""), ("none", "none"),
])
def test_canonical_number_spells_a_plain_number_one_way(written, canonical):
    assert canonical_number(written) == canonical


def test_canonical_teacher_states_one_spelling_and_stays_consistent():
    question = "A farm sells 2,800 eggs a day. How many eggs in 2 days?"
    solution = "It sells 2800 * 2 = <<2800*2=5600.0>>5600.0 eggs.\nA: 5,600.00"
    as_written = GradedTeacher().judge(question, solution, "5,600", True)
    canonical = GradedTeacher("adaptive", "canonical").judge(question, solution, "5,600", True)
    assert "final answer :: 5,600.00" in as_written and "last step :: 5600.0" in as_written
    for line in ("final answer :: 5600", "reference answer :: 5600", "correct :: pass", "last step :: 5600",
                 "follows :: yes", "equals 5600"):
        assert line in canonical
    assert check(as_written) == check(canonical) == ("consistent", "")
    assert parse_judgment(as_written, judge_template()).score == parse_judgment(
        canonical, judge_template("adaptive")).score == 10  # the same checks, only the spelling differs
    with pytest.raises(ValueError, match="states numbers as written"):
        make_teacher("binary", "primary", "canonical")
    with pytest.raises(ValueError, match="numbers must be one of"):
        GradedTeacher(numbers="rounded")
