"""Reports for eval runs: a markdown table per run, PNG plots, and a side-by-side comparison of runs.

Plots (matplotlib, Agg backend, written beside each benchmark's samples): ``subsets.png`` (per-subset /
per-domain bars), ``scores.png`` (histogram of the scores given to the preferred vs the other response,
pointwise runs) and a benchmark's own plots (`report_plots` in its module, e.g. RM-Bench's 3x3 matrix).
What to plot per benchmark comes from its module (`report_bars`, `report_scores`): no benchmark names here.
Every number comes with what explains it: the share of judgments that were valid, how many prompts were
truncated, and — when a score is low because the judge's outputs could not be parsed — a sentence saying so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from patarm.eval import registry, stats
from patarm.eval.report_analysis import (
    BASELINE_TITLES,
    bias_section,
    ci_text,
    headline_ci,
    metrics_table,
    plot_analysis,
)


def flatten(metrics: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """{"chat": {"hard": 1}} → {"chat.hard": 1}: one row per number for tables."""
    flat: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[name] = float(value)
    return flat


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def markdown_table(columns: dict[str, dict[str, float]], first: str = "metric") -> str:
    """A markdown table: one row per metric key (in first-seen order), one column per entry of `columns`."""
    keys: list[str] = []
    for col in columns.values():
        keys += [k for k in col if k not in keys]
    lines = [f"| {first} | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    lines += [f"| {k} | " + " | ".join(_fmt(c.get(k)) for c in columns.values()) + " |" for k in keys]
    return "\n".join(lines)


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """The {benchmark: metrics.json content} of a run folder."""
    path = Path(run_dir) / "metrics.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; is {run_dir} the --output folder of a `patarm eval` run?")
    return json.loads(path.read_text(encoding="utf-8"))


def _read_samples(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def validity(run: dict[str, Any]) -> str:
    """'93.0% of 120 judgments valid, 4 prompts truncated' for a benchmark's run info."""
    text = f"{100 - run.get('invalid_rate', 0.0):.1f}% of {run.get('judge_calls', 0)} judgments valid"
    if run.get("truncated_prompts"):
        text += f", {run['truncated_prompts']} prompts truncated to fit the judge's prompt budget"
    if run.get("prompts_over_window"):
        text += f" ({run['prompts_over_window']} still too long)"
    if run.get("tied_items"):
        text += f", {run['tied_items']} of {run.get('items', '?')} items with every response scored alike"
    return text


def explain(result: dict[str, Any]) -> str | None:
    """A sentence when the headline is low because the judge's outputs could not be parsed."""
    run = result.get("run", {})
    invalid = run.get("invalid_rate", 0.0)
    if invalid >= 50:
        return (f"{invalid:.0f}% of the judgments could not be parsed (no valid score or decision), and those count as "
                "wrong or as ties: the headline measures the output format as much as the judging. Check the template "
                "(--template) and the judgment length (--max_new_tokens) against what the judge was trained with.")
    items, tied = run.get("items") or 0, run.get("tied_items") or 0
    if items and tied / items >= 0.5:
        return (f"the judge gave every response the same score in {tied} of {items} items, and a tie is not a win: "
                "the headline is low because the judge does not separate these responses, not because it prefers "
                "the wrong ones.")
    return None


def _setting(run: dict[str, Any]) -> str:
    """What a run was: its judge, template, judgment length and size, for titles."""
    model = Path(str(run.get("model", "?"))).name or run.get("model")
    return (f"{model}, {run.get('template') or 'default'} template, {run.get('max_new_tokens')} new tokens, "
            f"{run.get('mode')} {run.get('voting')}@{run.get('num_samples')}, {run.get('items')} items")


