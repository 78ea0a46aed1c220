"""The report's view of `patarm.eval.analysis`: each metric beside its 95 % interval and the trivial baselines,
the bias probes and the calibration table in markdown, their plots, and the paired comparison of two runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from patarm.eval import analysis, registry, stats

BASELINE_TITLES = {"longer": "longer-wins", "shorter": "shorter-wins", "random": "random pick"}


def _f(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def ci_text(interval: Sequence[float] | None, digits: int = 1) -> str:
    """'[48.2, 61.9]', or '' when there is no interval."""
    return f"[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]" if interval else ""


def headline_ci(result: dict[str, Any]) -> list[float] | None:
    """The interval of the headline metric (the metric whose value is the headline)."""
    cis = (result.get("uncertainty") or {}).get("intervals") or {}
    flat = stats.flat(result.get("metrics") or {})
    for key in ("overall.avg", "score", "overall"):  # RM-Bench, RewardBench 1/2, JudgeBench
        if key in flat and key in cis:
            return cis[key]
    return None


def metrics_table(result: dict[str, Any]) -> str:
    """One row per metric: the judge's value, its 95 % interval, each trivial baseline, and a ⚑ where one beats it."""
    flat = stats.flat(result.get("metrics") or {})
    cis = (result.get("uncertainty") or {}).get("intervals") or {}
    base = {k: stats.flat(v) for k, v in (result.get("baselines") or {}).items()}
    head = ["metric", "judge", "95% CI"] + [BASELINE_TITLES.get(k, k) for k in base] + ["flag"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 2) + "---|"]
    for key, value in flat.items():
        values = [base[k].get(key) for k in base]
        beaten = any(v is not None and v > value + 1e-9 for v in values)
        lines.append(
            f"| {key} | {value:.2f} | {ci_text(cis.get(key))} | "
            + " | ".join(_f(v) for v in values)
            + (" | " if values else "")
            + ("⚑ baseline wins" if beaten else "")
            + " |"
        )
    return "\n".join(lines)


def bias_section(result: dict[str, Any]) -> list[str]:
    """Markdown lines: flags, agreement with longer-wins, position flips, length correlation, score histogram."""
    bias = result.get("bias") or {}
    lines = []
    if result.get("flags"):
        lines += ["**Flags** (* a baseline above the judge's whole 95% interval):", ""]
        lines += [f"- ⚑ {f}" for f in result["flags"]] + [""]
    agree = bias.get("length_agreement") or {}
    if agree:
        parts = [
            f"{'overall' if k == 'all' else k} {100 * a['share']:.0f}% of {a['decisions']}" for k, a in agree.items()
        ]
        lines += [
            f"Agreement of the judge's decisive decisions with longer-wins (flagged above "
            f"{100 * analysis.AGREEMENT_FLAG:.0f}% of at least {analysis.AGREEMENT_MIN}): " + ", ".join(parts) + ".",
            "",
        ]
    if pos := bias.get("position"):
        flips = pos["pairs"] - pos["consistent"]
        text = (
            f"Position: {pos['consistent']} of {pos['pairs']} decisions agree across both orders; of the {flips} flips"
        )
        text += (f", {pos['first']} chose the first-shown response both times, {pos['second']} the second-shown both "
                 f"times, {pos['other']} had a tie or no decision." if flips else ", none.")
        lines += [text, ""]
    if (rho := bias.get("length_spearman")) and rho.get("rho") is not None:
        lines += [f"Length: Spearman's ρ between a response's score and its length (characters) = {rho['rho']:.3f} "
                  f"(p = {rho['p_value']:.2g}, {rho['n']} scored responses).", ""]
    if hist := bias.get("score_histogram"):
        lines += ["| score | preferred responses | other responses |", "|---|---:|---:|"]
        lines += [f"| {s} | {c['preferred']} | {c['other']} |" for s, c in hist.items()] + [""]
    if (cal := result.get("calibration")) and not cal["table"]:
        lines += [f"Calibration: all {cal['pairs']} labelled pairs got the same score on both sides.", ""]
    elif cal:
        lines += [f"Calibration: of {cal['pairs']} labelled pairs, {cal['tied']} ({100 * cal['tied_share']:.0f}%) got "
                  "the same score; for the rest, how often the higher-scored response is the better one, by score gap:",
                  "", "| score gap | pairs | higher-scored is better | 95% CI (Wilson) |", "|---|---:|---:|---|"]
        lines += [f"| {r['gap']} | {r['pairs']} | {r['higher_is_better']:.3f} | {ci_text(r['ci'], 3)} |"
                  for r in cal["table"]] + [""]
    return lines


