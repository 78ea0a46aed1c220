"""The seeds mode (`seeds: [0, 1, 2]`): the recipe once per seed, each in `{run_dir}/seed-<s>/` on the same held-out
problems (the split seed stays fixed), and the headline as mean ± standard error over the seeds
(`{run_dir}/report-seeds.{md,json}`).

>>> [round(x, 4) for x in mean_se([50.0, 52.0, 51.0])]
[51.0, 0.5774]
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

METRICS = (("best_of_n", "best-of-4 %", 2), ("pair_accuracy", "pair accuracy", 3),
           ("top_tied_mixed", "top tied (correct & incorrect)", 2))


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sample standard deviation / √n; 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def per_seed_args(args: Any, seed: int) -> Any:
    """One seed's arguments: its own run folder, the shared split seed, no nested seeds (and the SFT judge to reuse,
    if any, from the same seed's folder of that run)."""
    split_seed = args.seed if args.split_seed is None else args.split_seed
    reuse = str(Path(args.reuse_sft) / f"seed-{seed}") if getattr(args, "reuse_sft", "") else ""
    return replace(args, seed=seed, seeds=None, split_seed=split_seed, run_dir=str(Path(args.run_dir) / f"seed-{seed}"),
                   reuse_sft=reuse)


READINGS = {"readout": "evidence read out", "expected": "verdict probability"}


def aggregate(reports: dict[int, dict]) -> dict:
    """{arm: {judge: {metric: [mean, se, values]}}} over the seeds' reports (judges: stages, their evidence read
    out and verdict-probability scores where reported, and bt)."""
    out: dict[str, dict] = {}
    first = next(iter(reports.values()))
    for arm in first["arms"]:
        judges: dict[str, list[dict]] = {}
        for report in reports.values():
            res = report["arms"][arm]
            for judge, m in [*res["stages"].items(), *([("bt", res["bt"])] if "bt" in res else [])]:
                judges.setdefault(judge, []).append(m)
                for key, name in READINGS.items():  # the same judgments read out / by the verdict probability
                    if key in m:
                        judges.setdefault(f"{judge}, {name}", []).append(m[key])
        out[arm] = {judge: {key: [*mean_se([m[key] for m in ms]), [m[key] for m in ms]] for key, _, _ in METRICS}
                    for judge, ms in judges.items() if len(ms) == len(reports)}
    return out


def table(summary: dict, seeds: Sequence[int]) -> str:
    head = " | ".join(name for _, name, _ in METRICS)
    lines = [f"| judge | arm | {head} |", "|---|---|" + "---|" * len(METRICS)]
    for arm, judges in summary.items():
        for judge, metrics in judges.items():
            cells = " | ".join(f"{metrics[k][0]:.{d}f} ± {metrics[k][1]:.{d}f}" for k, _, d in METRICS)
            lines.append(f"| {judge} | {arm} | {cells} |")
    return f"Mean ± s.e. over seeds {list(seeds)} (same held-out problems):\n\n" + "\n".join(lines)


VERDICT_METRICS = (("said_pass", "said pass"), ("accuracy", "verdict accuracy"), ("p_pass_auc", "P(pass) AUC"))


def verdict_aggregate(reports: dict[int, dict]) -> dict:
    """{arm: {stage: {metric: [mean, se, values]}}} of the judge's verdicts against the truth (`verdict` in a stage's
    report, `patarm.demo.gsm8k.verdict.verdict_summary`) where every seed reports the metric."""
    out: dict[str, dict] = {}
    first = next(iter(reports.values()))
    for arm, res in first["arms"].items():
        for stage in res["stages"]:
            vs = [r["arms"][arm]["stages"].get(stage, {}).get("verdict") or {} for r in reports.values()]
            cells = {key: [*mean_se(values), values] for key, _ in VERDICT_METRICS
                     if None not in (values := [v.get(key) for v in vs])}
            if cells:
                out.setdefault(arm, {})[stage] = cells
    return out


def verdict_table(summary: dict) -> str:
    lines = ["| judge | arm | " + " | ".join(name for _, name in VERDICT_METRICS) + " |",
             "|---|---|" + "---|" * len(VERDICT_METRICS)]
    for arm, stages in summary.items():
        for stage, cells in stages.items():
            row = " | ".join(f"{cells[k][0]:.3f} ± {cells[k][1]:.3f}" if k in cells else "—"
                             for k, _ in VERDICT_METRICS)
            lines.append(f"| {stage} | {arm} | {row} |")
    return ("The judge's own pass/fail verdict against the truth (mean ± s.e.; a seed's report.md explains the "
            "columns):\n\n" + "\n".join(lines)) if len(lines) > 2 else ""


def share_base_judgments(run_dir: Path, first: int, seed: int) -> None:
    """The base model's greedy judgments do not depend on the seed (one model, the same held-out prompts, no
    sampling): a later seed starts from the first seed's `<arm>/eval/base.jsonl` instead of judging again (~240 s
    an arm on 2 cores); a file already there is kept."""
    src_root = run_dir / f"seed-{first}"
    for src in src_root.glob("*/eval/base.jsonl"):
        dst = run_dir / f"seed-{seed}" / src.relative_to(src_root)
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)


def run_seeds(args: Any, run_one: Callable[[Any], dict]) -> dict:
    """Every seed (resuming finished ones; the base model's judgments shared from the first), then the aggregate
    report; returns it."""
    reports: dict[int, dict] = {}
    for seed in args.seeds:
        if reports:
            share_base_judgments(Path(args.run_dir), args.seeds[0], seed)
        reports[seed] = run_one(per_seed_args(args, seed))
    summary, verdicts = aggregate(reports), verdict_aggregate(reports)
    out = Path(args.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = table(summary, args.seeds) + ("\n\n" + verdict_table(verdicts) if verdicts else "")
    print("\n" + text + "\n", flush=True)
    (out / "report-seeds.md").write_text(f"# GSM8K skill recipe over seeds\n\n{text}\n\nPer seed: "
                                         + ", ".join(f"seed-{s}/report.md" for s in args.seeds) + "\n")
    result = {"seeds": list(args.seeds), "summary": summary, "verdicts": verdicts,
              "seconds": round(sum(r["seconds"] for r in reports.values()), 1),
              "paths": {"report_md": str(out / "report-seeds.md"), "report_json": str(out / "report-seeds.json")}}
    (out / "report-seeds.json").write_text(json.dumps(result, indent=2))
    return result
