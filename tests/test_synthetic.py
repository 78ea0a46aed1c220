"""The bundled synthetic instruction-following task: verifier, pair generator, teacher, demo file."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from patarm.data.schema import PreferencePair
from patarm.demo.synthetic import (
    CONSTRAINT_KINDS,
    DEMO_PATH,
    Constraint,
    check,
    constraint_of,
    make_pairs,
    teacher_judgment,
    write_demo_pairs,
)

N = 300


@pytest.fixture(scope="module")
def pairs() -> list[PreferencePair]:
    return make_pairs(N, seed=0)


def test_chosen_passes_and_rejected_fails_for_every_kind(pairs):
    seen = Counter()
    for p in pairs:
        c = constraint_of(p)
        seen[c.kind] += 1
        assert check(c, p.chosen).passed, (p.id, p.chosen)
        assert not check(c, p.rejected).passed, (p.id, p.rejected)
        assert p.chosen != p.rejected
        assert c.describe() in p.question  # the judge sees the constraint in the prompt
    assert set(seen) == set(CONSTRAINT_KINDS)


def test_record_fields_and_ids(pairs):
    for i, p in enumerate(pairs):
        assert p.id == f"synth-if-0-{i}"
        assert p.domain == "instruction-following" and p.source == "synthetic-if"
        assert p.prompt == [{"role": "user", "content": p.question}]
        assert Constraint.from_dict(json.loads(json.dumps(p.metadata["constraint"]))) == constraint_of(p)
        assert PreferencePair.from_dict(p.to_dict()) == p


def test_deterministic_by_seed():
    a, b = make_pairs(40, seed=7), make_pairs(40, seed=7)
    assert [p.to_dict() for p in a] == [p.to_dict() for p in b]
    assert [p.to_dict() for p in make_pairs(15, seed=7)] == [p.to_dict() for p in a[:15]]
    assert [p.chosen for p in make_pairs(40, seed=8)] != [p.chosen for p in a]


def test_kinds_balanced_and_selectable(pairs):
    counts = Counter(p.metadata["constraint"]["kind"] for p in pairs)
    assert set(counts) == set(CONSTRAINT_KINDS) and max(counts.values()) - min(counts.values()) <= 1
    counts = Counter(p.metadata["constraint"]["kind"] for p in make_pairs(7, seed=1, kinds=["word_count", "uppercase"]))
    assert sorted(counts.values()) == [3, 4] and set(counts) == {"word_count", "uppercase"}
    with pytest.raises(ValueError):
        make_pairs(3, kinds=["nope"])


def test_whole_share_sets_how_often_a_case_pair_is_rejected_wholly_in_the_other_case():
    def whole_rate(share: float) -> float:
        case = make_pairs(400, seed=2, kinds=("lowercase", "uppercase"), whole_share=share)
        assert all(check(constraint_of(p), p.chosen).passed and not check(constraint_of(p), p.rejected).passed
                   for p in case)
        return sum(p.rejected in (p.chosen.upper(), p.chosen.lower()) for p in case) / len(case)

    assert whole_rate(0.0) == 0.0 and whole_rate(1.0) == 1.0
    assert 0.4 < whole_rate(0.5) < 0.6 and 0.05 < whole_rate(0.1) < 0.16
    default = make_pairs(50, seed=2)
    assert [p.to_dict() for p in make_pairs(50, seed=2, whole_share=0.5)] == [p.to_dict() for p in default]
    with pytest.raises(ValueError, match="whole_share"):
        make_pairs(3, whole_share=1.5)


def test_rejected_is_a_minimal_violation(pairs):
    for p in pairs:
        c, ch, rj = constraint_of(p), p.chosen.split(), p.rejected.split()
        if c.kind == "word_count":
            assert 1 <= abs(len(ch) - len(rj)) <= 2
        elif c.kind in ("lowercase", "uppercase") and p.rejected in (p.chosen.upper(), p.chosen.lower()):
            pass  # the whole response in the other case: well-formed, but not what was asked
        else:
            assert len(ch) == len(rj) and sum(a != b for a, b in zip(ch, rj)) == 1, (p.chosen, p.rejected)
        assert 4 <= len(ch) <= 12 and 4 <= len(rj) <= 12


def test_observations_on_handwritten_responses():
    cases = [
        (Constraint("word_count", 6), "the sea is blue and calm", "word count: 6", True),
        (Constraint("word_count", 6), "the sea is blue and very calm", "word count: 7", False),
        (Constraint("ends_with", "ship"), "we sail on the old ship.", "last word: ship", True),
        (Constraint("ends_with", "ship"), "we sail on the old boat", "last word: boat", False),
        (Constraint("starts_with", "today"), "Today the sky is gray", "first word: today", True),
        (Constraint("starts_with", "today"), "now the sky is gray", "first word: now", False),
        (Constraint("lowercase"), "a calm sea", "word not in lowercase: none", True),
        (Constraint("lowercase"), "a Calm Sea", "word not in lowercase: Calm", False),
        (Constraint("lowercase"), "A CALM SEA", "word not in lowercase: A", False),
        (Constraint("uppercase"), "A CALM SEA", "word not in uppercase: none", True),
        (Constraint("uppercase"), "a calm sea", "word not in uppercase: a", False),
        (Constraint("no_letter_e"), "a calm sky", "word with letter e: none", True),
        (Constraint("no_letter_e"), "the Eerie sea", "word with letter e: the", False),
        (Constraint("avoid_letter", "o"), "a calm sky", "word with letter o: none", True),
        (Constraint("avoid_letter", "a"), "the calm sky", "word with letter a: calm", False),
        (Constraint("starts_with", "today"), "", "first word: (none)", False),
    ]
    for c, response, observation, passed in cases:
        ev = check(c, response)
        assert (ev.observation, ev.passed) == (observation, passed), (c, response)
        assert ev.criterion == c.criterion()
    assert check(Constraint("word_count", 6), "x").criterion == "The response has exactly 6 words."
    assert Constraint("word_count", 6).describe() == "Answer in exactly 6 words."


def test_constraint_validation():
    for bad in [("shout", None), ("word_count", "6"), ("word_count", 0), ("ends_with", None)]:
        with pytest.raises(ValueError):
            Constraint(*bad)


TAGS = re.compile(
    r"^<rubric>\n1\. (.+)\n</rubric>\n<eval>\n(.+)\. (The constraint is (satisfied|violated)\.)\n</eval>\n"
    r"<score>(\d+)</score>$"
)


def test_teacher_text_contract_and_score_gap(pairs):
    rng = random.Random(0)
    for p in pairs[:60]:
        c = constraint_of(p)
        good, bad = (teacher_judgment(c, r, rng=rng) for r in (p.chosen, p.rejected))
        mg, mb = TAGS.match(good), TAGS.match(bad)
        assert mg and mb, (good, bad)
        for m, r in ((mg, p.chosen), (mb, p.rejected)):
            ev = check(c, r)
            assert m.group(1) == ev.criterion and m.group(2) == ev.observation  # evidence first
            assert 1 <= int(m.group(5)) <= 10
            for tag in ("<rubric>", "</rubric>", "<eval>", "</eval>", "<score>", "</score>"):
                assert (good if r == p.chosen else bad).count(tag) == 1
        assert mg.group(4) == "satisfied" and mb.group(4) == "violated"
        assert int(mg.group(5)) - int(mb.group(5)) > 2
    c = constraint_of(pairs[0])
    assert teacher_judgment(c, pairs[0].chosen).endswith("<score>9</score>")
    assert teacher_judgment(c, pairs[0].rejected).endswith("<score>2</score>")


def test_teacher_primary_mode_and_score_range(pairs):
    c = constraint_of(pairs[0])
    text = teacher_judgment(c, pairs[0].chosen, rubric_mode="primary")
    assert "<rubric>" not in text and text.startswith("<eval>\n") and text.endswith("<score>9</score>")
    assert teacher_judgment(c, pairs[0].chosen, score_range=(0, 100)).endswith("<score>89</score>")
    with pytest.raises(ValueError):
        teacher_judgment(c, pairs[0].chosen, rubric_mode="fancy")


def test_no_constant_token_separates_chosen_from_rejected(pairs):
    def words(texts):
        return Counter(w.lower() for t in texts for w in t.split())

    chosen, rejected = words(p.chosen for p in pairs), words(p.rejected for p in pairs)
    # The two sides use (almost) the same vocabulary: case-folded word sets overlap heavily, and
    # the words seen on one side only are rare sampling accidents, not markers.
    jaccard = len(set(chosen) & set(rejected)) / len(set(chosen) | set(rejected))
    assert jaccard > 0.95, jaccard
    one_sided = sum(chosen[w] for w in set(chosen) - set(rejected))
    one_sided += sum(rejected[w] for w in set(rejected) - set(chosen))
    assert one_sided <= 5, one_sided
    # No marker token: no word occurs in (nearly) every chosen or every rejected response.
    for side in ([p.chosen for p in pairs], [p.rejected for p in pairs]):
        doc_freq = Counter(w for t in side for w in set(t.lower().split()))
        assert max(doc_freq.values()) < 0.6 * len(side)
    # Lengths: same ranges and near-equal means on both sides.
    lc, lr = [len(p.chosen.split()) for p in pairs], [len(p.rejected.split()) for p in pairs]
    assert (min(lc), max(lc)) == (min(lr), max(lr))
    assert abs(sum(lc) / len(lc) - sum(lr) / len(lr)) < 0.5
    # Sentence-case capitals appear on both sides, so a leading capital says nothing by itself.
    assert any(p.chosen[0].isupper() for p in pairs if constraint_of(p).kind != "uppercase")
    assert any(p.rejected[0].isupper() for p in pairs if constraint_of(p).kind == "lowercase")


def test_shipped_demo_file_matches_generator(tmp_path: Path):
    out = tmp_path / "demo.jsonl"
    pairs = write_demo_pairs(out)
    assert len(pairs) == 48
    assert DEMO_PATH.read_bytes() == out.read_bytes()
    rows = [PreferencePair.from_dict(json.loads(line)) for line in DEMO_PATH.read_text().splitlines()]
    assert [r.id for r in rows] == [f"synth-if-1234-{i}" for i in range(48)]
