"""Ties broken by the judge, not by chance: voting@k and adaptive voting over k sampled judgments per candidate.

- *voting@k* (the paper's §5.4): a candidate's score is the mean of its first k sampled scores
  (`patarm.eval.voting.mean_score`: invalid samples are skipped; none valid → no score); k·N judge calls.
- *adaptive*: every candidate is judged once; while the top mean is shared by several candidates and draws are
  left, only those tied candidates are judged once more (up to k draws each). Calls are counted as drawn.

Both read the records of `evaluate.judge_problems(..., samples=k)` (`sample_scores`: k scores per candidate in draw
order), so every rule is measured on the same draws and an adaptive run is exactly what drawing in that order
would have spent.

>>> adaptive_scores([[9, 9], [9, 2], [2, 2]], k=2)   # 0 and 1 tie at 9 after one draw; one more each
([9.0, 5.5, 2.0], 5)
"""

from __future__ import annotations

from collections.abc import Sequence

from patarm.demo.gsm8k.metrics import summarize_scores
from patarm.eval.voting import mean_score

Score = float | None


def voted_scores(samples: Sequence[Sequence[Score]], k: int) -> list[Score]:
    """voting@k: each candidate's mean of its first k sampled scores."""
    return [mean_score(list(s[:k])) for s in samples]


def adaptive_scores(samples: Sequence[Sequence[Score]], k: int) -> tuple[list[Score], int]:
    """(scores, judge calls): draw more only for the candidates sharing the top mean, up to k each."""
    drawn = [1] * len(samples)
    while True:
        means = [mean_score(list(s[:d])) for s, d in zip(samples, drawn)]
        valid = [m for m in means if m is not None]
        top = [c for c, m in enumerate(means) if (m == max(valid) if valid else True)]
        more = [c for c in top if drawn[c] < min(k, len(samples[c]))]
        if len(top) <= 1 or not more:
            return means, sum(drawn)
        for c in more:
            drawn[c] += 1


def voting_summary(records: Sequence[dict], k: int) -> dict[str, dict]:
    """Per rule (`vote@1` … `vote@k`, `adaptive@k`): summarize_scores' metrics plus `calls` (judge calls)."""
    out: dict[str, dict] = {}
    for j in range(1, k + 1):
        voted = [{**r, "scores": voted_scores(r["sample_scores"], j)} for r in records]
        out[f"vote@{j}"] = summarize_scores(voted) | {"calls": j * sum(len(r["sample_scores"]) for r in records)}
    adaptive, calls = [], 0
    for r in records:
        scores, n = adaptive_scores(r["sample_scores"], k)
        adaptive.append({**r, "scores": scores})
        calls += n
    out[f"adaptive@{k}"] = summarize_scores(adaptive) | {"calls": calls}
    return out
