"""Reports for eval runs: a markdown table per run, PNG plots, and a side-by-side comparison of runs.

Plots (matplotlib, Agg backend, written beside each benchmark's samples): ``subsets.png`` (per-subset /
per-domain bars), ``scores.png`` (histogram of the scores given to the preferred vs the other response,
pointwise runs) and, for RM-Bench, ``rmbench_matrix.png`` (the 3x3 chosen-vs-rejected accuracy matrix).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

from patarm.eval import registry

VARIANTS = ("concise", "detailed", "markdown")


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


def score_pairs(name: str, records: Sequence[dict]) -> tuple[list[float], list[float]]:
    """(scores of preferred responses, scores of the others) from pointwise records; missing ones skipped."""
    good: list[Any] = []
    bad: list[Any] = []
    for r in records:
        if name == "rmbench" and "score_chosen" in r:
            good += r["score_chosen"]
            bad += r["score_rejected"]
        elif name == "rewardbench" and "score_chosen" in r:
            good.append(r["score_chosen"])
            bad.append(r["score_rejected"])
        elif name == "rewardbench2" and "scores" in r:
            good += r["scores"][:r["num_correct"]]
            bad += r["scores"][r["num_correct"]:]
        elif name == "judgebench" and "score_A" in r:
            a, b = r["score_A"], r["score_B"]
            good.append(a if r["label"] == "A>B" else b)
            bad.append(b if r["label"] == "A>B" else a)
    return [x for x in good if x is not None], [x for x in bad if x is not None]


def _bars(metrics: dict[str, Any], name: str) -> dict[str, float]:
    if name == "rmbench":
        return {k: v["avg"] for k, v in metrics.items() if isinstance(v, dict)}
    if name == "rewardbench":
        return dict(metrics.get("subsets", {}))
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float))}


def plot_benchmark(name: str, metrics: dict[str, Any], records: Sequence[dict], out_dir: Path,
                   tie_policy: str | None = None) -> list[Path]:
    """Write this benchmark's PNG plots into `out_dir`; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    written = []
    bars = _bars(metrics, name)
    if bars:
        fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * len(bars) + 2), 3.5))
        ax.bar(list(bars), list(bars.values()), color="#4C72B0")
        ax.set_ylim(0, 100)
        ax.set_ylabel("accuracy (%)")
        ax.set_title(f"{name}: per subset")
        ax.tick_params(axis="x", rotation=60, labelsize=8)
        written.append(_save(fig, out_dir / "subsets.png"))
    good, bad = score_pairs(name, records)
    if good or bad:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.hist([good, bad], bins=20, label=["preferred (chosen / correct)", "other (rejected)"],
                color=["#55A868", "#C44E52"])
        ax.set_xlabel("judge score")
        ax.set_ylabel("responses")
        ax.set_title(f"{name}: score distributions")
        ax.legend(fontsize=8)
        written.append(_save(fig, out_dir / "scores.png"))
    if name == "rmbench" and records:
        written.append(_heatmap(registry.get("rmbench").mean_matrix(records, tie_policy), out_dir, plt))
    return written


def _heatmap(matrix: list[list[float]], out_dir: Path, plt: Any) -> Path:
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    image = ax.imshow([[100 * x for x in row] for row in matrix], vmin=0, vmax=100, cmap="viridis")
    for i, row in enumerate(matrix):
        for j, x in enumerate(row):
            ax.text(j, i, f"{100 * x:.1f}", ha="center", va="center", color="white" if x < 0.6 else "black")
    ax.set_xticks(range(3), VARIANTS)
    ax.set_yticks(range(3), VARIANTS)
    ax.set_xlabel("rejected response style")
    ax.set_ylabel("chosen response style")
    ax.set_title("RM-Bench accuracy (%)\nhard: above the diagonal", fontsize=9)
    fig.colorbar(image, ax=ax)
    return _save(fig, out_dir / "rmbench_matrix.png")


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


def compare_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="patarm eval compare", description="Side-by-side metrics of several runs.")
    p.add_argument("runs", nargs="+", help="output folders of `patarm eval` runs")
    p.add_argument("--output", help="also write the markdown to this file")
    p.add_argument("--plot", help="also write a PNG of the headline scores side by side")
    a = p.parse_args(argv)
    text = compare(a.runs)
    if a.plot:
        plot_compare(a.runs, a.plot)
    if a.output:
        Path(a.output).write_text(text, encoding="utf-8")
    print(text)


def report_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="patarm eval report", description="Re-write a run's report.md and plots.")
    p.add_argument("run", help="output folder of a `patarm eval` run")
    p.add_argument("--no-plots", action="store_true")
    a = p.parse_args(argv)
    print(write_report(a.run, plots=not a.no_plots))
