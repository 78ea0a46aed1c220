"""Reports for eval runs: a markdown table per run, PNG plots, and a side-by-side comparison of runs.

Plots (matplotlib, Agg backend, written beside each benchmark's samples): ``subsets.png`` (per-subset /
per-domain bars), ``scores.png`` (histogram of the scores given to the preferred vs the other response,
pointwise runs) and a benchmark's own plots (`report_plots` in its module, e.g. RM-Bench's 3x3 matrix).
What to plot per benchmark comes from its module (`report_bars`, `report_scores`): no benchmark names here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from patarm.eval import registry

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


def plot_benchmark(name: str, metrics: dict[str, Any], records: Sequence[dict], out_dir: Path,
                   tie_policy: str | None = None) -> list[Path]:
    """Write this benchmark's PNG plots into `out_dir`; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    bench = registry.get(name)
    written = []
    bars = bench.report_bars(metrics)
    if bars:
        fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * len(bars) + 2), 3.5))
        ax.bar(list(bars), list(bars.values()), color="#4C72B0")
        ax.set_ylim(0, 100)
        ax.set_ylabel("accuracy (%)")
        ax.set_title(f"{name}: per subset")
        ax.tick_params(axis="x", rotation=60, labelsize=8)
        written.append(_save(fig, out_dir / "subsets.png"))
    good, bad = (list(filter(lambda x: x is not None, side)) for side in bench.report_scores(records))
    if good or bad:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.hist([good, bad], bins=20, label=["preferred (chosen / correct)", "other (rejected)"],
                color=["#55A868", "#C44E52"])
        ax.set_xlabel("judge score")
        ax.set_ylabel("responses")
        ax.set_title(f"{name}: score distributions")
        ax.legend(fontsize=8)
        written.append(_save(fig, out_dir / "scores.png"))
    if hasattr(bench, "report_plots"):  # a benchmark's own plots (RM-Bench's style matrix)
        written += bench.report_plots(records, out_dir, tie_policy, plt)
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
        lines += [f"## {name}", "", f"headline: **{_fmt(result.get('headline'))}** — mode {run.get('mode')}, "
                  f"voting {run.get('voting')}@{run.get('num_samples')}, {run.get('items')} items, "
                  f"{run.get('judge_calls')} judge calls ({run.get('judge_calls_fixed_n')} at fixed n)", ""]
        lines += [markdown_table({name: flatten(result["metrics"])}), ""]
        if plots:
            records = _read_samples(run_dir / name / "samples.jsonl")
            for path in plot_benchmark(name, result["metrics"], records, run_dir / name, run.get("tie_policy")):
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
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(names) + 1), 3.5))
    for k, (label, run) in enumerate(runs.items()):
        values = [(run.get(b) or {}).get("headline") or 0.0 for b in names]
        ax.bar([i + k * width for i in range(len(names))], values, width, label=label)
    ax.set_xticks([i + width * (len(runs) - 1) / 2 for i in range(len(names))], names)
    ax.set_ylim(0, 100)
    ax.set_ylabel("headline score (%)")
    ax.legend(fontsize=8)
    return _save(fig, Path(path))


def compare(run_dirs: Sequence[str | Path]) -> str:
    """A markdown table per benchmark with one column per run (headline first), for e.g. base vs SFT vs GRPO."""
    runs = _load_runs(run_dirs)
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
    return "\n".join(sections)


def console_summary(results: dict[str, Any], output: str | Path) -> str:
    """A few lines for the terminal: each benchmark's headline beside its share of invalid judgments
    (a headline of 0 with most judgments unparseable says so), and where the report is."""
    lines = []
    for name, result in results.items():
        run = result.get("run", {})
        invalid = run.get("invalid_rate", 0.0)
        line = (f"{name}: {_fmt(result.get('headline'))}  ({run.get('items')} items, "
                f"{100 - invalid:.1f}% of {run.get('judge_calls')} judgments valid")
        if run.get("truncated_prompts"):
            line += f", {run['truncated_prompts']} prompts truncated"
        line += ")"
        if invalid >= 50:
            line += f"\n  note: {invalid:.0f}% of the judgments could not be parsed; they count as wrong/ties"
        lines.append(line)
    lines.append(f"report: {Path(output) / 'report.md'}")
    return "\n".join(lines)
