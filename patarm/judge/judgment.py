"""The one Judgment type that flows through every stage (teacher, GRPO reward, eval, server)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any


def mean_score(scores: Iterable[float | None]) -> float | None:
    """Mean of the valid scores (None marks a judgment without a valid score); None when there is none.
    The one rule for voting@n's `mean`, PAR's side means, the server's score and eval's pointwise records."""
    valid = [float(s) for s in scores if s is not None]
    return sum(valid) / len(valid) if valid else None


@dataclass
class EvidenceItem:
    """One criterion checked against the response: e_m = (criterion, observation, assessment)."""

    criterion: str
    observation: str = ""
    assessment: str | float | None = None  # "pass" | "fail" | "uncertain" or a criterion score


@dataclass
class Judgment:
    """A parsed judge output.

    `score` is the pointwise score (None when it is missing or invalid); `decision` is the
    pairwise verdict ("A", "B" or "tie", None when missing); `tags_ok` says whether the output
    followed the template's tag contract (present, closed, not duplicated, in order).
    """

    text: str
    score: float | None = None
    decision: str | None = None
    criteria: list[str] = field(default_factory=list)
    evaluation: str | None = None
    think: str | None = None
    rubric: str | None = None
    tags_ok: bool = False
    errors: list[str] = field(default_factory=list)
    evidence: list[EvidenceItem] = field(default_factory=list)

    @property
    def score_valid(self) -> bool:
        return self.score is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
