"""The recipe's report: the table (stage × arm, the BT baseline, the pool's baselines) printed and written as
report.md and report.json, and a plot (bo4.png) of best-of-4 and pair accuracy per stage and arm."""

from __future__ import annotations

import json
from pathlib import Path

TIE_RULE = ("best-of-4 picks the highest-scored candidate; ties (and a judgment without a valid score, which "
            "ranks below every scored one) are broken uniformly at random and the expected accuracy is reported "
            "exactly. Majority vote: the largest cluster of math-verify-equivalent final answers, ties likewise. "
            "Pair accuracy: every (correct, incorrect) candidate pair of a held-out problem; right only when the "
            "correct one's score is strictly higher (a tie counts as wrong). Brackets: 95 % bootstrap interval over "
            "problems (a problem's pairs move together; BCa, 1000 resamples, seed 0). Rows \"evidence read out\": the "
            "same judgments scored by Skill-RM's deterministic readout — the graded scale applied to the facts each "
            "judgment states (final answer, reference, steps), its own verdict and score recomputed from them. Rows "
            "\"verdict probability\": the same judgments scored by the judge's own P(pass) at its `correct ::` line: "
            "p · score(pass) + (1 − p) · score(fail) of its stated facts (patarm.demo.gsm8k.verdict)")
VERDICT_NOTE = ("The judge's own `correct :: pass|fail` against the truth (judgments with the reference mounted): the "
                "share saying pass, the share right, the accuracy of always saying pass, and the AUC of its P(pass) "
                "at that line over all candidates (0.5: no separation at any threshold; patarm.demo.gsm8k.verdict)")
STAGE_NAMES = {"base": "base (SmolLM2-135M-Instruct)", "sft": "SFT", "grpo": "SFT + GRPO-PAR"}


def stage_names(report: dict) -> dict[str, str]:
    """The stages' row names; the base row names the base model (`--model`; SmolLM2 by default, also from a GGUF
    path), the GRPO stage's says its reward (the label-reward ablation is not GRPO-PAR)."""
    args = report.get("arguments") or {}
    grpo = ("SFT + GRPO (label reward)" if args.get("reward") == "label" else
            "SFT + GRPO-PAR, constant f(δ)" if args.get("margin") == "constant" else STAGE_NAMES["grpo"])
    model = str(args.get("model") or "smollm2")
    base = STAGE_NAMES["base"] if "smollm2" in model.lower() else f"base ({Path(model).name or model})"
    return STAGE_NAMES | {"base": base, "grpo": grpo}


ARM_LABELS = {"reference": "reference mounted", "no-reference": "not disclosed",
              "evidence": "arithmetic check disclosed, reference not"}


def arm_label(report: dict, arm: str) -> str:
    """What the arm discloses, as the plot's legend says it (the evidence arm's agreement where the run had it)."""
    args = report.get("arguments") or {}
    if arm == "evidence" and args.get("evidence_agreement"):
        rule = " (+ its score rule)" if args.get("evidence_score_rule") else ""
        return f"arithmetic check + answer agreement{rule} disclosed, reference not"
    return ARM_LABELS.get(arm, arm)


def _ci(interval: list | None, digits: int) -> str:
    """' [55.0, 64.0]': a 95 % interval over problems beside an accuracy; '' for a report written without one."""
    return f" [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]" if interval else ""


def _row(name: str, arm: str, m: dict, valid: bool = True) -> str:
    fmt = f"{m['format_valid']:.3f}" if valid else "—"
    consistent = f"{m['consistency']['consistent_rate']:.3f}" if "consistency" in m else "—"
    return (f"| {name} | {arm} | {m['pair_accuracy']:.3f}{_ci(m.get('pair_accuracy_ci'), 3)} | {fmt} | "
            f"{m['best_of_n']:.2f}{_ci(m.get('best_of_n_ci'), 1)} | {m['top_tied']:.2f} | "
            f"{m.get('top_tied_mixed', float('nan')):.2f} | {consistent} |")


