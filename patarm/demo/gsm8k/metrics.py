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

from patarm.eval.stats import mean_ci

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


def mixed_top_tie(scores: Sequence[Score], correct: Sequence[bool]) -> bool:
    """Whether the top score is shared by a correct and an incorrect candidate (so best-of-N must guess)."""
    valid = [s for s in scores if s is not None]
    top = [k for k, s in enumerate(scores) if s is not None and s == max(valid)] if valid else list(range(len(scores)))
    return any(correct[k] for k in top) and not all(correct[k] for k in top)


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
    wrong), format-valid rate, best-of-N accuracy (percent), how often the top score was tied, and how often it
    was tied between a correct and an incorrect candidate (`top_tied_mixed`: where the pick is a guess); `*_ci` are
    95 % bootstrap intervals over problems (a problem's pairs move together; BCa, 1000 resamples, seed 0)."""
    hits = pairs = valid = judged = 0
    picked, tied, mixed = 0.0, 0, 0
    pair_values: list[float] = []
    pair_groups: list[int] = []
    per_problem: list[float] = []
    for k, r in enumerate(records):
        h, n = pair_hits(r["scores"], r["correct"])
        hits, pairs = hits + h, pairs + n
        pair_values += [1.0] * h + [0.0] * (n - h)
        pair_groups += [k] * n
        valid += sum(r["valid"])
        judged += len(r["valid"])
        per_problem.append(best_of_n(r["scores"], r["correct"]))
        picked += per_problem[-1]
        scored = [s for s in r["scores"] if s is not None]
        tied += not scored or sum(s == max(scored) for s in scored) > 1
        mixed += mixed_top_tie(r["scores"], r["correct"])
    problems = max(len(records), 1)
    bo_ci = mean_ci(per_problem) if per_problem else None
    return {"pair_accuracy": hits / max(pairs, 1), "pairs": pairs, "format_valid": valid / max(judged, 1),
            "pair_accuracy_ci": list(mean_ci(pair_values, groups=pair_groups)) if pair_values else None,
            "best_of_n": 100.0 * picked / problems, "top_tied": tied / problems, "top_tied_mixed": mixed / problems,
            "problems": len(records), "best_of_n_ci": [100.0 * x for x in bo_ci] if bo_ci else None}


def pool_baselines(problems: Sequence) -> dict[str, object]:
    """Single models, majority vote, Oracle@N and a uniform random pick (percent) on `problems`; `ci` holds each
    one's 95 % bootstrap interval over problems (`single:<source>` for the single models)."""
    n = max(len(problems), 1)
    sources = problems[0].sources if problems else []
    per = {f"single:{s}": [float(p.correct[k]) for p in problems] for k, s in enumerate(sources)}
    per["majority_vote"] = [majority_vote(p.solutions, p.correct) for p in problems]
    per["oracle"] = [float(any(p.correct)) for p in problems]
    per["random"] = [sum(p.correct) / len(p.correct) for p in problems]
    single = {s: 100.0 * sum(per[f"single:{s}"]) / n for s in sources}
    return {"single": single, "best_single": max(single.values(), default=0.0),
            "majority_vote": 100.0 * sum(per["majority_vote"]) / n, "oracle": 100.0 * sum(per["oracle"]) / n,
            "random": 100.0 * sum(per["random"]) / n, "problems": len(problems),
            "ci": {k: [100.0 * x for x in mean_ci(v)] for k, v in per.items() if v}}


def skill_selection(problems: Sequence, skill: str = "reward-judge") -> float:
    """The training-free skill without the reference (`patarm bon --reference none`: its verifiers — answer
    agreement across the candidates, calculator checks — read out by its aggregation rules), percent, with this
    module's tie rule (`patarm bon` itself takes the lowest index among ties)."""
    from patarm.skills.bon import PoolItem, select
    from patarm.skills.package import find_skill

    loaded, picked = find_skill(skill), 0.0
    for p in problems:
        _, session = select(loaded, PoolItem(p.question, p.solutions, p.sources, p.correct, None), "math")
        picked += best_of_n(session.best_of_n(session.rules())[1], p.correct)
    return 100.0 * picked / max(len(problems), 1)
