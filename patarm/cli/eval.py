"""`patarm eval ...`: judge benchmarks, re-score saved samples, compare runs.

    patarm eval --benchmark rmbench judgebench [--model {run_dir}/export] [--data PATH ...] [--output DIR]
    patarm eval rescore --benchmark NAME --samples FILE [--tie_policy strict|half]
    patarm eval compare DIR1 DIR2 ... [--output FILE.md] [--plot FILE.png]
    patarm eval report DIR

A run writes DIR/<benchmark>/{samples.jsonl, metrics.json, plots}, DIR/metrics.json, DIR/report.md and
DIR/cache.sqlite (the judgment cache: re-running the same command judges only what is missing).
"""

from __future__ import annotations

import argparse
import json

from patarm.eval import registry
from patarm.eval.records import TIE_POLICIES


def _rescore(argv: list[str]) -> None:
    from patarm.eval.runner import rescore

    p = argparse.ArgumentParser(prog="patarm eval rescore", description="Recompute metrics from a samples file; "
                                "prints them as JSON on stdout.")
    p.add_argument("--benchmark", required=True, choices=sorted(registry.BENCHMARKS))
    p.add_argument("--samples", required=True,
                   help="samples.jsonl as `patarm eval` writes it, or the benchmark's own output file (JudgeBench "
                        "outputs/*.jsonl, RewardBench eval-set-scores/*.json, RM-Bench results/*.json)")
    p.add_argument("--tie_policy", "--tie-policy", choices=TIE_POLICIES, default=None,
                   help="a tie is wrong (strict) or half right (half); default: the benchmark's official rule")
    a = p.parse_args(argv)
    print(json.dumps(rescore(a.benchmark, a.samples, a.tie_policy), indent=2, sort_keys=True))


def _compare(argv: list[str]) -> None:
    from pathlib import Path

    from patarm.eval.report import compare, plot_compare

    p = argparse.ArgumentParser(prog="patarm eval compare", description="Side-by-side metrics of several runs, and "
                                "each later run's paired difference from the first on the items both judged.")
    p.add_argument("runs", nargs="+", help="output folders of `patarm eval` runs")
    p.add_argument("--output", help="also write the markdown to this file")
    p.add_argument("--plot", help="also write a PNG of the headline scores side by side")
    p.add_argument("--bootstrap_resamples", "--bootstrap-resamples", type=int, default=1000,
                   help="paired-bootstrap resamples for the differences' 95%% intervals and p-values")
    p.add_argument("--seed", type=int, default=0, help="the paired bootstrap's seed")
    a = p.parse_args(argv)
    if a.bootstrap_resamples < 1:
        p.error(f"--bootstrap_resamples must be >= 1, got {a.bootstrap_resamples}")
    text = compare(a.runs, n_resamples=a.bootstrap_resamples, seed=a.seed)
    if a.plot:
        plot_compare(a.runs, a.plot)
    if a.output:
        Path(a.output).write_text(text, encoding="utf-8")
    print(text)


def _report(argv: list[str]) -> None:
    from patarm.eval.report import write_report

    p = argparse.ArgumentParser(prog="patarm eval report", description="Re-write a run's report.md and plots.")
    p.add_argument("run", help="output folder of a `patarm eval` run")
    p.add_argument("--no-plots", action="store_true")
    a = p.parse_args(argv)
    print(write_report(a.run, plots=not a.no_plots))


def main(command: str, argv: list[str]) -> None:
    if argv and argv[0] == "rescore":
        return _rescore(argv[1:])
    if argv and argv[0] in ("compare", "report"):
        return (_compare if argv[0] == "compare" else _report)(argv[1:])
    from patarm.config import parse_stage
    from patarm.eval.report import console_summary
    from patarm.eval.runner import EvalArguments, run_eval

    (args,) = parse_stage((EvalArguments,), argv, prog="patarm eval", description=__doc__)
    results = run_eval(args)
    print(console_summary(results, args.output))
