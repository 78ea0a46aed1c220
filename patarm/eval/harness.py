"""Run one benchmark end to end: load items → judge → records → metrics; write samples.jsonl and metrics.json.

Output folder layout (one sub-folder per benchmark, so several benchmarks share one --output):
``<out>/<benchmark>/samples.jsonl`` (one line per item: the official record fields, the outcome, the raw
judge outputs), ``<out>/<benchmark>/metrics.json``, ``<out>/cache.sqlite`` (the judgment cache, shared
by all benchmarks of the run) and ``<out>/metrics.json`` (every benchmark's metrics).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from itertools import zip_longest
from pathlib import Path
from typing import Any

from patarm.backends.cache import CachedBackend, CacheStats
from patarm.eval import registry
from patarm.eval.analysis import analyze
from patarm.eval.judging import JudgingPlan, check_options, judge_pairwise, judge_pointwise
from patarm.eval.records import check_tie_policy
from patarm.eval.stats import RESAMPLES
from patarm.judge.truncate import PromptFitter


def group_key(item: dict) -> str:
    """The stratum an item belongs to, so that --limit keeps every domain/subset represented."""
    return str(item.get("group") or item.get("domain") or item.get("subset") or "")


def limit_items(items: list[dict], limit: int | None) -> list[dict]:
    """The first `limit` items, taken round-robin across strata (all items when `limit` is None)."""
    if limit is None or limit >= len(items):
        return items
    groups: dict[str, list[dict]] = {}
    for item in items:
        groups.setdefault(group_key(item), []).append(item)
    interleaved = [it for row in zip_longest(*groups.values()) for it in row if it is not None]
    return interleaved[:limit]


def judge_items(bench_name: str, items: list[dict], backend: CachedBackend, opts: JudgingPlan,
                fit: Any = None) -> list:
    """Judge `items` of the benchmark `bench_name` (see `patarm.eval.judging`); `fit` shortens prompts."""
    bench = registry.get(bench_name)
    check_options(bench, items, opts)
    judge = judge_pairwise if opts.mode == "pairwise" else judge_pointwise
    return judge(bench, items, backend, opts, fit or (lambda messages: messages))


def _count_outputs(judged: list, mode: str) -> tuple[int, int]:
    """(judgments, judgments without a valid score/decision) over all items."""
    total = invalid = 0
    for j in judged:
        groups = j.outputs if mode == "pointwise" else [o for v in j.outputs.values() for o in (v["ab"], v["ba"])]
        for group in groups:
            for out in group:
                total += 1
                invalid += (out["score"] if mode == "pointwise" else out["decision"]) is None
    return total, invalid


def _tied_items(judged: list) -> int:
    """Pointwise items whose candidates all got the same mean valid score (at least two scored): the judge did
    not separate them, and a tie counts as wrong (or half) under every benchmark's rule."""
    tied = 0
    for j in judged:
        means = []
        for group in j.outputs:
            scores = [out["score"] for out in group if out["score"] is not None]
            if scores:
                means.append(sum(scores) / len(scores))
        tied += len(means) >= 2 and len(set(means)) == 1
    return tied


def run_info(judged: list, opts: JudgingPlan, backend: CachedBackend, items: list[dict], bench: Any) -> dict[str, Any]:
    """Judge-call accounting and judging diagnostics for metrics.json."""
    total, invalid = _count_outputs(judged, opts.mode)
    per_draw = 2 if opts.mode == "pairwise" else 1
    if opts.mode == "pairwise":
        fixed = sum(per_draw * opts.num_samples * len(bench.comparisons(it)) for it in items)
    else:
        fixed = sum(opts.num_samples * len(it["candidates"]) for it in items)
    info = {**asdict(opts), "items": len(items), "judge_calls": total, "judge_calls_fixed_n": fixed,
            "calls_saved": 1 - total / fixed if fixed else 0.0, "generated": backend.stats.generated,
            "invalid_judgments": invalid, "invalid_rate": 100.0 * invalid / total if total else 0.0}
    consistent = [c for j in judged for c in j.consistent]
    if opts.mode == "pointwise":
        info["tied_items"] = _tied_items(judged)
    if opts.mode == "pairwise":
        info["position_consistency"] = 100.0 * sum(consistent) / len(consistent) if consistent else 0.0
    return info


def run_benchmark(bench_name: str, items: list[dict], backend: CachedBackend, opts: JudgingPlan, out_dir: Path,
                  tie_policy: str | None = None, n_resamples: int = RESAMPLES) -> dict[str, Any]:
    """Judge and score one benchmark; write its samples.jsonl and metrics.json under `out_dir`/<name>, with
    the metrics' bootstrap intervals (`n_resamples`, seeded by the judging seed; 0: none), trivial baselines,
    bias probes and calibration (`patarm.eval.analysis`)."""
    bench = registry.get(bench_name)
    check_tie_policy(tie_policy)
    backend.desc, backend.stats = bench_name, CacheStats()  # this benchmark's own counts
    start = time.perf_counter()
    fit = PromptFitter(backend)  # every prompt fits the window with room for the judgment, counted
    judged = judge_items(bench_name, items, backend, opts, fit)
    records = [j.record for j in judged]
    metrics = bench.score(records, tie_policy=tie_policy)
    result = {"benchmark": bench_name, "headline": bench.headline(metrics), "metrics": metrics,
              "run": {**run_info(judged, opts, backend, items, bench), "tie_policy": tie_policy,
                      "truncated_prompts": fit.truncated, "prompts_over_window": fit.too_long,
                      "seconds": round(time.perf_counter() - start, 3)}}
    bench_dir = Path(out_dir) / bench_name
    bench_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    with (bench_dir / "samples.jsonl").open("w", encoding="utf-8") as fh:
        for item, j in zip(items, judged):
            row = {**j.record, "outcome": bench.item_result(j.record, tie_policy), "draws": j.draws or None,
                   "lengths": [len(str(c)) for c in item["candidates"]], "judge_outputs": j.outputs}
            if "subset" in item and "subset" not in row:
                row["subset"] = item["subset"]
            rows.append(row)
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    result.update(analyze(bench, rows, metrics, tie_policy, n_resamples=n_resamples, seed=opts.seed or 0))
    (bench_dir / "metrics.json").write_text(json.dumps(result, indent=2, sort_keys=True), encoding="utf-8")
    return result
