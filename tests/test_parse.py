"""The parser's tag contract and score validity, on hand-written outputs, plus a fuzz test."""

import pytest
from hypothesis import given, settings, strategies as st

from patarm.judge import load_template, parse_judgment

GOOD = "<rubric>\n1. Correct answer\n- Shows work\n</rubric>\n<eval>The answer 4 is right.</eval>\n<score>8</score>"


def test_well_formed_adaptive_output():
    j = parse_judgment(GOOD)
    assert j.tags_ok and j.errors == []
    assert j.score == 8.0
    assert j.criteria == ["Correct answer", "Shows work"]
    assert j.evaluation == "The answer 4 is right."


def test_optional_think_before_rubric():
    j = parse_judgment("<think>let me see</think>\n" + GOOD)
    assert j.tags_ok and j.think == "let me see" and j.score == 8.0


@pytest.mark.parametrize("text, why", [
    ("<eval>ok</eval><score>8</score>", "missing rubric"),
    ("<rubric>a</rubric><eval>ok<score>8</score>", "unclosed eval"),
    ("<rubric>a</rubric><rubric>b</rubric><eval>ok</eval><score>8</score>", "duplicated rubric"),
    ("<eval>ok</eval><rubric>a</rubric><score>8</score>", "rubric after eval"),
    ("<rubric>a</rubric><score>8</score><eval>ok</eval>", "score before eval"),
    ("<rubric>a</rubric><eval>ok <rubric>x</rubric></eval><score>8</score>", "nested rubric"),
    ("<rubric>a</rubric></think><eval>ok</eval><score>8</score>", "stray closing tag"),
])
def test_bad_tags_keep_a_valid_score(text, why):
    j = parse_judgment(text)
    assert not j.tags_ok, why
    assert j.score == 8.0, why  # wrong tags, valid score: PAR still applies, penalty is -0.5


@pytest.mark.parametrize("text", [
    "<rubric>a</rubric><eval>ok</eval>",                                   # no score
    "<rubric>a</rubric><eval>ok</eval><score>8</score><score>9</score>",   # two scores
    "<rubric>a</rubric><eval>ok</eval><score>11</score>",                  # above range
    "<rubric>a</rubric><eval>ok</eval><score>0</score>",                   # below range
    "<rubric>a</rubric><eval>ok</eval><score>8/10</score>",                # not a plain number
    "<rubric>a</rubric><eval>ok</eval><score>eight</score>",
    "<rubric>a</rubric><eval>ok</eval><score></score>",
    "<rubric>a</rubric><eval>ok</eval><score>8",                           # unclosed
    "<rubric>a</rubric><eval>ok</eval></score>8<score>",                   # reversed
    "<rubric>a</rubric><eval>ok</eval><score>1e1</score>",
    "<rubric>a</rubric><eval>ok</eval><score>nan</score>",
])
def test_invalid_scores(text):
    assert parse_judgment(text).score is None


@pytest.mark.parametrize("content, value", [(" 7 ", 7.0), ("7.5", 7.5), ("\n10\n", 10.0), ("1", 1.0), ("+3", 3.0)])
def test_plain_decimal_scores(content, value):
    assert parse_judgment(f"<rubric>a</rubric><eval>e</eval><score>{content}</score>").score == value


def test_primary_mode_does_not_require_rubric():
    t = load_template(rubric_mode="primary")
    j = parse_judgment("<eval>ok</eval><score>3</score>", t)
    assert j.tags_ok and j.score == 3.0


def test_configurable_score_range():
    t = load_template(score_range=(0, 100))
    assert parse_judgment("<rubric>a</rubric><eval>e</eval><score>55</score>", t).score == 55.0
    assert parse_judgment("<rubric>a</rubric><eval>e</eval><score>101</score>", t).score is None


def test_pairwise_decision():
    t = load_template("pairwise")
    assert parse_judgment("<rubric>a</rubric><eval>e</eval><decision> B </decision>", t).decision == "B"
    assert parse_judgment("<rubric>a</rubric><eval>e</eval><decision>Tie</decision>", t).decision == "tie"
    bad = parse_judgment("<rubric>a</rubric><eval>e</eval><decision>both</decision>", t)
    assert bad.decision is None and bad.tags_ok


@pytest.mark.parametrize("value", [None, 3, b"<score>5</score>", ["<score>5</score>"]])
def test_non_text_input(value):
    j = parse_judgment(value)
    assert j.score is None and not j.tags_ok


TAGS = ["<think>", "</think>", "<rubric>", "</rubric>", "<eval>", "</eval>", "<score>", "</score>", "7", "x", "\n"]


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.lists(st.sampled_from(TAGS)).map("".join)))
def test_never_raises(text):
    j = parse_judgment(text)
    assert j.score is None or 1 <= j.score <= 10
    assert isinstance(j.tags_ok, bool)
