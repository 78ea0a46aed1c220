"""The judge core: prompt templates, the output parser and the Judgment type."""

from patarm.judge.judgment import EvidenceItem, Judgment, mean_score
from patarm.judge.parse import parse_judgment, split_criteria
from patarm.judge.templates import (
    JudgeTemplate,
    load_template,
    neutralize,
    render_pairwise,
    render_pointwise,
    to_prompt_text,
)

__all__ = [
    "EvidenceItem", "Judgment", "JudgeTemplate", "load_template", "mean_score", "neutralize", "parse_judgment",
    "render_pairwise", "render_pointwise", "split_criteria", "to_prompt_text",
]