def plot_benchmark(name: str, metrics: dict[str, Any], records: Sequence[dict], out_dir: Path,
                   tie_policy: str | None = None, run: dict[str, Any] | None = None,
                   analysed: dict[str, Any] | None = None) -> list[Path]:
    """Write this benchmark's PNG plots into `out_dir`; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    bench, run = registry.get(name), run or {}
    written = []
    bars = {k: v for k, v in bench.report_bars(metrics).items() if k not in ("overall", "score", "avg")}
    headline = bench.headline(metrics)
    if bars:
        fig, ax = plt.subplots(figsize=(max(5.0, 0.5 * len(bars) + 2.5), 3.8))
        drawn = ax.bar(list(bars), list(bars.values()), color="#4C72B0")
        ax.bar_label(drawn, fmt="%.1f", fontsize=7)
        if headline is not None:  # the headline is the benchmark's own aggregate, not one more subset
            ax.axhline(headline, color="black", linestyle="--", linewidth=1, label=f"headline {headline:.1f}")
            ax.legend(fontsize=7, loc="upper right")
        ax.set_ylim(0, 105)
        ax.set_ylabel("accuracy (%)")
        ax.set_title(f"{name} per subset ({validity(run)})\n{_setting(run)}", fontsize=8)
        ax.tick_params(axis="x", rotation=60, labelsize=8)
        written.append(_save(fig, out_dir / "subsets.png"))
    sides = [list(side) for side in bench.report_scores(records)]
    good, bad = ([x for x in side if x is not None] for side in sides)
    if good or bad:
        total = sum(len(side) for side in sides)
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        ax.hist([good, bad], bins=20, label=[f"preferred (chosen / correct): {len(good)}",
                                             f"other (rejected): {len(bad)}"], color=["#55A868", "#C44E52"])
        ax.set_xlabel("judge score")
        ax.set_ylabel("responses")
        ax.set_title(f"{name}: scores of the {len(good) + len(bad)} of {total} judged responses with a valid "
                     f"score\n{_setting(run)}", fontsize=8)
        ax.legend(fontsize=7)
        written.append(_save(fig, out_dir / "scores.png"))
    if hasattr(bench, "report_plots"):  # a benchmark's own plots (RM-Bench's style matrix)
        written += bench.report_plots(records, out_dir, tie_policy, plt)
    if analysed is not None:  # calibration and score-vs-length plots
        written += plot_analysis(name, analysed, records, out_dir, plt)
    return written


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(run_dir: str | Path, plots: bool = True) -> Path:
    """Write `run_dir`/report.md (and plots) from a run's metrics.json and samples; returns the report path."""
    run_dir = Path(run_dir)
    results = load_run(run_dir)
    lines = [f"# Eval report: {run_dir.name}", ""]
    for name, result in results.items():
        run = result.get("run", {})
        ci = headline_ci(result)
        lines += [
            f"## {name}",
            "",
            f"headline: **{_fmt(result.get('headline'))}** {ci_text(ci)}"
            f"{' (95% CI)' if ci else ''} — {validity(run)}; mode "
            f"{run.get('mode')}, voting {run.get('voting')}@{run.get('num_samples')}, {run.get('items')} items, "
            f"{run.get('judge_calls')} judge calls ({run.get('judge_calls_fixed_n')} at fixed n); judge "
            f"{run.get('model')}, template {run.get('template') or 'default'}, {run.get('max_new_tokens')} new tokens",
            "",
        ]
        if note := explain(result):
            lines += [f"**Note:** {note}", ""]
        analysed = "baselines" in result  # runs written before the analysis existed have only the metrics
        lines += [metrics_table(result) if analysed else markdown_table({name: flatten(result["metrics"])}), ""]
        if how := (result.get("uncertainty") or {}).get("bootstrap"):
            lines += [
                f"Intervals: {how['method']} over {how['unit']}, {how['n_resamples']} resamples, seed "
                f"{how['seed']}"
                + (
                    f"; Wilson interval over the prompts for {', '.join(how['wilson_where_degenerate'])} "
                    "(every resample gave 0 or 100)"
                    if how.get("wilson_where_degenerate")
                    else ""
                )
                + ". Baselines from the data alone: longer-wins / shorter-wins score each response by its length "
                "in characters (ties by the benchmark's rule).",
                "",
            ]
        lines += bias_section(result)
        if plots:
            records = _read_samples(run_dir / name / "samples.jsonl")
            for path in plot_benchmark(name, result["metrics"], records, run_dir / name, run.get("tie_policy"), run,
                                       result if analysed else None):
                lines += [f"![{path.stem}]({name}/{path.name})", ""]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _load_runs(run_dirs: Sequence[str | Path]) -> dict[str, dict[str, Any]]:
    runs: dict[str, dict[str, Any]] = {}
    for d in run_dirs:
        label = Path(d).name or str(d)
        while label in runs:  # same folder name in different places
            label += "'"
        runs[label] = load_run(d)
    return runs


