"""Uncertainty for accuracies: bootstrap intervals over items or over groups of items, paired differences
with a p-value, and a Wilson interval for a share. Pure functions of numbers; no benchmark names here.

Two bootstraps, both with a fixed seed and written into metrics.json by their callers (`describe`):

* `mean_ci` — an accuracy that is a plain mean of per-item values (the quickstart's held-out pairs, GSM8K's
  best-of-4): ``scipy.stats.bootstrap`` (BCa) over items, or over groups when `groups` is given (the group's
  items move together; the statistic is the pooled mean, sum over sum).
* `metric_intervals` / `paired_intervals` — a benchmark's official metrics, which are not plain means
  (RM-Bench's mean of hard/normal/easy per domain, RewardBench's count-weighted sections, RewardBench 2's
  Ties formula): the records are resampled by cluster (a prompt: RM-Bench's 3x3 is one record, RewardBench 2's
  ``ref:N`` and ``tied:N`` are one cluster) within each stratum (subset/domain, so every subset stays present
  in every resample), the benchmark's own `score` is recomputed on each resample, and the percentile interval
  of every metric is read off. A paired comparison resamples the same clusters for both runs.

>>> lo, hi = wilson(45, 50)
>>> round(lo, 3), round(hi, 3)
(0.786, 0.957)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

LEVEL = 0.95
RESAMPLES = 1000


def describe(method: str, n_resamples: int, seed: int, level: float = LEVEL, unit: str = "items") -> dict[str, Any]:
    """What an interval is, for metrics.json: method, resamples, seed, level and the resampling unit."""
    return {"method": method, "n_resamples": n_resamples, "seed": seed, "level": level, "unit": unit}


def mean_ci(values: Sequence[float], groups: Sequence[Hashable] | None = None, level: float = LEVEL,
            n_resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """BCa bootstrap interval of the mean of `values` (over items, or over `groups` of items). A degenerate sample
    (every value alike, or one group), where every resample is the same: 0/1 values all 0 or all 1 get the Wilson
    interval over the number of groups (200 of 200 right is not a certainty); other values get the point."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return (math.nan, math.nan)
    if groups is None:
        sums, counts = x, np.ones_like(x)
    else:
        keys = {g: k for k, g in enumerate(dict.fromkeys(groups))}
        idx = np.array([keys[g] for g in groups])
        sums, counts = np.bincount(idx, weights=x), np.bincount(idx).astype(float)
    point = float(sums.sum() / counts.sum())
    if len(sums) < 2 or np.allclose(sums / counts, point):
        if point in (0.0, 1.0) and np.isin(x, (0.0, 1.0)).all():
            return wilson(int(round(point * len(sums))), len(sums), level)
        return (point, point)
    res = stats.bootstrap((sums, counts), lambda s, c, axis=-1: s.sum(axis=axis) / c.sum(axis=axis), paired=True,
                          vectorized=True, n_resamples=n_resamples, confidence_level=level, method="BCa",
                          rng=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if math.isnan(lo) or math.isnan(hi):  # BCa can fail on near-degenerate data: fall back to percentiles
        lo, hi = (float(v) for v in np.percentile(res.bootstrap_distribution, [50 * (1 - level), 50 * (1 + level)]))
    return (lo, hi)


def wilson(successes: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval of a share `successes`/`n` (small bins of a reliability table)."""
    if n == 0:
        return (math.nan, math.nan)
    from scipy import stats

    ci = stats.binomtest(successes, n).proportion_ci(confidence_level=level, method="wilson")
    return (float(ci.low), float(ci.high))


def sign_test(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Exact two-sided sign test on paired per-item values: items where A is better vs where B is (ties dropped)."""
    from scipy import stats

    wins = sum(x > y for x, y in zip(a, b))
    losses = sum(x < y for x, y in zip(a, b))
    p = float(stats.binomtest(wins, wins + losses).pvalue) if wins + losses else 1.0
    return {"a_better": wins, "b_better": losses, "same": len(a) - wins - losses, "p_value": p}


# ---- stratified cluster bootstrap of arbitrary metrics ----------------------------------------------------------


def clusters_by_stratum(records: Sequence[dict], stratum: Callable[[dict], Hashable],
                        cluster: Callable[[dict], Hashable]) -> list[list[list[int]]]:
    """Record indices grouped as [stratum][cluster] -> indices (first-seen order)."""
    table: dict[Hashable, dict[Hashable, list[int]]] = {}
    for k, record in enumerate(records):
        table.setdefault(stratum(record), {}).setdefault(cluster(record), []).append(k)
    return [list(by_cluster.values()) for by_cluster in table.values()]


def resamples(layout: list[list[list[int]]], n_resamples: int, seed: int):
    """Yield `n_resamples` lists of record indices: each stratum's clusters drawn with replacement, as many as it
    has."""
    rng = np.random.default_rng(seed)
    for _ in range(n_resamples):
        picked: list[int] = []
        for clusters in layout:
            for c in rng.integers(0, len(clusters), len(clusters)):
                picked += clusters[c]
        yield picked


def flat(metrics: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """{"chat": {"hard": 1}} -> {"chat.hard": 1.0}: every number of a nested metrics dict by its dotted name."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value is not None:
            out[f"{prefix}{key}"] = float(value)
    return out


def _percentiles(draws: dict[str, list[float]], level: float) -> dict[str, list[float]]:
    q = [50 * (1 - level), 50 * (1 + level)]
    out = {}
    for key, values in draws.items():
        v = np.asarray(values, dtype=float)
        v = v[~np.isnan(v)]
        if v.size:
            out[key] = [float(x) for x in np.percentile(v, q)]
    return out


def metric_intervals(records: Sequence[dict], score: Callable[[list[dict]], dict], stratum: Callable[[dict], Hashable],
                     cluster: Callable[[dict], Hashable], n_resamples: int = RESAMPLES, seed: int = 0,
                     level: float = LEVEL) -> dict[str, list[float]]:
    """{flattened metric name: [low, high]}: percentile intervals of `score(records)` under the stratified
    cluster bootstrap (see the module doc)."""
    if not records or n_resamples < 1:
        return {}
    layout = clusters_by_stratum(records, stratum, cluster)
    draws: dict[str, list[float]] = {}
    for picked in resamples(layout, n_resamples, seed):
        for key, value in flat(score([records[k] for k in picked])).items():
            draws.setdefault(key, []).append(value)
    return _percentiles(draws, level)


def paired_intervals(a: Sequence[dict], b: Sequence[dict], score: Callable[[list[dict]], dict],
                     stratum: Callable[[dict], Hashable], cluster: Callable[[dict], Hashable],
                     n_resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL) -> dict[str, dict[str, float]]:
    """Per metric, the difference B - A on the same items (`a[k]` and `b[k]` are the same item judged by two
    runs): {"a", "b", "diff", "low", "high", "p_value"}. The p-value is the two-sided paired-bootstrap one:
    twice the smaller share of resampled differences on either side of zero (at least 1 / n_resamples)."""
    if len(a) != len(b):
        raise ValueError(f"paired records differ in number: {len(a)} vs {len(b)}")
    if not a:
        return {}
    point_a, point_b = flat(score(list(a))), flat(score(list(b)))
    layout = clusters_by_stratum(a, stratum, cluster)
    draws: dict[str, list[float]] = {}
    for picked in resamples(layout, n_resamples, seed):
        fa, fb = flat(score([a[k] for k in picked])), flat(score([b[k] for k in picked]))
        for key in fa.keys() & fb.keys():
            draws.setdefault(key, []).append(fb[key] - fa[key])
    out = {}
    cis = _percentiles(draws, level)
    for key in point_a:  # in the benchmark's own order
        if key not in cis or key not in point_b:
            continue
        lo, hi = cis[key]
        d = np.asarray(draws[key])
        p = min(1.0, max(2 * min(np.mean(d <= 0), np.mean(d >= 0)), 1 / n_resamples))
        if np.all(d == 0):
            p = 1.0
        out[key] = {"a": point_a[key], "b": point_b[key], "diff": point_b[key] - point_a[key], "low": lo, "high": hi,
                    "p_value": float(p)}
    return out
