"""Pairwise decisions, spelled one way across the judge, eval and skills.

A decision is relative to the order the judge saw: "A" (the first response shown is better), "B" (the
second), "tie", or None when the judge gave no valid decision. A judgment made in the swapped order is
flipped back with `flip` before it is counted.
"""

from __future__ import annotations

from collections.abc import Iterable

A, B, TIE = "A", "B", "tie"
DECISIONS = (A, B, TIE)
_FLIP = {A: B, B: A}


def flip(decision: str | None) -> str | None:
    """The same verdict expressed for the swapped order ("tie" and None are unchanged)."""
    return _FLIP.get(decision, decision)  # type: ignore[arg-type]


def from_scores(score_a: float | None, score_b: float | None) -> str | None:
    """The decision implied by two pointwise scores; None when either is missing."""
    if score_a is None or score_b is None:
        return None
    return A if score_a > score_b else B if score_a < score_b else TIE


def vote(in_order: Iterable[str | None], swapped: Iterable[str | None] = ()) -> int:
    """+1 per decision preferring the first item, -1 per decision preferring the second; ties/None 0.
    Decisions in `swapped` were made with the two items shown the other way round."""
    total = 0
    for d in [*in_order, *(flip(d) for d in swapped)]:
        total += 1 if d == A else -1 if d == B else 0
    return total
