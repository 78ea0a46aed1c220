"""The parser's tag contract and score validity, on hand-written outputs, plus a fuzz test."""

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from patarm.judge import load_template, parse_judgment
from patarm.judge.parse import MAX_ERRORS

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
    "<rubric>a</rubric><eval>ok<score>8</score>",                          # unclosed eval: score nested in it
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


# ---- top-level answers only (issue 11) ----

@pytest.mark.parametrize("text, parent", [
    ("<think>draft: <score>9</score></think><rubric>a</rubric><eval>ok</eval>", "think"),
    ("<rubric>a</rubric><eval>ok, so <score>9</score></eval>", "eval"),
    ("<rubric>1. a <score>9</score></rubric><eval>ok</eval>", "rubric"),
])
def test_score_only_inside_another_block_is_not_the_score(text, parent):
    j = parse_judgment(text)
    assert j.score is None and not j.tags_ok
    assert any("<score>" in e and f"<{parent}>" in e for e in j.errors), j.errors
    assert not any("parser error" in e for e in j.errors)


def test_top_level_score_wins_over_a_draft_in_think():
    j = parse_judgment("<think>maybe <score>2</score></think>" + GOOD)
    assert j.score == 8.0 and not j.tags_ok  # the nested draft is a tag error, the top-level score counts


@pytest.mark.parametrize("text, parent", [
    ("<think>I'd say <decision>A</decision></think><rubric>a</rubric><eval>e</eval>", "think"),
    ("<rubric>a</rubric><eval>e <decision>B</decision></eval>", "eval"),
])
def test_pairwise_decision_only_inside_another_block(text, parent):
    j = parse_judgment(text, load_template("pairwise"))
    assert j.decision is None and not j.tags_ok
    assert any("<decision>" in e and f"<{parent}>" in e for e in j.errors), j.errors


def test_pairwise_two_decisions_is_no_decision():
    t = load_template("pairwise")
    j = parse_judgment("<rubric>a</rubric><eval>e</eval><decision>A</decision><decision>B</decision>", t)
    assert j.decision is None and not j.tags_ok


@pytest.mark.parametrize("content", ["０９", "٧", "७", "𝟕", "١٠", "8\u0663", "\u30008", "৪.5", "+٣"])
def test_non_ascii_digits_are_not_scores(content):
    j = parse_judgment(f"<rubric>a</rubric><eval>e</eval><score>{content}</score>")
    assert j.score is None
    assert any("not a plain" in e for e in j.errors), j.errors


@pytest.mark.parametrize("content", ["Ａ", "\u3000A", "ｔｉｅ"])
def test_non_ascii_decisions_are_not_decisions(content):
    j = parse_judgment(f"<rubric>a</rubric><eval>e</eval><decision>{content}</decision>", load_template("pairwise"))
    assert j.decision is None


def test_error_list_is_capped():
    j = parse_judgment("<score>" * 150_000)  # ~1 MB
    assert len(j.errors) == MAX_ERRORS + 1
    assert j.errors[-1].startswith("… and ") and j.errors[-1].endswith(" more")
    assert int(j.errors[-1].split()[2]) + MAX_ERRORS > 150_000  # every error is counted
    assert j.score is None and any("score" in e for e in j.errors[:MAX_ERRORS])


def _top_level(text, tags=("think", "rubric", "eval", "score")):
    """Independent oracle: contents of the <tag>…</tag> blocks opened while no other block is open."""
    found, open_tag, start = [], None, 0
    for m in re.finditer(r"<(/?)(" + "|".join(tags) + r")>", text):
        if open_tag is None and not m.group(1):
            open_tag, start = m.group(2), m.end()
        elif open_tag == m.group(2) and m.group(1):
            found.append((open_tag, text[start:m.start()]))
            open_tag = None
    return found


TAGS = ["<think>", "</think>", "<rubric>", "</rubric>", "<eval>", "</eval>", "<score>", "</score>", "7", "x", "\n",
        "٧", "０", " ", "1", "."]


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.lists(st.sampled_from(TAGS)).map("".join)))
@example("<think><score>7</score></think>")
@example("<rubric>a</rubric><eval>e</eval><score>٧</score>")
@example("<score>" * 5000)
def test_never_raises(text):
    j = parse_judgment(text)
    assert j.score is None or 1 <= j.score <= 10
    assert isinstance(j.tags_ok, bool)
    assert len(j.errors) <= MAX_ERRORS + 1
    scores = [c for tag, c in _top_level(text) if tag == "score"]
    if j.score is not None:  # exactly one top-level <score> block, holding a plain ASCII decimal
        assert len(scores) == 1 and scores[0].strip().isascii()
        assert re.fullmatch(r"\s*[+-]?[0-9.]+\s*", scores[0]) and float(scores[0]) == j.score
    assert (j.errors == []) == (j.tags_ok and j.score is not None)  # errors agree with the result
