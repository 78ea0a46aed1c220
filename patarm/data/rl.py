"""Preference pairs → GRPO judge prompts: each pair becomes two rows (chosen, rejected) that share a
`pair_id`, so the pair-preserving sampler and the PAR reward can put them back together."""

from __future__ import annotations

from typing import Any, Iterable

from patarm.data.schema import PreferencePair
from patarm.judge.templates import JudgeTemplate, load_template, render_pointwise


def pair_to_judge_rows(pair: PreferencePair, template: JudgeTemplate) -> list[dict[str, Any]]:
    """The chosen and the rejected judge prompt of one pair, as conversational GRPO rows."""
    rows = []
    for side in ("chosen", "rejected"):
        response = getattr(pair, side)
        rows.append({
            "prompt": render_pointwise(pair.prompt, response, template, domain=pair.domain),
            "pair_id": pair.id, "side": side, "domain": pair.domain or "", "response": response,
        })
    return rows


def pairs_to_judge_rows(pairs: Iterable[PreferencePair], template: JudgeTemplate | str | None = None,
                        rubric_mode: str | None = None) -> list[dict[str, Any]]:
    """Two rows per pair (chosen first), in pair order."""
    template = load_template(template or "pointwise", rubric_mode=rubric_mode)
    return [row for pair in pairs for row in pair_to_judge_rows(pair, template)]
