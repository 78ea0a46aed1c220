"""Parse a judge's output text into a `Judgment`, checking the template's tag contract.

The parser never raises: whatever the text, it returns a Judgment whose `errors` say what was wrong.
"""

from __future__ import annotations

import re
from typing import Any

from patarm.judge.judgment import Judgment
from patarm.judge.templates import DEFAULT_TEMPLATE, JudgeTemplate, load_template

_NUMBER_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_LIST_MARK_RE = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*")
_DECISIONS = {"a": "A", "b": "B", "tie": "tie"}


def _tag_re(tags: tuple[str, ...]) -> re.Pattern:
    return re.compile(r"<(/?)(" + "|".join(map(re.escape, tags)) + r")>")


def _scan_blocks(text: str, template: JudgeTemplate) -> tuple[dict[str, str], list[str]]:
    """Walk the template's tags in order; return each well-formed block's content and the errors."""
    blocks: dict[str, str] = {}
    errors: list[str] = []
    open_tag, open_end, last_rank = None, 0, -1
    rank = {t: i for i, t in enumerate(template.tags)}
    for match in _tag_re(template.tags).finditer(text):
        closing, tag = match.group(1) == "/", match.group(2)
        if not closing:
            if open_tag is not None:
                errors.append(f"<{tag}> opened inside <{open_tag}>")
                continue
            if tag in blocks:
                errors.append(f"<{tag}> appears more than once")
            elif rank[tag] < last_rank:
                errors.append(f"<{tag}> is out of order")
            open_tag, open_end = tag, match.end()
        elif tag != open_tag:
            errors.append(f"</{tag}> closes a tag that is not open")
        else:
            if tag not in blocks:
                blocks[tag] = text[open_end:match.start()]
                last_rank = max(last_rank, rank[tag])
            open_tag = None
    if open_tag is not None:
        errors.append(f"<{open_tag}> is not closed")
    return blocks, errors


def _parse_score(text: str, template: JudgeTemplate) -> tuple[float | None, str | None]:
    """The score, valid only for exactly one <score>…</score> holding a plain in-range number."""
    opens, closes = text.count("<score>"), text.count("</score>")
    if opens != 1 or closes != 1:
        return None, f"expected exactly one <score>…</score>, found {opens} opening and {closes} closing tags"
    start, end = text.index("<score>") + len("<score>"), text.index("</score>")
    if end < start:
        return None, "</score> comes before <score>"
    content = text[start:end].strip()
    if not _NUMBER_RE.fullmatch(content):
        return None, f"score {content[:40]!r} is not a plain number"
    value = float(content)
    lo, hi = template.score_range
    if not lo <= value <= hi:
        return None, f"score {value:g} is outside [{lo:g}, {hi:g}]"
    return value, None


def _parse_decision(blocks: dict[str, str], template: JudgeTemplate) -> tuple[str | None, str | None]:
    if "decision" not in blocks:
        return None, "no <decision> block"
    decision = _DECISIONS.get(blocks["decision"].strip().lower())
    allowed = {d.lower() for d in template.decisions}
    if decision is None or decision.lower() not in allowed:
        return None, f"decision {blocks['decision'].strip()[:20]!r} is not one of {template.decisions}"
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
    `decision` is "A", "B" or "tie".
    """
    try:
        template = load_template(template or DEFAULT_TEMPLATE)
        if not isinstance(text, str):
            return Judgment(text=repr(text), errors=[f"judge output is {type(text).__name__}, not text"])
        blocks, errors = _scan_blocks(text, template)
        missing = [t for t in template.required_tags if t not in blocks]
        errors += [f"required tag <{t}> is missing" for t in missing]
        judgment = Judgment(
            text=text, tags_ok=not errors, errors=errors,
            think=blocks.get("think"), rubric=blocks.get("rubric"),
            evaluation=(blocks["eval"].strip() if "eval" in blocks else None),
            criteria=split_criteria(blocks.get("rubric")),
        )
        if template.kind == "pointwise":
            judgment.score, problem = _parse_score(text, template)
        else:
            judgment.decision, problem = _parse_decision(blocks, template)
        if problem:
            judgment.errors.append(problem)
        return judgment
    except Exception as err:  # the contract: never raise on any input
        return Judgment(text=str(text)[:10000], errors=[f"parser error: {err!r}"])
