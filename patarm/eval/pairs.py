"""A judge on held-out preference pairs (what `patarm judge` and the quickstart report): pointwise, with
every rollout's Judgment for both sides, the mean scores, PAR rewards and the pair outcome (the chosen
response wins when its mean score is strictly higher); or pairwise in both presentation orders.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from patarm.data.schema import PreferencePair
from patarm.eval.stats import mean_ci
from patarm.judge import JudgeTemplate, load_template, mean_score, parse_judgment, render_pairwise, render_pointwise
from patarm.judge.decisions import flip, vote
from patarm.rewards import format_penalty, par_rewards


def judge_pairs_pointwise(pairs: Sequence[PreferencePair], backend: Any, template: JudgeTemplate | str | None = None,
                          num_samples: int = 1, margin: Any = "graded", seed: int | None = None,
                          fit: Callable[[Any], Any] = lambda m: m) -> list[dict]:
    """Score both sides of every pair with `num_samples` rollouts each; one record per pair. `fit` shortens a
    prompt to the judge's window (`patarm.judge.truncate.PromptFitter`)."""
    template = load_template(template or "pointwise")
    prompts = [fit(render_pointwise(p.prompt, getattr(p, side), template, domain=p.domain))
               for p in pairs for side in ("chosen", "rejected")]
    outputs = backend.generate(prompts, num_samples=num_samples, seed=seed)
    records = []
    for k, pair in enumerate(pairs):
        sides = {}
        for side, texts in (("chosen", outputs[2 * k]), ("rejected", outputs[2 * k + 1])):
            sides[side] = [parse_judgment(t, template) for t in texts]
        c_scores = [j.score for j in sides["chosen"]]
        r_scores = [j.score for j in sides["rejected"]]
        c_par, r_par = par_rewards(c_scores, r_scores, margin)
        mc, mr = mean_score(c_scores), mean_score(r_scores)
        records.append({
            "pair_id": pair.id, "mode": "pointwise",
            "chosen": [dict(j.to_dict(), par=p, format=format_penalty(j)) for j, p in zip(sides["chosen"], c_par)],
            "rejected": [dict(j.to_dict(), par=p, format=format_penalty(j)) for j, p in zip(sides["rejected"], r_par)],
            "score_chosen": mc, "score_rejected": mr,
            "correct": mc is not None and mr is not None and mc > mr,
        })
    return records


def judge_pairs_pairwise(pairs: Sequence[PreferencePair], backend: Any, template: JudgeTemplate | str | None = None,
                         num_samples: int = 1, seed: int | None = None,
                         fit: Callable[[Any], Any] = lambda m: m) -> list[dict]:
    """A/B decisions in both presentation orders; the chosen response is A in the first order."""
    template = load_template(template or "pairwise")
    prompts = []
    for p in pairs:
        prompts.append(fit(render_pairwise(p.prompt, p.chosen, p.rejected, template, domain=p.domain)))
        prompts.append(fit(render_pairwise(p.prompt, p.rejected, p.chosen, template, domain=p.domain)))
    outputs = backend.generate(prompts, num_samples=num_samples, seed=seed)
    records = []
    for k, pair in enumerate(pairs):
        ab = [parse_judgment(t, template) for t in outputs[2 * k]]
        ba = [parse_judgment(t, template) for t in outputs[2 * k + 1]]
        votes = vote([j.decision for j in ab], [j.decision for j in ba])
        records.append({
            "pair_id": pair.id, "mode": "pairwise",
            "order_ab": [j.to_dict() for j in ab], "order_ba": [j.to_dict() for j in ba],
            "correct": votes > 0,
            "consistent": all(a.decision is not None for a in ab) and [a.decision for a in ab]
            == [flip(b.decision) for b in ba],
        })
    return records


def summarize(records: Iterable[dict]) -> dict[str, float]:
    """Pair accuracy with its 95 % bootstrap interval over pairs (`accuracy_ci`, BCa, 1000 resamples, seed 0),
    format-valid rate (valid score and tags) and mean score margin s̄^c − s̄^r."""
    records = list(records)
    if not records:
        return {"accuracy": 0.0, "accuracy_ci": None, "format_valid": 0.0, "margin": 0.0, "pairs": 0}
    judgments = [j for r in records for side in ("chosen", "rejected", "order_ab", "order_ba") for j in r.get(side, [])]
    valid = [j for j in judgments if j.get("tags_ok") and (j.get("score") is not None or j.get("decision"))]
    margins = [r["score_chosen"] - r["score_rejected"] for r in records
               if r.get("score_chosen") is not None and r.get("score_rejected") is not None]
    return {
        "accuracy": sum(r["correct"] for r in records) / len(records),
        "accuracy_ci": list(mean_ci([float(r["correct"]) for r in records])),
        "format_valid": len(valid) / max(len(judgments), 1),
        "margin": sum(margins) / len(margins) if margins else 0.0,
        "pairs": len(records),
    }
