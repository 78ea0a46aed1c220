"""Facts a program states about a response, disclosed to the judge in its prompt by a template that asks for them.

A template's `facts: [text-counts]` puts a `<counts>` block after the response (its `{facts}` field): what a
program counts in the response — words, sentences, `***` paragraphs, highlights, bullets, commas, … — counted as
the IFEval checkers count them (`if_verifiable`'s own word and sentence counters and the checkers' patterns), but
never a verdict: the judge still reads the request, finds its constraints and compares. Skill-RM's verifier
resources, for a judge too small to count: a 135M judge does not count words, sentences or highlighted spans in a
256-token answer, and its belief about those constraints did not separate followed from not followed (IFEval
recipe, docs/downstream.md); with the counts it needs to copy and compare.

The counts are of the whole response, before the prompt is cut to the judge's window (a cut response still has
its true length stated). A response longer than `MAX_CHARS` is not counted (the block says so): counting is
linear in its length, but sentence splitting is slow enough that a server should not do it for megabytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

MAX_CHARS = 20_000

_STAR_PARAGRAPHS = re.compile(r"\s?\*\*\*\s?")  # length_constraints:number_paragraphs
_HIGHLIGHT = re.compile(r"\*[^\n\*]*\*")  # detectable_format:number_highlighted_sections
_DOUBLE_HIGHLIGHT = re.compile(r"\*\*[^\n\*]*\*\*")
_BULLET_STAR = re.compile(r"^\s*\*[^\*].*$", re.M)  # detectable_format:number_bullet_lists
_BULLET_DASH = re.compile(r"^\s*-.*$", re.M)
_PLACEHOLDER = re.compile(r"\[.*?\]")  # detectable_content:number_placeholders
_TITLE = re.compile(r"<<[^\n]+>>")  # detectable_format:title
_PS = re.compile(r"\s*p\.\s?s\..*$", re.M)  # detectable_content:postscript, on the lowered text
_PPS = re.compile(r"\s*p\.\s?p\.\s?s.*$", re.M)


@dataclass(frozen=True)
class TextCounts:
    """What `text_counts` counts; each field as the IFEval checker named beside it counts it."""

    words: int  # number_words (instructions_util.count_words)
    sentences: int  # number_sentences (instructions_util.count_sentences)
    commas: int  # no_comma
    capital_words: int  # capital_word_frequency (nltk.word_tokenize, str.isupper)
    case: str  # english_lowercase / english_capital: "lower", "upper" or "mixed" (str.islower / str.isupper)
    star_paragraphs: int  # number_paragraphs: parts split by ***, the empty first / last not counted
    star_empty_inside: bool  # an empty part between two *** (number_paragraphs fails then, whatever the count)
    blank_line_paragraphs: int  # nth_paragraph_first_word: parts split by a blank line
    six_star_parts: int  # two_responses: non-empty parts split by ******
    highlights: int  # number_highlighted_sections: *span* and **span**, empty ones not counted
    bullets: int  # number_bullet_lists: lines starting with `* ` or `-`
    placeholders: int  # number_placeholders: [anything]
    section_markers: int  # multiple_sections with "Section": `Section 1`, ...
    upper_section_markers: int  # multiple_sections with "SECTION"
    title: bool  # title: a non-empty <<...>> on one line
    ps: bool  # postscript "P.S."
    pps: bool  # postscript "P.P.S"
    quoted: bool  # quotation: wrapped in double quotes
    json: bool  # json_format: parses as JSON (a ``` fence stripped)


def _with_punkt(count, text: str, what: str) -> int:
    """`count(text)` with a clear error when NLTK's punkt tables (which `count` needs) are missing."""
    from patarm.io import needs_nltk_tables

    with needs_nltk_tables(f"counting {what} for the judge's <counts>"):
        return count(text)


def _star_paragraphs(text: str) -> tuple[int, bool]:
    parts = _STAR_PARAGRAPHS.split(text)
    empty = [i for i, p in enumerate(parts) if not p.strip()]
    return len(parts) - len(empty), any(0 < i < len(parts) - 1 for i in empty)