def voting_table(report: dict) -> str:
    """Markdown: voting@k and adaptive voting per arm × stage judged with samples, with the judge calls spent."""
    names = stage_names(report)
    lines = ["| judge | arm | rule | pair accuracy | best-of-4 % | top tied (correct & incorrect) | judge calls |",
             "|---|---|---|---|---|---|---|"]
    for arm, res in report["arms"].items():
        for stage, m in res["stages"].items():
            for rule, v in (m.get("voting") or {}).items():
                lines.append(f"| {names[stage]} | {arm} | {rule} | {v['pair_accuracy']:.3f} | "
                             f"{v['best_of_n']:.2f} | {v['top_tied_mixed']:.2f} | {v['calls']} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def verdict_table(report: dict) -> str:
    """Markdown: the judge's pass/fail verdicts against the truth per stage × arm, where judgments state one."""
    names = stage_names(report)
    lines = ["| judge | arm | verdicts | said pass | verdict accuracy | always pass would be | P(pass) AUC | "
             "median P(pass), correct / incorrect |",
             "|---|---|---|---|---|---|---|---|"]
    for stage in STAGE_NAMES:
        for arm, res in report["arms"].items():
            v = res["stages"].get(stage, {}).get("verdict")
            if v:
                auc = "—" if v.get("p_pass_auc") is None else f"{v['p_pass_auc']:.3f}"
                med = v.get("p_pass_median") or {}
                where = ("—" if None in (med.get("correct"), med.get("incorrect")) else
                         f"{med['correct']:.3f} / {med['incorrect']:.3f}")
                lines.append(f"| {names[stage]} | {arm} | {v['verdicts']} | {v['said_pass']:.3f} | "
                             f"{v['accuracy']:.3f} | {v['correct_share']:.3f} | {auc} | {where} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def results_table(report: dict) -> str:
    """Markdown: every stage × arm, the BT baseline per arm, then the pool's baselines."""
    names = stage_names(report)
    lines = ["| judge | arm | pair accuracy [95% CI] | format-valid | best-of-4 % [95% CI] | top score tied | "
             "top tied (correct & incorrect) | evidence–verdict consistent |", "|---|---|---|---|---|---|---|---|"]
    for stage in STAGE_NAMES:
        for arm, res in report["arms"].items():
            if stage in res["stages"]:
                lines.append(_row(names[stage], arm, res["stages"][stage]))
    for stage in STAGE_NAMES:
        for arm, res in report["arms"].items():
            if "readout" in res["stages"].get(stage, {}):
                lines.append(_row(f"{names[stage]}, evidence read out", arm, res["stages"][stage]["readout"]))
    for stage in STAGE_NAMES:
        for arm, res in report["arms"].items():
            if "expected" in res["stages"].get(stage, {}):
                lines.append(_row(f"{names[stage]}, verdict probability", arm, res["stages"][stage]["expected"]))
    for arm, res in report["arms"].items():
        if "bt" in res:
            lines.append(_row("BT scalar RM (same base, same pairs)", arm, res["bt"], valid=False))
    b = report["baselines"]
    cis = b.get("ci") or {}
    lines += ["", "| baseline on the same held-out problems | best-of-4 % [95% CI] |", "|---|---|"]
    lines += [f"| single model: {s} | {v:.2f}{_ci(cis.get('single:' + s), 1)} |" for s, v in b["single"].items()]
    lines += [f"| random pick | {b['random']:.2f}{_ci(cis.get('random'), 1)} |",
              f"| majority vote (final answers) | {b['majority_vote']:.2f}{_ci(cis.get('majority_vote'), 1)} |",
              *([f"| training-free skill, no reference (patarm bon --reference none, ties uniform) | "
                 f"{b['skill_no_reference']:.2f} |"] if "skill_no_reference" in b else []),
              f"| Oracle@4 | {b['oracle']:.2f}{_ci(cis.get('oracle'), 1)} |"]
    return "\n".join(lines)


def _mean(values) -> float | None:
    """The mean of the values that are not None (None when there are none)."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def prep_table(report: dict) -> str:
    lines = [
        "| arm | SFT rows | RL pool pairs | RL set kept | dropped | GRPO steps (passes over the set) "
        "| GRPO rollouts' PAR-satisfied, first → last 20 % "
        "| rollouts' mean score, chosen / rejected, first → last 20 % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for arm, res in report["arms"].items():
        rl, curve = res["prep"]["rl"], res.get("grpo_curve") or []
        k = max(1, len(curve) // 5)
        trend = "—" if not curve else (f"{_mean(c['pair_accuracy'] for c in curve[:k]):.3f} → "
                                       f"{_mean(c['pair_accuracy'] for c in curve[-k:]):.3f}")
        sides = [[_mean(c.get(f"{side}_score") for c in part) for side in ("chosen", "rejected")]
                 for part in (curve[:k], curve[-k:])]
        scores = ("—" if not curve or None in sides[0] + sides[1] else
                  " → ".join(f"{c:.2f} / {r:.2f}" for c, r in sides))
        plan = res["prep"].get("grpo")
        steps = "—" if not plan else f"{plan['steps']} ({plan['passes']:g})"
        misses = rl.get("near_misses")
        pool = rl["pool"] if not misses else f"{rl['pool']} ({misses['made']} near misses)"
        kept = rl["kept"] if not misses else f"{rl['kept']} ({misses['kept']} near misses)"
        sft = res["prep"]["sft"]
        rows = sft.get("sft_rows", "?")
        extra = [f"{sft[k]['rows']} {name}" for k, name in (("near_misses", "near misses"), ("unanimous", "unanimous"))
                 if sft.get(k)]
        if extra:
            rows = f"{rows} ({', '.join(extra)})"
        lines.append(f"| {arm} | {rows} | {pool} | "
                     f"{kept} | {rl['dropped'] or '—'} | {steps} | {trend} | {scores} |")
    return "\n".join(lines)


def plot(report: dict, path: Path) -> None:
    """Two panels: best-of-4 (with the pool's baselines as lines) and pair accuracy, per judge and arm."""
    names = stage_names(report)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(report["arms"])
    judges = [s for s in STAGE_NAMES if any(s in r["stages"] for r in report["arms"].values())] + ["bt"]
    labels = ["base" if j == "base" else names.get(j, "BT") for j in judges]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / len(arms)
    for panel, (key, title) in enumerate((("best_of_n", "best-of-4 accuracy (%)"), ("pair_accuracy", "pair accuracy"))):
        ax = axes[panel]
        for a, arm in enumerate(arms):
            res = report["arms"][arm]
            values = [(res["stages"].get(j) or res.get(j) or {}).get(key, float("nan")) for j in judges]
            ax.bar([x + a * width for x in range(len(judges))], values, width, label=arm_label(report, arm))
        ax.set_xticks([x + width * (len(arms) - 1) / 2 for x in range(len(judges))], labels)
        ax.set_title(title)
        if key == "best_of_n":
            b = report["baselines"]
            for value, name, style in ((b["oracle"], "Oracle@4", "--"), (b["best_single"], "best single model", ":"),
                                       (b["majority_vote"], "majority vote", "-.")):
                ax.axhline(value, linestyle=style, color="gray", linewidth=1)
                ax.text(len(judges) - 0.5, value, f" {name} {value:.1f}", fontsize=7, va="bottom", ha="right")
            ax.set_ylim(0, 100)
        else:
            ax.set_ylim(0, 1)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"SmolLM2-135M judge on {report['baselines']['problems']} held-out GSM8K problems (4 candidates each)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(report: dict, out: Path) -> dict[str, str]:
    """Print the tables; write report.md, report.json and bo4.png; return their paths."""
    table, prep, votes = results_table(report), prep_table(report), voting_table(report)
    verdicts = verdict_table(report)
    prep = prep + ("\n\n" + votes if votes else "") + ("\n\n" + VERDICT_NOTE + "\n\n" + verdicts if verdicts else "")
    print("\n" + table + "\n\n" + prep + "\n", flush=True)
    paths = {"report_md": out / "report.md", "report_json": out / "report.json", "plot": out / "bo4.png"}
    plot(report, paths["plot"])
    paths["report_json"].write_text(json.dumps({**report, "tie_rule": TIE_RULE}, indent=2))
    args = report["arguments"]
    paths["report_md"].write_text(
        f"# GSM8K skill recipe: report\n\n`{report['command']}` — {report['baselines']['problems']} held-out problems, "
        f"base model `{args['model']}`, skill `{args['skill']}`, seed {args['seed']}.\n\n{table}\n\n{TIE_RULE}.\n\n"
        f"{prep}\n\n![best-of-4 and pair accuracy]({paths['plot'].name})\n\nStage times (s): "
        f"{json.dumps(report['timings'])}\n\nTotal time of this invocation: {report['seconds']:.0f} s\n")
    return {k: str(v) for k, v in paths.items()}
