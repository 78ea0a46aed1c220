"""Numbers with known answers: bootstrap coverage on synthetic data, paired tests, and the intervals' plumbing."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from patarm.eval import stats

DATASETS = 200  # synthetic datasets per coverage check: the covered count is Binomial(200, 0.95) if the rate is right


def _coverage_ok(covered: int, n: int = DATASETS, level: float = 0.95) -> bool:
    """Covered count consistent with the stated level (two-sided exact binomial test at 0.1 %)."""
    return sps.binomtest(covered, n, level).pvalue > 1e-3


def test_item_bootstrap_covers_a_known_proportion_at_the_stated_rate():
    rng, p, n = np.random.default_rng(1), 0.7, 80
    covered = 0
    for k in range(DATASETS):
        lo, hi = stats.mean_ci(rng.random(n) < p, n_resamples=1000, seed=k)
        covered += lo <= p <= hi
    assert _coverage_ok(covered), covered


def test_cluster_bootstrap_covers_where_the_item_bootstrap_does_not():
    """Items of a prompt share its difficulty: the item bootstrap is too narrow, the cluster bootstrap is right."""
    rng, p, clusters, size = np.random.default_rng(2), 0.6, 40, 6
    by_item = by_cluster = 0
    for k in range(DATASETS):
        q = rng.beta(0.6 * 0.5, 0.4 * 0.5, clusters)  # prompt difficulty, mean 0.6, strongly spread
        values = (rng.random((clusters, size)) < q[:, None]).ravel()
        groups = np.repeat(np.arange(clusters), size)
        lo, hi = stats.mean_ci(values, n_resamples=500, seed=k)
        by_item += lo <= p <= hi
        lo, hi = stats.mean_ci(values, groups=groups, n_resamples=500, seed=k)
        by_cluster += lo <= p <= hi
    assert _coverage_ok(by_cluster), by_cluster
    assert by_item < 0.8 * DATASETS, by_item  # far below 95 %: why benchmarks with grouped items need clusters


def test_stratified_metric_bootstrap_covers_a_mean_of_strata():
    """A headline that is the mean of two subsets' accuracies (as RewardBench 2's), resampled within subsets."""
    rng, ps, n = np.random.default_rng(3), {"x": 0.8, "y": 0.5}, 50
    truth = sum(ps.values()) / 2

    def score(rs):
        hits, counts = {s: 0 for s in ps}, {s: 0 for s in ps}
        for r in rs:
            hits[r["s"]] += r["ok"]
            counts[r["s"]] += 1
        return {"score": 50 * sum(hits[s] / counts[s] for s in ps)}

    covered = 0
    for k in range(DATASETS):
        records = [{"id": f"{s}{i}", "s": s, "ok": bool(rng.random() < p)} for s, p in ps.items() for i in range(n)]
        lo, hi = stats.metric_intervals(records, score, lambda r: r["s"], lambda r: r["id"], n_resamples=200, seed=k)[
            "score"
        ]
        covered += lo <= 100 * truth <= hi
    assert _coverage_ok(covered), covered


def test_degenerate_samples_get_the_point_as_their_interval():
    assert stats.mean_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)
    assert stats.mean_ci([0, 1, 1], groups=["a", "a", "a"]) == (pytest.approx(2 / 3),) * 2
    # all right: every resample is 1, but 200 of 200 is not a certainty: the Wilson interval over the items
    assert stats.mean_ci([1] * 200) == stats.wilson(200, 200) and stats.wilson(200, 200)[0] == pytest.approx(
        0.9812, abs=1e-4
    )
    assert stats.mean_ci([0] * 6, groups=[1, 1, 2, 2, 3, 3]) == stats.wilson(0, 3)
    assert all(np.isnan(stats.mean_ci([])))


def test_wilson_matches_the_textbook_formula():
    k, n, z = 45, 50, sps.norm.ppf(0.975)
    phat = k / n
    centre = (phat + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n))
    assert stats.wilson(k, n) == (pytest.approx(centre - half), pytest.approx(centre + half))


def test_sign_test_counts_and_exact_p_value():
    out = stats.sign_test([1, 1, 1, 0, 0.5], [0, 0, 0, 0, 0.5])
    assert out == {"a_better": 3, "b_better": 0, "same": 2, "p_value": pytest.approx(0.25)}  # 2 * 0.5**3
    assert stats.sign_test([1], [1])["p_value"] == 1.0


def test_paired_intervals_on_identical_and_on_shifted_runs():
    a = [{"id": i, "s": "x", "ok": i % 2} for i in range(40)]
    score = lambda rs: {"acc": 100 * np.mean([r["ok"] for r in rs])}  # noqa: E731
    same = stats.paired_intervals(a, a, score, lambda r: r["s"], lambda r: r["id"], n_resamples=200)["acc"]
    assert same["diff"] == 0 and same["low"] == same["high"] == 0 and same["p_value"] == 1.0
    better = [dict(r, ok=1) for r in a]  # B is right everywhere A is, and on 20 more items
    d = stats.paired_intervals(a, better, score, lambda r: r["s"], lambda r: r["id"], n_resamples=500)["acc"]
    assert d["diff"] == 50 and 0 < d["low"] <= 50 <= d["high"] and d["p_value"] <= 0.002
    with pytest.raises(ValueError, match="differ in number"):
        stats.paired_intervals(a, a[:3], score, lambda r: r["s"], lambda r: r["id"])


def test_resamples_keep_every_stratum_and_move_clusters_whole():
    layout = stats.clusters_by_stratum([{"s": "x", "c": 1}, {"s": "x", "c": 1}, {"s": "y", "c": 2}, {"s": "y", "c": 3}],
                                       lambda r: r["s"], lambda r: r["c"])
    assert layout == [[[0, 1]], [[2], [3]]]
    for picked in stats.resamples(layout, 50, seed=0):
        assert picked[:2] == [0, 1] and len(picked) == 4 and set(picked[2:]) <= {2, 3}
