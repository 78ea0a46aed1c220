"""Decisions, votes and voting rules: voting@n (mean, majority) and adaptive voting with early stopping.

Decisions ("A", "B", "tie", None) and votes are defined in `patarm.judge.decisions`: a vote for a
comparison (x, y) is (#decisions preferring x) - (#decisions preferring y); decisions made in the
swapped order (y, x) are flipped back first, as JudgeBench does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from patarm.judge.decisions import DECISIONS, flip, from_scores, vote  # noqa: F401  (re-exported)
from patarm.judge.judgment import mean_score  # noqa: F401  (re-exported: voting@n `mean`)

VOTING_RULES = ("mean", "majority", "adaptive")


def as_list(value: Any) -> list:
    """A decision slot as a list: voting@n stores n decisions per order, a single run stores one."""
    return list(value) if isinstance(value, (list, tuple)) else [value]


def compact(decisions: Sequence[str | None]) -> Any:
    """A decision slot for a record: the decision itself for one sample, the list for voting@n."""
    return decisions[0] if len(decisions) == 1 else list(decisions)


def flip_probability(votes_for: int, votes_against: int, remaining: int) -> float:
    """Chance that `remaining` more decisive draws change the sign of the vote (a tie counts as a change).

    Draws are modelled as Bernoulli with a uniform Beta(1, 1) prior on the judge's preference, so the
    count of future `against` draws is beta-binomial. Returns 0 when no outcome of the remaining draws
    could change the result, which makes `confidence=1.0` the exact "cannot change" rule.
    """
    lead = votes_for - votes_against
    if abs(lead) > remaining:
        return 0.0
    leader, trailer = (votes_for, votes_against) if lead > 0 else (votes_against, votes_for)
    alpha, beta = trailer + 1, leader + 1  # Beta posterior of the trailing side's share
    # The final vote changes when trailing draws y satisfy |lead| + (remaining - y) - y <= 0 (or, for a
    # current tie, whenever the draws are not split evenly: any decisive lead changes "tie").
    need = math.ceil((abs(lead) + remaining) / 2)
    ys = range(need, remaining + 1) if lead != 0 else [y for y in range(remaining + 1) if 2 * y != remaining]
    log_norm = _log_beta(alpha, beta)
    return sum(math.exp(_log_comb(remaining, y) + _log_beta(y + alpha, remaining - y + beta) - log_norm)
               for y in ys)


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def should_stop(votes_for: int, votes_against: int, drawn: int, max_draws: int, confidence: float = 1.0,
                votes_per_draw: int = 1) -> bool:
    """Adaptive voting's stopping rule after `drawn` of at most `max_draws` draws.

    Stop when the draws left cannot change the majority outcome (`confidence=1.0`), or when the
    chance they change it is at most `1 - confidence`. A draw holds `votes_per_draw` decisions: one
    per sample (pointwise), or two for pairwise judging in both presentation orders.
    """
    remaining = max_draws - drawn
    if remaining <= 0:
        return True
    if drawn == 0:
        return False
    left = remaining * votes_per_draw
    if abs(votes_for - votes_against) > left:
        return True
    return confidence < 1.0 and flip_probability(votes_for, votes_against, left) <= 1.0 - confidence