def plot_analysis(name: str, result: dict[str, Any], rows: Sequence[dict], out_dir: Path, plt: Any) -> list[Path]:
    """calibration.png (reliability by score gap) and lengths.png (score against length), pointwise runs."""
    written = []
    cal = result.get("calibration") or {}
    if cal.get("table"):
        fig, ax = plt.subplots(figsize=(5.0, 3.6))
        xs = list(range(len(cal["table"])))
        ys = [r["higher_is_better"] for r in cal["table"]]
        err = [[y - r["ci"][0] for y, r in zip(ys, cal["table"])], [r["ci"][1] - y for y, r in zip(ys, cal["table"])]]
        ax.errorbar(xs, ys, yerr=err, fmt="o-", capsize=3)
        for x, r in zip(xs, cal["table"]):
            ax.annotate(f"n={r['pairs']}", (x, 0.02), ha="center", fontsize=7)
        ax.axhline(0.5, color="gray", linestyle=":", linewidth=1)
        ax.set_xticks(xs, [r["gap"] for r in cal["table"]])
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("score gap between the two responses")
        ax.set_ylabel("P(higher-scored is the better one)")
        ax.set_title(f"{name}: calibration ({cal['tied']} of {cal['pairs']} pairs tied)", fontsize=9)
        written.append(_save(fig, out_dir / "calibration.png", plt))
    points = [(n, s) for r in rows if r.get("lengths") and (sc := analysis.candidate_scores(r)) is not None
              for s, n in zip(sc, r["lengths"]) if s is not None]
    if points:
        rho = ((result.get("bias") or {}).get("length_spearman") or {}).get("rho")
        fig, ax = plt.subplots(figsize=(5.0, 3.6))
        ax.scatter([n for n, _ in points], [s for _, s in points], s=6, alpha=0.4)
        ax.set_xscale("log")
        ax.set_xlabel("response length (characters, log scale)")
        ax.set_ylabel("judge score")
        ax.set_title(f"{name}: score vs length, Spearman ρ = {_f(rho, 3)} ({len(points)} responses)", fontsize=9)
        written.append(_save(fig, out_dir / "lengths.png", plt))
    return written


def _save(fig: Any, path: Path, plt: Any) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def paired(name: str, rows_a: Sequence[dict], rows_b: Sequence[dict], tie_policy: str | None,
           n_resamples: int = stats.RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """Run B against run A on the items both judged: per-metric difference with its paired-bootstrap interval and
    p-value, and an exact sign test on the per-item outcomes."""
    bench = registry.get(name)
    keys_b = dict(zip(analysis.paired_keys(bench, rows_b), rows_b))
    common = [(ka, ra) for ka, ra in zip(analysis.paired_keys(bench, rows_a), rows_a) if ka in keys_b]
    a = [ra for _, ra in common]
    b = [keys_b[k] for k, _ in common]
    diffs = stats.paired_intervals(a, b, lambda rs: bench.score(rs, tie_policy=tie_policy), analysis.stratum_of(bench),
                                   analysis.cluster_of(bench), n_resamples=n_resamples, seed=seed)
    va, vb = analysis.item_values(bench, a, tie_policy), analysis.item_values(bench, b, tie_policy)
    both = [(x, y) for x, y in zip(va, vb) if x is not None and y is not None]
    return {"items": len(common), "only_a": len(rows_a) - len(common), "only_b": len(rows_b) - len(common),
            "metrics": diffs, "sign_test": stats.sign_test([x for x, _ in both], [y for _, y in both]),
            "bootstrap": stats.describe("paired stratified cluster bootstrap, percentile", n_resamples, seed)}


def paired_table(label_a: str, label_b: str, result: dict[str, Any]) -> str:
    """Markdown: per metric A, B, B − A with its 95 % interval and p-value, then the sign test."""
    lines = [f"Paired on {result['items']} items judged by both ({result['only_a']} only in {label_a}, "
             f"{result['only_b']} only in {label_b}):", "",
             f"| metric | {label_a} | {label_b} | {label_b} − {label_a} | 95% CI | p (paired bootstrap) |",
             "|---|---:|---:|---:|---|---:|"]
    for key, d in result["metrics"].items():
        lines.append(f"| {key} | {d['a']:.2f} | {d['b']:.2f} | {d['diff']:+.2f} | {ci_text([d['low'], d['high']], 2)} "
                     f"| {d['p_value']:.3g} |")
    s, how = result["sign_test"], result["bootstrap"]
    lines += ["", f"Sign test on per-item outcomes: {label_b} better on {s['b_better']}, {label_a} better on "
              f"{s['a_better']}, same on {s['same']}; exact two-sided p = {s['p_value']:.3g}. Bootstrap: "
              f"{how['n_resamples']} resamples, seed {how['seed']}."]
    return "\n".join(lines)