def _is_json(text: str) -> bool:
    text = text.strip()
    for prefix in ("```json", "```Json", "```JSON", "```"):
        text = text.removeprefix(prefix)
    try:
        json.loads(text.removesuffix("```").strip())
    except ValueError:
        return False
    return True


def _splitter_count(text: str, splitter: str) -> int:
    return len(re.split(r"\s?" + splitter + r"\s?\d+\s?", text)) - 1


def text_counts(response: str) -> TextCounts:
    """Count `response` as the IFEval checkers do (see `TextCounts`)."""
    from if_verifiable.ifeval import instructions_util as util

    r = response
    stars, empty_inside = _star_paragraphs(r)
    lowered = r.lower()
    return TextCounts(
        words=util.count_words(r), sentences=_with_punkt(util.count_sentences, r, "sentences"), commas=r.count(","),
        capital_words=_with_punkt(lambda t: sum(w.isupper() for w in util.nltk.word_tokenize(t)), r, "capital words"),
        case="lower" if r.islower() else "upper" if r.isupper() else "mixed",
        star_paragraphs=stars, star_empty_inside=empty_inside,
        blank_line_paragraphs=sum(bool(p.strip()) for p in re.split(r"\n\s*\n", r)),
        six_star_parts=sum(bool(p.strip()) for p in r.split("******")),
        highlights=sum(bool(h.strip("*").strip()) for h in _HIGHLIGHT.findall(r))
        + sum(bool(h[2:-2].strip()) for h in _DOUBLE_HIGHLIGHT.findall(r)),
        bullets=len(_BULLET_STAR.findall(r)) + len(_BULLET_DASH.findall(r)),
        placeholders=len(_PLACEHOLDER.findall(r)),
        section_markers=_splitter_count(r, "Section"), upper_section_markers=_splitter_count(r, "SECTION"),
        title=any(t.lstrip("<").rstrip(">").strip() for t in _TITLE.findall(r)),
        ps=bool(_PS.findall(lowered)), pps=bool(_PPS.findall(lowered)),
        quoted=len(r.strip()) > 1 and r.strip()[0] == '"' and r.strip()[-1] == '"', json=_is_json(r))


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def render_counts(c: TextCounts) -> str:
    """The `<counts>` block's three lines (about 80 tokens)."""
    paragraphs = f"*** paragraphs {c.star_paragraphs}" + (" (one empty)" if c.star_empty_inside else "")
    return "\n".join([
        f"words {c.words}; sentences {c.sentences}; commas {c.commas}; capital words {c.capital_words}; case {c.case}",
        f"{paragraphs}; blank-line paragraphs {c.blank_line_paragraphs}; ****** parts {c.six_star_parts}; "
        f"highlights {c.highlights}; bullets {c.bullets}; placeholders {c.placeholders}; Section markers "
        f"{c.section_markers}; SECTION markers {c.upper_section_markers}",
        f"title {yes_no(c.title)}; P.S. {yes_no(c.ps)}; P.P.S {yes_no(c.pps)}; quoted {yes_no(c.quoted)}; "
        f"JSON {yes_no(c.json)}",
    ])


def _text_counts_block(response: str) -> str:
    if len(response) > MAX_CHARS:
        return f"not counted: the response has over {MAX_CHARS:,} characters"
    return render_counts(text_counts(response))


FACT_SETS = {"text-counts": _text_counts_block}


def check_fact_sets(names: tuple[str, ...], where: str) -> None:
    """Raise ValueError naming `where` when a fact set is not known."""
    unknown = [n for n in names if n not in FACT_SETS]
    if unknown:
        raise ValueError(f"{where}: unknown facts {unknown}; known: {sorted(FACT_SETS)}")


def facts_block(names: tuple[str, ...], response: str) -> str:
    """The text of the template's `{facts}` field: each named fact set's lines, in order."""
    return "\n".join(FACT_SETS[n](response) for n in names)


def with_facts(response: str, names: tuple[str, ...] | list[str]) -> str:
    """`response` with the named facts appended in a `<counts>` block, as a judge template states them after the
    response: what a scalar (BT) reward model reads when it is given the same counts as the judge (`patarm bt
    --facts text-counts`). Unchanged without `names`."""
    if not names:
        return response
    return f"{response}\n<counts>\n{facts_block(tuple(names), response)}\n</counts>"
