"""Parse a judge's output text into a `Judgment`, checking the template's tag contract.

The parser never raises: whatever the text, it returns a Judgment whose `errors` say what was wrong.
The answer (`<score>` or `<decision>`) is read only from a top-level block: one the tag scan finds
while no other template block is open, so a draft score inside `<think>` or `<eval>` never counts.
A score is a plain ASCII decimal: Python's `\\d` and `float()` also accept other scripts' digits
("٧", "０", "𝟕"), which the contract does not. The scan is one linear pass and keeps at most
MAX_ERRORS messages, counting the rest in a final "… and N more" entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from patarm.judge.judgment import Judgment
from patarm.judge.templates import DEFAULT_TEMPLATE, JudgeTemplate, load_template

MAX_ERRORS = 20  # messages kept per judgment; the rest are counted in one "… and N more" entry
_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")  # ASCII only: no \d
_ASCII_SPACE = " \t\n\r\f\v"  # str.strip() would also strip e.g. U+3000
_LIST_MARK_RE = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*")
_DECISIONS = {"a": "A", "b": "B", "tie": "tie"}


def _tag_re(tags: tuple[str, ...]) -> re.Pattern:
    return re.compile(r"<(/?)(" + "|".join(map(re.escape, tags)) + r")>")


@dataclass
class _Scan:
    """What one pass over the template's tags found.

    `blocks[tag]` holds the content of every closed top-level block of that tag, in order; `nested[tag]`
    names the block a `<tag>` was first opened inside; `errors` keeps MAX_ERRORS messages and
    `dropped` counts the rest.
    """

    blocks: dict[str, list[str]] = field(default_factory=dict)
    nested: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    dropped: int = 0

    def error(self, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)
        else:
            self.dropped += 1

    def first(self, tag: str) -> str | None:
        return self.blocks[tag][0] if tag in self.blocks else None


def _scan_blocks(text: str, template: JudgeTemplate) -> _Scan:
    """Walk the template's tags in order, once; record top-level blocks, nesting and tag errors."""
    scan = _Scan()
    open_tag, open_end, last_rank = None, 0, -1
    rank = {t: i for i, t in enumerate(template.tags)}
    for match in _tag_re(template.tags).finditer(text):
        closing, tag = match.group(1) == "/", match.group(2)
        if not closing:
            if open_tag is not None:
                scan.nested.setdefault(tag, open_tag)
                scan.error(f"<{tag}> opened inside <{open_tag}>")
                continue
            if tag in scan.blocks:
                scan.error(f"<{tag}> appears more than once")
            elif rank[tag] < last_rank:
                scan.error(f"<{tag}> is out of order")
            open_tag, open_end = tag, match.end()
        elif tag != open_tag:
            scan.error(f"</{tag}> closes a tag that is not open")
        else:
            scan.blocks.setdefault(tag, []).append(text[open_end:match.start()])
            last_rank = max(last_rank, rank[tag])
            open_tag = None
    if open_tag is not None:
        scan.error(f"<{open_tag}> is not closed")
    return scan


def _answer_block(scan: _Scan, tag: str) -> tuple[str | None, str | None]:
    """The content of the one top-level <tag> block, or why there is none."""
    found = scan.blocks.get(tag, [])
    if len(found) == 1:
        return found[0], None
    if found:
        return None, f"expected one top-level <{tag}>…</{tag}> block, found {len(found)}"
    if tag in scan.nested:
        return None, (f"<{tag}> appears only inside <{scan.nested[tag]}>; "
                      f"the answer must be in a top-level <{tag}>…</{tag}> block")
    return None, f"no top-level <{tag}>…</{tag}> block"


def _parse_score(scan: _Scan, template: JudgeTemplate) -> tuple[float | None, str | None]:
    """The score, valid only for exactly one top-level <score> block holding a plain in-range number."""
    content, problem = _answer_block(scan, "score")
    if content is None:
        return None, problem
    content = content.strip(_ASCII_SPACE)
    if not (content.isascii() and _NUMBER_RE.fullmatch(content)):
        return None, f"score {content[:40]!r} is not a plain ASCII decimal number"
    value = float(content)
    lo, hi = template.score_range
    if not lo <= value <= hi:
        return None, f"score {value:g} is outside [{lo:g}, {hi:g}]"
    return value, None


def _parse_decision(scan: _Scan, template: JudgeTemplate) -> tuple[str | None, str | None]:
    """The decision, valid only for exactly one top-level <decision> block naming an allowed verdict."""
    content, problem = _answer_block(scan, "decision")
    if content is None:
        return None, problem
    content = content.strip(_ASCII_SPACE)
    decision = _DECISIONS.get(content.lower()) if content.isascii() else None
    if decision is None or decision.lower() not in {d.lower() for d in template.decisions}:
        return None, f"decision {content[:20]!r} is not one of {template.decisions}"
    return decision, None


def split_criteria(rubric: str | None) -> list[str]:
    """The numbered/bulleted lines of a generated <rubric> block, without their list marks."""
    if not rubric:
        return []
    return [_LIST_MARK_RE.sub("", line).strip() for line in rubric.splitlines() if line.strip()]


def parse_judgment(text: Any, template: JudgeTemplate | str | None = None) -> Judgment:
    """Parse judge output `text` under `template` (default: pointwise, adaptive rubric mode).

    `tags_ok` is False when a required tag is missing, or any tag is unclosed, duplicated, nested or
    out of order. For pointwise templates `score` is set only when valid; for pairwise templates
    `decision` is "A", "B" or "tie". `errors` is empty exactly when `tags_ok` holds and the answer is
    valid; it holds at most MAX_ERRORS + 1 entries, the answer's problem first.
    """
    try:
        template = load_template(template or DEFAULT_TEMPLATE)
        if not isinstance(text, str):
            return Judgment(text=repr(text), errors=[f"judge output is {type(text).__name__}, not text"])
        scan = _scan_blocks(text, template)
        missing = [f"required tag <{t}> is missing" for t in template.required_tags if t not in scan.blocks]
        judgment = Judgment(
            text=text, tags_ok=not (scan.errors or missing),
            think=scan.first("think"), rubric=scan.first("rubric"),
            evaluation=(scan.first("eval").strip() if "eval" in scan.blocks else None),
            criteria=split_criteria(scan.first("rubric")),
        )
        if template.kind == "pointwise":
            judgment.score, problem = _parse_score(scan, template)
        else:
            judgment.decision, problem = _parse_decision(scan, template)
        # The answer's problem and missing tags come first so that the cap never hides them.
        errors = ([problem] if problem else []) + missing + scan.errors
        dropped = scan.dropped + max(0, len(errors) - MAX_ERRORS)
        judgment.errors = errors[:MAX_ERRORS] + ([f"… and {dropped} more"] if dropped else [])
        return judgment
    except Exception as err:  # the contract: never raise on any input
        return Judgment(text=str(text)[:10000], errors=[f"parser error: {err!r}"])
