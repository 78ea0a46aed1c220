"""What stands beside a benchmark's accuracy: its interval, the trivial baselines computed from the data alone,
the judge's biases (length, position) and, for pointwise judges, its calibration.

Everything here is a pure function of a run's sample rows (samples.jsonl: the official record, the raw judge
outputs and ``lengths``, the characters of each candidate response), so `patarm eval report` recomputes it
from a run folder. What a benchmark contributes lives in its module: `stratum`, `cluster` (optional),
`preferred_pairs` and, for best-of-N sets, `random_baseline`.

Trivial baselines score a "judge" whose score for a candidate is its length (longer-wins) or minus its
length (shorter-wins) with the benchmark's own `make_record` and `score`, ties by the same rule as the judge.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from itertools import combinations
from types import ModuleType
from typing import Any

from patarm.eval import stats
from patarm.eval.voting import mean_score
from patarm.judge.decisions import A, B, flip, vote

AGREEMENT_FLAG = 0.80  # a judge agreeing with longer-wins on more decisions than this is flagged ...
AGREEMENT_MIN = 10  # ... when it made at least this many decisive decisions (2 of 2 says nothing)


def stratum_of(bench: ModuleType):
    return getattr(bench, "stratum", lambda r: str(r.get("subset") or r.get("domain") or r.get("source") or ""))


def cluster_of(bench: ModuleType):
    return getattr(bench, "cluster", lambda r: str(r.get("id", r.get("pair_id"))))


def item_value(outcome: Any) -> float | None:
    """One number per item from `item_result`: a dict (RM-Bench's levels) is averaged; None stays None."""
    if outcome is None:
        return None
    if isinstance(outcome, dict):
        return sum(outcome.values()) / len(outcome) if outcome else None
    return float(outcome)


def intervals(bench: ModuleType, records: Sequence[dict], tie_policy: str | None, n_resamples: int = stats.RESAMPLES,
              seed: int = 0) -> dict[str, Any]:
    """{"intervals": {metric: [low, high]}, "bootstrap": how} for every metric `bench.score` reports."""
    score = lambda rs: bench.score(rs, tie_policy=tie_policy)  # noqa: E731
    cis = stats.metric_intervals(list(records), score, stratum_of(bench), cluster_of(bench), n_resamples=n_resamples,
                                 seed=seed)
    # A metric at 0 or 100 in every resample (all wrong / all right) is not certain: Wilson over its prompts, where
    # the metric is one stratum's or the whole set's (a section pooling several strata keeps its percentile interval).
    point = stats.flat(score(list(records)))
    clusters = {str(s): {str(cluster_of(bench)(r)) for r in records if stratum_of(bench)(r) == s}
                for s in {stratum_of(bench)(r) for r in records}}
    everything = {str(cluster_of(bench)(r)) for r in records}
    wilson = []
    for key, (lo, hi) in cis.items():
        if lo == hi and point.get(key) in (0.0, 100.0):
            parts = key.split(".")
            name = next((p for p in parts if p in clusters), None)
            n = len(clusters[name]) if name else len(everything) if parts[0] in ("overall", "score") else None
            if n:
                cis[key] = [100 * x for x in stats.wilson(round(n * point[key] / 100), n)]
                wilson.append(key)
    # a record is one prompt with all its responses (RM-Bench's 3x3 included); `cluster` joins records of a prompt
    how = stats.describe("stratified cluster bootstrap, percentile", n_resamples, seed, unit="prompts within strata")
    return {"intervals": cis, "bootstrap": {**how, "wilson_where_degenerate": wilson}}


# ---- per-candidate views of a sample row -----------------------------------------------------------------------


def candidate_scores(row: dict) -> list[float | None] | None:
    """Pointwise rows: each candidate's mean valid score; None for pairwise rows."""
    outputs = row.get("judge_outputs")
    if not isinstance(outputs, list):
        return None
    return [mean_score([o.get("score") for o in group]) for group in outputs]


def _sign(x: float | None, y: float | None) -> int:
    if x is None or y is None:
        return 0
    return (x > y) - (x < y)


def _comparisons(bench: ModuleType, row: dict) -> list[tuple[int, int]]:
    return list(bench.comparisons(row)) or list(combinations(range(len(row.get("lengths") or [])), 2))


def judge_signs(bench: ModuleType, row: dict) -> dict[tuple[int, int], int]:
    """The judge's preference per comparison (x, y): +1 for x, -1 for y, 0 for a tie or no decision."""
    scores = candidate_scores(row)
    if scores is not None:
        return {(x, y): _sign(scores[x], scores[y]) for x, y in _comparisons(bench, row)}
    out = {}
    for key, orders in (row.get("judge_outputs") or {}).items():
        x, y = (int(v) for v in key.split(","))
        v = vote([o.get("decision") for o in orders["ab"]], [o.get("decision") for o in orders["ba"]])
        out[(x, y)] = (v > 0) - (v < 0)
    return out


# ---- trivial baselines -----------------------------------------------------------------------------------------


def baselines(bench: ModuleType, rows: Sequence[dict], tie_policy: str | None) -> dict[str, dict]:
    """{"longer": metrics, "shorter": metrics[, "random": metrics]} from the rows' candidate lengths."""
    rows = [r for r in rows if r.get("lengths")]
    if not rows:
        return {}
    out = {}
    for name, sign in (("longer", 1.0), ("shorter", -1.0)):
        records = [bench.make_record(r, scores=[sign * n for n in r["lengths"]]) for r in rows]
        out[name] = bench.score(records, tie_policy=tie_policy)
    if hasattr(bench, "random_baseline"):
        out["random"] = bench.random_baseline([bench.make_record(r, scores=r["lengths"]) for r in rows])
    return out


def length_agreement(bench: ModuleType, rows: Sequence[dict]) -> dict[str, Any]:
    """Share of the judge's decisive decisions that agree with longer-wins, overall and per stratum."""
    stratum = stratum_of(bench)
    counts: dict[str, list[int]] = {}
    for row in rows:
        if not row.get("lengths"):
            continue
        lengths = row["lengths"]
        for (x, y), s in judge_signs(bench, row).items():
            if s == 0 or lengths[x] == lengths[y]:
                continue
            for key in ("all", str(stratum(row))):
                c = counts.setdefault(key, [0, 0])
                c[0] += s == _sign(lengths[x], lengths[y])
                c[1] += 1
    return {k: {"agree": a, "decisions": n, "share": a / n} for k, (a, n) in counts.items() if n}


def flags(metrics: dict[str, Any], base: dict[str, dict], agreement: dict[str, Any],
          intervals: dict[str, list[float]] | None = None) -> list[str]:
    """Sentences for each metric a trivial baseline beats (marked * where it lies above the judge's whole 95 %
    interval), and for judges that follow length."""
    judge, cis = stats.flat(metrics), intervals or {}
    out = []
    for name, values in base.items():
        beaten = [f"{key} {v:.1f} vs {judge[key]:.1f}{'*' if key in cis and v > cis[key][1] else ''}"
                  for key, v in stats.flat(values).items() if key in judge and v > judge[key] + 1e-9]
        if beaten:
            title = "a random pick" if name == "random" else f"{name}-wins"
            out.append(f"{title} beats the judge on {len(beaten)} of {len(judge)} metrics: " + ", ".join(beaten))
    for key, a in agreement.items():
        if a["share"] > AGREEMENT_FLAG and a["decisions"] >= AGREEMENT_MIN:
            where = "overall" if key == "all" else key
            out.append(f"{where}: the judge agrees with longer-wins on {100 * a['share']:.0f}% of "
                       f"{a['decisions']} decisions")
    return out


# ---- biases and calibration ------------------------------------------------------------------------------------


def position_flips(rows: Sequence[dict]) -> dict[str, Any] | None:
    """Pairwise rows: of the (comparison, sample) pairs judged in both orders, how many agree, and of those
    that do not, how many picked the first shown response both times, the second both times, or neither."""
    counts = {"consistent": 0, "first": 0, "second": 0, "other": 0}
    for row in rows:
        outputs = row.get("judge_outputs")
        if not isinstance(outputs, dict):
            return None
        for orders in outputs.values():
            for ab, ba in zip(orders["ab"], orders["ba"]):
                a, b = ab.get("decision"), ba.get("decision")
                if a is not None and a == flip(b):
                    counts["consistent"] += 1
                else:
                    counts["first" if a == b == A else "second" if a == b == B else "other"] += 1
    total = sum(counts.values())
    flips = total - counts["consistent"]
    return {**counts, "pairs": total,
            "first_share_of_flips": counts["first"] / flips if flips else None,
            "second_share_of_flips": counts["second"] / flips if flips else None}


def length_correlation(rows: Sequence[dict]) -> dict[str, Any] | None:
    """Spearman's rho between a candidate's pointwise score and its length (characters), over every scored one."""
    pairs = [(s, n) for row in rows if row.get("lengths") and (sc := candidate_scores(row)) is not None
             for s, n in zip(sc, row["lengths"]) if s is not None]
    if len(pairs) < 3 or len({s for s, _ in pairs}) < 2 or len({n for _, n in pairs}) < 2:
        return {"n": len(pairs), "rho": None, "p_value": None} if pairs else None
    from scipy import stats as sps

    res = sps.spearmanr([s for s, _ in pairs], [n for _, n in pairs])
    return {"n": len(pairs), "rho": float(res.statistic), "p_value": float(res.pvalue)}


def score_pairs(bench: ModuleType, rows: Sequence[dict]) -> list[tuple[float, float]]:
    """(score of the better response, score of the worse) for every labelled pair with both scores."""
    out = []
    for row in rows:
        scores = candidate_scores(row)
        if scores is None or not hasattr(bench, "preferred_pairs"):
            continue
        for x, y in bench.preferred_pairs(row):
            if scores[x] is not None and scores[y] is not None:
                out.append((scores[x], scores[y]))
    return out


def _bins(gaps: list[float]) -> list[tuple[float, float, str]]:
    """Gap bins: one per whole-number gap up to 5 (then '>5') for integer scores, else five quantile bins."""
    if all(float(g).is_integer() for g in gaps):
        top = max(gaps)
        bins = [(g - 0.5, g + 0.5, f"{g:g}") for g in range(1, min(int(top), 5) + 1)]
        return bins + ([(5.5, math.inf, ">5")] if top > 5 else [])
    import numpy as np

    edges = sorted(set(np.quantile(gaps, [0, 0.2, 0.4, 0.6, 0.8, 1.0]).tolist()))
    return [(lo if k else 0.0, hi + 1e-9, f"{lo:.2g}–{hi:.2g}") for k, (lo, hi) in enumerate(zip(edges, edges[1:]))]


def calibration(bench: ModuleType, rows: Sequence[dict]) -> dict[str, Any] | None:
    """Reliability table of a pointwise judge: by score gap |s_x - s_y|, how often the higher-scored response
    is the better one (with a Wilson 95 % interval); tied pairs are counted apart."""
    pairs = score_pairs(bench, rows)
    if not pairs:
        return None
    gaps = [abs(a - b) for a, b in pairs if a != b]
    table = []
    for lo, hi, label in (_bins(gaps) if gaps else []):
        inside = [(a, b) for a, b in pairs if a != b and lo <= abs(a - b) < hi]
        if inside:
            right = sum(a > b for a, b in inside)
            table.append({"gap": label, "pairs": len(inside), "higher_is_better": right / len(inside),
                          "ci": list(stats.wilson(right, len(inside)))})
    ties = sum(a == b for a, b in pairs)
    return {"pairs": len(pairs), "tied": ties, "tied_share": ties / len(pairs), "table": table}


def histogram(bench: ModuleType, rows: Sequence[dict]) -> dict[str, dict[str, int]] | None:
    """Counts of each (rounded) score given to the better vs the other responses, pointwise runs."""
    good, bad = (list(side) for side in bench.report_scores(list(rows)))
    if not any(x is not None for x in good + bad):
        return None
    out: dict[str, dict[str, int]] = {}
    for label, side in (("preferred", good), ("other", bad)):
        for s in side:
            key = "none" if s is None else f"{round(s, 1):g}"
            out.setdefault(key, {"preferred": 0, "other": 0})[label] += 1
    return dict(sorted(out.items(), key=lambda kv: (kv[0] == "none", float(kv[0]) if kv[0] != "none" else 0)))


def analyze(bench: ModuleType, rows: Sequence[dict], metrics: dict[str, Any], tie_policy: str | None,
            n_resamples: int = stats.RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """Everything above for one benchmark's rows, as stored in its metrics.json."""
    records = [dict(r) for r in rows]
    base = baselines(bench, records, tie_policy)
    agreement = length_agreement(bench, records)
    uncertainty = intervals(bench, records, tie_policy, n_resamples, seed) if n_resamples else None
    return {"uncertainty": uncertainty, "baselines": base,
            "flags": flags(metrics, base, agreement, (uncertainty or {}).get("intervals")),
            "bias": {"length_agreement": agreement, "length_spearman": length_correlation(records),
                     "position": position_flips(records), "score_histogram": histogram(bench, records)},
            "calibration": calibration(bench, records)}


def paired_keys(bench: ModuleType, rows: Sequence[dict]) -> list[Hashable]:
    """A key per row that names the same item in another run of the same benchmark data."""
    stratum = stratum_of(bench)
    return [(str(stratum(r)), str(r.get("id", r.get("pair_id"))), str(r.get("response_model"))) for r in rows]


def item_values(bench: ModuleType, rows: Sequence[dict], tie_policy: str | None) -> list[float | None]:
    return [item_value(bench.item_result(r, tie_policy)) for r in rows]

