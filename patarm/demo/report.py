"""Quickstart report: the stage table printed and written as report.md, report.json and a PNG of
pair accuracy and margin over GRPO steps."""

from __future__ import annotations

import json
from pathlib import Path

from patarm.demo.kit import plot_grpo_curve


def ci(interval: list | tuple | None, digits: int = 3) -> str:
    """' [0.912, 0.981]' beside an accuracy, or '' when there is none (a report written before intervals)."""
    return f" [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]" if interval else ""


def stage_table(stages: dict[str, dict]) -> str:
    """Markdown table: stage → held-out pair accuracy [95 % interval], format-valid rate, mean margin."""
    lines = ["| stage | held-out pair accuracy [95% CI] | format-valid | mean margin s̄c − s̄r |", "|---|---|---|---|"]
    for name, m in stages.items():
        lines.append(f"| {name} | {m['accuracy']:.3f}{ci(m.get('accuracy_ci'))} | {m['format_valid']:.3f} | "
                     f"{m['margin']:.2f} |")
    return "\n".join(lines)


def curve_trend(curve: list[dict], frac: float = 0.2) -> dict[str, float]:
    """Mean logged pair accuracy over the first and the last `frac` of GRPO steps (per-step values
    are noisy: each step sees a few pairs)."""
    k = max(1, int(len(curve) * frac))
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    return {"pair_accuracy_first": mean([c["pair_accuracy"] for c in curve[:k]]),
            "pair_accuracy_last": mean([c["pair_accuracy"] for c in curve[-k:]])}


def write_quickstart_report(report: dict, out: Path) -> dict[str, str]:
    """Print the table; write report.md, report.json and grpo_curve.png; return their paths."""
    report["grpo_trend"] = curve_trend(report["grpo_curve"]) if report["grpo_curve"] else None
    trend = report["grpo_trend"]
    table = stage_table(report["stages"]) + (
        f"\n\nGRPO rollouts' pair accuracy (PAR satisfied), mean of the first / last 20 % of steps: "
        f"{trend['pair_accuracy_first']:.3f} → {trend['pair_accuracy_last']:.3f}" if trend else
        f"\n\nGRPO skipped: {report.get('grpo_skipped') or 'no GRPO steps logged'}")
    if report.get("sft_dev"):  # the SFT stage's checks on the dev pairs (patarm.train.dev)
        checks = report["sft_dev"]
        from patarm.train.dev import best_check

        kept = best_check(checks)["step"]
        table += ("\n\nSFT dev pair accuracy by step (the judge kept is the best check's, step "
                  f"{kept}): " + ", ".join(f"{r['step']}: {r['dev_accuracy']:.3f}" for r in checks))
    print("\n" + table + "\n", flush=True)
    paths = {"report_md": out / "report.md", "report_json": out / "report.json", "plot": out / "grpo_curve.png"}
    if report["grpo_curve"]:
        plot_grpo_curve(report["grpo_curve"], paths["plot"])
    else:
        del paths["plot"]
    paths["report_json"].write_text(json.dumps(report, indent=2))
    paths["report_md"].write_text(
        "# PaTaRM quickstart report\n\nHeld-out pairs judged pointwise (greedy); the chosen response wins when its "
        "score is strictly higher. Brackets: 95 % bootstrap interval over the held-out pairs (BCa, 1000 resamples, "
        "seed 0).\n\n" + table + (f"\n\n![GRPO curve]({paths['plot'].name})" if "plot" in paths else "")
        + f"\n\nTotal time: {report.get('seconds', 0)} s\n")
    return {k: str(v) for k, v in paths.items()}
