"""Metrics on held-out problems from per-candidate scores: pointwise pair accuracy, best-of-N accuracy, format
validity, and the pool's own baselines (single models, majority vote, Oracle@N). Pure functions.

Tie rule (best-of-N and majority vote): among the candidates (or answer clusters) that share the top score, the
pick is uniformly random; we report its expectation exactly — the share of correct candidates among the tied
ones — so no source is favoured and nothing depends on a random draw. A candidate without a valid score ranks
below every scored one; when no candidate has a score, all four tie.

>>> best_of_n([9, 2, 9, None], [True, False, False, True])   # tie between 0 and 2: one of them is correct
0.5
>>> pair_hits([9, 9, 2], [True, False, False])   # pairs (0,1) tie → wrong, (0,2) right
(1, 2)
"""

from __future__ import annotations

from collections.abc import Sequence

Score = float | None


def pair_hits(scores: Sequence[Score], correct: Sequence[bool]) -> tuple[int, int]:
    """(pairs ranked right, pairs) over every (correct, incorrect) candidate pair of one problem: right when the
    correct candidate's score is strictly higher; a tie or a missing score counts as wrong."""
    hits = total = 0
    for c, sc in enumerate(scores):
        for i, si in enumerate(scores):
            if correct[c] and not correct[i]:
                total += 1
                hits += sc is not None and si is not None and sc > si
    return hits, total


def best_of_n(scores: Sequence[Score], correct: Sequence[bool]) -> float:
    """Expected correctness of the candidate picked by the highest score (uniform among ties)."""
    valid = [s for s in scores if s is not None]
    top = [k for k, s in enumerate(scores) if s is not None and s == max(valid)] if valid else list(range(len(scores)))
    return sum(correct[k] for k in top) / len(top)


def answer_clusters(answers: Sequence[str]) -> list[int]:
    """Cluster id per final answer; equal ids are equivalent under math-verify (an empty answer is alone)."""
    from patarm.verify.mathans import answers_equal

    ids: list[int] = []
    for k, ans in enumerate(answers):
        match = next((ids[j] for j in range(k) if ans and answers[j] and answers_equal(answers[j], ans)), None)
        ids.append(k if match is None else match)
    return ids


def majority_vote(solutions: Sequence[str], correct: Sequence[bool]) -> float:
    """Expected correctness of majority voting over final answers (uniform among the largest clusters; a
    cluster's correctness is the share of its members flagged correct)."""
    from patarm.verify.mathans import final_answer

    ids = answer_clusters([final_answer(s) for s in solutions])
    sizes = {i: ids.count(i) for i in set(ids)}
    top = [i for i, n in sizes.items() if n == max(sizes.values())]
    return sum(sum(correct[k] for k, c in enumerate(ids) if c == i) / sizes[i] for i in top) / len(top)


def summarize_scores(records: Sequence[dict]) -> dict[str, float]:
    """One stage × arm from its per-problem records `{"scores", "correct", "valid"}`: pair accuracy (ties
    wrong), format-valid rate, best-of-N accuracy (percent) and how often the top score was tied."""
    hits = pairs = valid = judged = 0
    picked, tied = 0.0, 0
    for r in records:
        h, n = pair_hits(r["scores"], r["correct"])
        hits, pairs = hits + h, pairs + n
        valid += sum(r["valid"])
        judged += len(r["valid"])
        picked += best_of_n(r["scores"], r["correct"])
        scored = [s for s in r["scores"] if s is not None]
        tied += not scored or sum(s == max(scored) for s in scored) > 1
    problems = max(len(records), 1)
    return {"pair_accuracy": hits / max(pairs, 1), "pairs": pairs, "format_valid": valid / max(judged, 1),
            "best_of_n": 100.0 * picked / problems, "top_tied": tied / problems, "problems": len(records)}


def pool_baselines(problems: Sequence) -> dict[str, object]:
    """Single models, majority vote, Oracle@N and a uniform random pick (percent) on `problems`."""
    n = max(len(problems), 1)
    sources = problems[0].sources if problems else []
    single = {s: 100.0 * sum(p.correct[k] for p in problems) / n for k, s in enumerate(sources)}
    return {"single": single, "best_single": max(single.values(), default=0.0),
            "majority_vote": 100.0 * sum(majority_vote(p.solutions, p.correct) for p in problems) / n,
            "oracle": 100.0 * sum(any(p.correct) for p in problems) / n,
            "random": 100.0 * sum(sum(p.correct) / len(p.correct) for p in problems) / n, "problems": len(problems)}