def plot_compare(run_dirs: Sequence[str | Path], path: str | Path) -> Path:
    """Grouped bars of each benchmark's headline (percent), one bar per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = _load_runs(run_dirs)
    names = [b for b in registry.BENCHMARKS if any(b in r for r in runs.values())]
    width = 0.8 / max(len(runs), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 2.0 * len(names) + 2), 4.2))
    for k, (label, run) in enumerate(runs.items()):
        values = [(run.get(b) or {}).get("headline") or 0.0 for b in names]
        drawn = ax.bar([i + k * width for i in range(len(names))], values, width, label=f"{label}: {_run_label(run)}")
        ax.bar_label(drawn, fmt="%.1f", fontsize=7)
    ax.set_xticks([i + width * (len(runs) - 1) / 2 for i in range(len(names))], names)
    ax.set_ylim(0, 105)
    ax.set_ylabel("headline score (%)")
    ax.set_title(f"{len(runs)} eval runs compared: headline per benchmark", fontsize=9)
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1)
    return _save(fig, Path(path))


def _run_label(run: dict[str, Any]) -> str:
    """How one eval run differs from another: judge, template, judgment length, share of valid judgments."""
    infos = [r.get("run", {}) for r in run.values()]
    first = infos[0] if infos else {}
    valid = [100 - i.get("invalid_rate", 0.0) for i in infos]
    return (f"{Path(str(first.get('model', '?'))).name}, template {first.get('template') or 'default'}, "
            f"{first.get('max_new_tokens')} new tokens, {min(valid):.0f}-{max(valid):.0f}% valid" if valid else "")


def compare(run_dirs: Sequence[str | Path], n_resamples: int = 1000, seed: int = 0) -> str:
    """A markdown table per benchmark with one column per run (headline first), for e.g. base vs SFT vs GRPO;
    then each later run against the first on the items both judged: the paired difference of every metric with
    its 95 % interval and p-value (`report_analysis.paired`)."""
    from patarm.eval.report_analysis import paired, paired_table

    runs = _load_runs(run_dirs)
    dirs = dict(zip(runs, run_dirs))
    names = [b for b in registry.BENCHMARKS if any(b in r for r in runs.values())]
    sections = []
    for name in names:
        columns = {}
        for label, run in runs.items():
            if name in run:
                columns[label] = {"headline": run[name].get("headline"), **flatten(run[name]["metrics"])}
            else:
                columns[label] = {}
        sections += [f"## {name}", "", markdown_table(columns), ""]
        labels = [label for label, run in runs.items() if name in run]
        first = labels[0] if labels else None
        rows_a = _read_samples(Path(dirs[first]) / name / "samples.jsonl") if first else []
        for label in labels[1:]:
            rows_b = _read_samples(Path(dirs[label]) / name / "samples.jsonl")
            if rows_a and rows_b:
                tie = runs[first][name].get("run", {}).get("tie_policy")
                sections += [paired_table(first, label, paired(name, rows_a, rows_b, tie, n_resamples, seed)), ""]
    return "\n".join(sections)


def console_summary(results: dict[str, Any], output: str | Path) -> str:
    """A few lines for the terminal: each benchmark's headline beside its share of invalid judgments
    (a headline of 0 with most judgments unparseable says so), and where the report is."""
    lines = []
    for name, result in results.items():
        run = result.get("run", {})
        line = f"{name}: {_fmt(result.get('headline'))} {ci_text(headline_ci(result))}".rstrip()
        line += f"  ({run.get('items')} items, {validity(run)})"
        base = {k: stats.flat(v) for k, v in (result.get("baselines") or {}).items()}
        head_key = next((k for k in ("overall.avg", "score", "overall") if any(k in b for b in base.values())), None)
        if head_key:
            line += "\n  trivial baselines: " + ", ".join(f"{BASELINE_TITLES[k]} {_fmt(b[head_key])}"
                                                         for k, b in base.items() if head_key in b)
        flags = result.get("flags") or []
        for flag in flags[:6]:
            line += f"\n  ⚑ {flag if len(flag) <= 150 else flag[:147] + '...'}"
        if len(flags) > 6:
            line += f"\n  ⚑ ... {len(flags) - 6} more in report.md"
        if note := explain(result):
            line += f"\n  note: {note}"
        lines.append(line)
    lines.append(f"report: {Path(output) / 'report.md'}")
    return "\n".join(lines)
