"""The deterministic readout A(τ): evidence items → pointwise score, pairwise decision, best-of-N index.

The rules are data (an ``aggregation`` resource, YAML), not code paths::

    scale: [1, 10]                      # the pointwise score range
    assessments: {pass: 1.0, fail: 0.0, uncertain: 0.5}
    criterion_scales: {"judge-*": [1, 10]}   # numeric assessments' ranges (default [0, 1])
    weights: {"answer-agreement": 2, "*": 1}  # fnmatch patterns, first match wins; 0 = ignore
    veto: {criteria: ["constraint:*"], score: 1}   # a failed hard constraint fixes the score
    caps: [{criteria: ["safety*"], max: 4}]         # a failed criterion caps the score
    fail_below: 0.5                     # a numeric assessment below this (normalised) is a fail
    tie_margin: 0.0                     # pairwise: |s_A - s_B| <= margin is a tie

Criterion value x_m in [0, 1]; score = lo + (hi - lo) * sum(w_m x_m) / sum(w_m), then vetoes and caps.
Best-of-N picks the highest score; ties go to the lowest index (deterministic).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from patarm.judge.judgment import EvidenceItem, Judgment

DEFAULT_RULES: dict[str, Any] = {
    "scale": [1, 10], "assessments": {"pass": 1.0, "fail": 0.0, "uncertain": 0.5},
    "criterion_scales": {}, "weights": {"*": 1.0}, "veto": {"criteria": [], "score": None},
    "caps": [], "fail_below": 0.5, "tie_margin": 0.0,
}
RULE_FIELDS = set(DEFAULT_RULES) | {"id", "description"}


def check_rules(data: Any) -> list[tuple[str, str]]:
    """(field, message) for every problem of an aggregation-rules mapping."""
    if not isinstance(data, dict):
        return [("-", "aggregation rules must be a mapping")]
    problems = [(k, "unknown aggregation field") for k in sorted(set(data) - RULE_FIELDS)]
    scale = data.get("scale", DEFAULT_RULES["scale"])
    if not (isinstance(scale, list) and len(scale) == 2 and all(isinstance(x, (int, float)) for x in scale)
            and scale[0] < scale[1]):
        problems.append(("scale", "must be [low, high] with low < high"))
    for key in ("assessments", "criterion_scales", "weights"):
        if not isinstance(data.get(key, {}), dict):
            problems.append((key, "must be a mapping"))
    for name, value in (data.get("assessments") or {}).items():
        if not isinstance(value, (int, float)) or not 0 <= value <= 1:
            problems.append((f"assessments.{name}", "must be a number in [0, 1]"))
    for pattern, weight in (data.get("weights") or {}).items():
        if not isinstance(weight, (int, float)) or weight < 0:
            problems.append((f"weights.{pattern}", "must be a number >= 0"))
    veto = data.get("veto", {})
    if not isinstance(veto, dict) or not isinstance(veto.get("criteria", []), list):
        problems.append(("veto", "must be {criteria: [patterns], score: number}"))
    caps = data.get("caps", [])
    if not isinstance(caps, list) or not all(isinstance(c, dict) and isinstance(c.get("criteria"), list)
                                             and isinstance(c.get("max"), (int, float)) for c in caps):
        problems.append(("caps", "must be a list of {criteria: [patterns], max: number}"))
    return problems


def load_rules(data: dict[str, Any] | None) -> dict[str, Any]:
    """Rules with defaults filled in; raises ValueError on invalid rules."""
    problems = check_rules(data or {})
    if problems:
        raise ValueError("invalid aggregation rules: " + "; ".join(f"{f}: {m}" for f, m in problems))
    return {**DEFAULT_RULES, **(data or {})}


def _match(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name.lower(), p.lower()) for p in patterns)


def _weight(name: str, rules: dict) -> float:
    for pattern, weight in rules["weights"].items():
        if fnmatch.fnmatchcase(name.lower(), pattern.lower()):
            return float(weight)
    return 0.0


def criterion_value(item: EvidenceItem, rules: dict) -> float | None:
    """The item's assessment as a number in [0, 1] (None when missing or unknown)."""
    a = item.assessment
    if isinstance(a, bool):
        return float(a)
    if isinstance(a, (int, float)):
        lo, hi = next((s for p, s in rules["criterion_scales"].items()
                       if fnmatch.fnmatchcase(item.criterion.lower(), p.lower())), (0.0, 1.0))
        return min(1.0, max(0.0, (float(a) - lo) / (hi - lo)))
    if isinstance(a, str):
        value = rules["assessments"].get(a.strip().lower())
        return None if value is None else float(value)
    return None


@dataclass
class Readout:
    """A pointwise readout: the score and the rules that fired (for auditing)."""

    score: float | None
    fired: list[str] = field(default_factory=list)


def score_evidence(evidence: Sequence[EvidenceItem], rules: dict) -> Readout:
    """Pointwise score (K = 1) of one candidate's evidence items."""
    lo, hi = rules["scale"]
    total = weight_sum = 0.0
    fired: list[str] = []
    failed: list[str] = []
    for item in evidence:
        value = criterion_value(item, rules)
        if value is None:
            continue
        if value < rules["fail_below"]:
            failed.append(item.criterion)
        w = _weight(item.criterion, rules)
        total, weight_sum = total + w * value, weight_sum + w
    if weight_sum == 0:
        return Readout(None, ["no weighted evidence"])
    score = lo + (hi - lo) * total / weight_sum
    veto = rules["veto"]
    vetoed = [c for c in failed if _match(c, veto.get("criteria", []))]
    if vetoed:
        score = float(veto.get("score") if veto.get("score") is not None else lo)
        fired.append(f"veto: {', '.join(vetoed)}")
    for cap in rules["caps"]:
        hit = [c for c in failed if _match(c, cap["criteria"])]
        if hit and score > cap["max"]:
            score = float(cap["max"])
            fired.append(f"cap {cap['max']:g}: {', '.join(hit)}")
    return Readout(round(score, 6), fired)


def readout_pointwise(judgment: Judgment, rules: dict) -> Judgment:
    """Fill `judgment.score` from its evidence (kept as is when there is no usable evidence)."""
    result = score_evidence(judgment.evidence, rules)
    if result.score is not None:
        judgment.score = result.score
    return judgment


def readout_pairwise(a: Judgment, b: Judgment, rules: dict) -> str | None:
    """K = 2: "A", "B" or "tie" from both candidates' scores; None when one cannot be scored."""
    sa = score_evidence(a.evidence, rules).score if a.evidence else a.score
    sb = score_evidence(b.evidence, rules).score if b.evidence else b.score
    if sa is None or sb is None:
        return None
    if abs(sa - sb) <= rules["tie_margin"]:
        return "tie"
    return "A" if sa > sb else "B"


def readout_best_of_n(judgments: Sequence[Judgment], rules: dict) -> tuple[int | None, list[float | None]]:
    """K >= 2: the index of the best candidate (lowest index among equals) and every score."""
    scores = [score_evidence(j.evidence, rules).score if j.evidence else j.score for j in judgments]
    valid = [(s, -i) for i, s in enumerate(scores) if s is not None]
    if not valid:
        return None, scores
    return -max(valid)[1], scores
