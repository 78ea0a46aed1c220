"""The checker-backed teacher of the IFEval recipe's judge: a judgment written from the IFEval checkers' verdicts.

The prompt's constraints are the primary rubric: `<eval>` has one line per constraint, in the prompt's order —
the constraint (its registry id, without the group), the evidence the checker counts where a program can state
it (`212 words; needs at least 300`, `3 commas`, `case: mixed`), and its strict verdict — then how many were
followed; `<score>` (1-10) follows from that share alone: 1 + 9 × followed / constraints, rounded half up.
The evidence comes first because a small judge learns a verdict it can derive from what it has just written
(measured on this project's tiny judges: an `<eval>` without evidence taught one nothing).

With the judge's prompt stating the response's counts (`ConstraintTeacher(counts=True)`, the `pointwise-counts`
template: `patarm.judge.facts`), the evidence is what that block states, in its words (`17 words; needs at least
300`, `highlights 2; needs at least 3`, `title yes`, `P.S. no`), so that the judge copies a number it was given
and compares it with the request; the verdict is still the checker's.

`ConstraintTeacher` is a backend (`kind: patarm.demo.ifeval.teacher:ConstraintTeacher`): it reads the pair and
side of each prompt from `metadata`, as `patarm.prep.corpus` passes them; deterministic, so never cached.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from patarm.backends.base import OnResult
from patarm.data.schema import Messages


def score_of(n_followed: int, n_constraints: int) -> int:
    """1 + 9 × the share followed, rounded half up: all → 10, none → 1, 1 of 2 → 6, 2 of 3 → 7."""
    return int(1 + 9 * n_followed / n_constraints + 0.5)


def _relation(kwargs: dict, count_key: str, relation_key: str = "relation") -> str:
    return f"needs {kwargs.get(relation_key, '')} {kwargs.get(count_key, '')}".replace("  ", " ")


def _case(text: str) -> str:
    letters = [c for c in text if c.isalpha()]
    if letters and all(c.islower() for c in letters):
        return "case: lower"
    if letters and all(c.isupper() for c in letters):
        return "case: upper"
    return "case: mixed"


_PARAGRAPHS = re.compile(r"\s?\*\*\*\s?")
_BULLETS = re.compile(r"^\s*[*-][^*].*$", re.M)
_HIGHLIGHTS = re.compile(r"\*[^\n*]+\*")


def _count_word(word: str, text: str) -> int:
    return len(re.findall(r"\b" + re.escape(word) + r"\b", text, re.I))


def evidence(iid: str, kwargs: dict[str, Any], response: str) -> str | None:
    """What the checker of `iid` counts, stated for the judge to read (None for the yes/no checks: a title, a
    postscript, JSON, ...). Close to the checker's own counting; the verdict is always the checker's."""
    from if_verifiable.ifeval import instructions_util as util

    k, r = kwargs, response
    if iid == "length_constraints:number_words":
        return f"{util.count_words(r)} words; " + _relation(k, "num_words")
    if iid == "length_constraints:number_sentences":
        return f"{util.count_sentences(r)} sentences; " + _relation(k, "num_sentences")
    if iid == "length_constraints:number_paragraphs":
        return f"{len(_PARAGRAPHS.split(r))} parts split by ***; needs {k.get('num_paragraphs')}"
    if iid == "punctuation:no_comma":
        return f"{r.count(',')} commas"
    if iid in ("change_case:english_lowercase", "change_case:english_capital"):
        return _case(r)
    if iid == "keywords:letter_frequency":
        letter = str(k.get("letter", "")).lower()
        return f"letter {letter}: {r.lower().count(letter)} times; " + _relation(k, "let_frequency", "let_relation")
    if iid == "keywords:frequency":
        return f"{k.get('keyword')}: {_count_word(str(k.get('keyword')), r)} times; " + _relation(k, "frequency")
    if iid == "keywords:existence":
        return "missing: " + (", ".join(w for w in k.get("keywords", []) if not _count_word(w, r)) or "none")
    if iid == "keywords:forbidden_words":
        return "used: " + (", ".join(w for w in k.get("forbidden_words", []) if _count_word(w, r)) or "none")
    if iid == "detectable_format:number_bullet_lists":
        return f"{len(_BULLETS.findall(r))} bullets; needs {k.get('num_bullets')}"
    if iid == "detectable_format:number_highlighted_sections":
        return f"{len(_HIGHLIGHTS.findall(r))} highlights; needs at least {k.get('num_highlights')}"
    return None


def counted_evidence(iid: str, kwargs: dict[str, Any], c: Any, response: str) -> str | None:
    """The evidence of `iid` in the words of the `<counts>` block `c` (a `patarm.judge.facts.TextCounts`) states;
    the constraints it does not count (keywords, letters: what the request names) as `evidence` states them."""
    from patarm.judge.facts import yes_no as _yes

    k = kwargs
    counted = {
        "length_constraints:number_words": lambda: f"words {c.words}; " + _relation(k, "num_words"),
        "length_constraints:number_sentences": lambda: f"sentences {c.sentences}; " + _relation(k, "num_sentences"),
        "length_constraints:number_paragraphs": lambda: f"*** paragraphs {c.star_paragraphs}"
        + (" (one empty)" if c.star_empty_inside else "") + f"; needs {k.get('num_paragraphs')}",
        "length_constraints:nth_paragraph_first_word": lambda: f"blank-line paragraphs {c.blank_line_paragraphs}; "
        f"needs {k.get('num_paragraphs')}",
        "punctuation:no_comma": lambda: f"commas {c.commas}",
        "change_case:english_lowercase": lambda: f"case {c.case}",
        "change_case:english_capital": lambda: f"case {c.case}",
        "change_case:capital_word_frequency": lambda: f"capital words {c.capital_words}; "
        + _relation(k, "capital_frequency", "capital_relation"),
        "detectable_format:number_bullet_lists": lambda: f"bullets {c.bullets}; needs {k.get('num_bullets')}",
        "detectable_format:number_highlighted_sections": lambda: f"highlights {c.highlights}; needs at least "
        f"{k.get('num_highlights')}",
        "detectable_format:multiple_sections": lambda: f"{k.get('section_spliter')} markers "
        f"{c.upper_section_markers if k.get('section_spliter') == 'SECTION' else c.section_markers}; needs "
        f"{k.get('num_sections')}",
        "detectable_content:number_placeholders": lambda: f"placeholders {c.placeholders}; needs at least "
        f"{k.get('num_placeholders')}",
        "detectable_content:postscript": lambda: (f"P.P.S {_yes(c.pps)}" if k.get("postscript_marker") == "P.P.S"
                                                  else f"P.S. {_yes(c.ps)}"),
        "detectable_format:title": lambda: f"title {_yes(c.title)}",
        "startend:quotation": lambda: f"quoted {_yes(c.quoted)}",
        "detectable_format:json_format": lambda: f"JSON {_yes(c.json)}",
        "combination:two_responses": lambda: f"****** parts {c.six_star_parts}",
    }
    return counted[iid]() if iid in counted else evidence(iid, kwargs, response)


def judgment_text(row: dict[str, Any], response: str, counts: bool = False) -> str:
    """The teacher's judgment of `response` against the IFEval input `row`; with `counts`, its evidence in the words
    of the `<counts>` block the judge's prompt states (`counted_evidence`)."""
    from patarm.demo.ifeval.pairs import followed

    verdicts = followed(row, response)
    counted = None
    if counts:
        from patarm.judge.facts import text_counts

        counted = text_counts(response)
    lines = []
    for iid, kwargs, ok in zip(row["instruction_id_list"], row["kwargs"], verdicts):
        stated = (evidence(iid, kwargs or {}, response) if counted is None
                  else counted_evidence(iid, kwargs or {}, counted, response))
        name = iid.split(":", 1)[1]
        lines.append(f"{name} :: {stated} :: {'pass' if ok else 'fail'}" if stated else
                     f"{name} :: {'pass' if ok else 'fail'}")
    n = sum(verdicts)
    lines.append(f"followed :: {n} of {len(verdicts)}")
    return "<eval>\n" + "\n".join(lines) + f"\n</eval>\n<score>{score_of(n, len(verdicts))}</score>"


class ConstraintTeacher:
    """Pointwise judgments of responses to verifiable prompts from the IFEval checkers."""

    model_id = "ifeval-checker-teacher(if-verifiable strict)"

    def __init__(self, counts: bool = False):
        self.counts = counts
        if counts:
            self.model_id += "+counts"

    def sampling(self) -> dict[str, Any]:
        return {"scale": "1 + 9 x share of constraints followed (strict)",
                "evidence": "the <counts> block's words" if self.counts else "counted by the teacher"}

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None, on_result: OnResult | None = None) -> list[list[str]]:
        from patarm.demo.teacher import pair_sides

        sides = pair_sides(metadata, len(prompts), "ConstraintTeacher", "ifeval", "a pair of IFEval input rows",
                           "patarm.demo.ifeval.pairs.label_pairs")
        return [[judgment_text(pair.metadata["ifeval"], getattr(pair, side), self.counts)] * num_samples
                for pair, side in sides]
