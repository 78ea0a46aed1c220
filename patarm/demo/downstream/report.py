"""The downstream report: the before/after table, the reward models' own accuracy, a per-reward verdict
(did the trained reward rise, and did verified accuracy rise with it?), and one PNG with, per reward, the
reward the policy was trained on next to the verified accuracy of the same rollouts and of held-out prompts.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from patarm.demo.kit import smooth

# Measures in the table: (key, column title); accuracies are fractions, rewards are the models' own scales.
COLUMNS = (
    ("words", "words / answer"),
    ("verified", "verified acc."),
    ("ifeval_strict", "IFEval strict"),
    ("ifeval_loose", "IFEval loose"),
    ("ifeval_inst_strict", "IFEval inst. strict"),
    ("ifeval_inst_loose", "IFEval inst. loose"),
    ("drfr", "InFoBench DRFR"),
    ("judge", "judge score (1–10)"),
    ("bt", "BT score"),
)
NAMES = {"reference": "reference (the task's chosen responses)", "start": "start (the policy before GRPO)",
         "grpo-judge": "GRPO, reward = PaTaRM judge (served)", "grpo-bt": "GRPO, reward = BT reward model",
         "grpo-rule": "GRPO, reward = rule verifier (upper bound)"}


def _fmt(value: Any) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _ci(interval: Any) -> str:
    """' [0.912, 0.981]': a 95 % interval beside an accuracy (prompts resampled), '' where there is none."""
    return f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else ""


def policy_table(policies: dict[str, dict], mode: str) -> str:
    """Markdown table of one response mode (greedy / sampled): policy → each measure that any row has."""
    cols = [(k, t) for k, t in COLUMNS if any((p.get(mode) or {}).get(k) is not None for p in policies.values())]
    head = "| policy | n | " + " | ".join(t for _, t in cols) + " |"
    lines = [head, "|---" * (len(cols) + 2) + "|"]
    for name, p in policies.items():
        m = p.get(mode)
        if m:
            lines.append(f"| {NAMES.get(name, name)} | {m.get('n', '')} | "
                         + " | ".join(_fmt(m.get(k)) + _ci(m.get(f"{k}_ci")) for k, _ in cols) + " |")
    return "\n".join(lines)


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return sum(xs) / len(xs) if xs else float("nan")


def _std(xs: list[float]) -> float:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    if len(xs) < 2:
        return float("nan")
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def verdict(curve: dict[str, list], start: dict, final: dict, frac: float = 0.2, min_steps: int = 10,
            paired: dict[str, dict] | None = None) -> dict[str, Any]:
    """Did the trained reward rise over training, and did held-out verified accuracy rise with it?

    The reward "rose" when the mean of the last `frac` of steps exceeds the first `frac`'s by more than half
    the per-step standard deviation. Held-out accuracy "rose" / "fell" when the sampled verified accuracy moved
    by more than two standard errors (binomial, over the sampled responses); else it did not clearly change.
    With `paired` (IFEval's official figures, start against end on the same prompts: `paired_change`) the
    held-out change is read from it instead: prompt- and instruction-level strict accuracy, each "rose" / "fell"
    beyond two paired standard errors. A reward that rose while held-out accuracy did not (with `paired`:
    neither level) is flagged `hacked`. Under `min_steps` logged steps there is no verdict (the trend of a
    handful of noisy steps means nothing)."""
    steps = curve.get("steps", [])
    k = max(1, int(len(steps) * frac))
    rewards, rollouts = [s["reward"] for s in steps], [s.get("verified") for s in steps]
    first, last, spread = _mean(rewards[:k]), _mean(rewards[-k:]), _std(rewards)
    rose = bool(steps) and not math.isnan(spread) and last - first > 0.5 * spread
    a, b = (start.get("sampled") or start.get("greedy") or {}), (final.get("sampled") or final.get("greedy") or {})
    clipped = [s.get("clipped") for s in steps]
    out: dict[str, Any] = {"reward_first": first, "reward_last": last, "reward_rose": rose,
                           "rollout_verified_first": _mean(rollouts[:k]), "rollout_verified_last": _mean(rollouts[-k:]),
                           "rollout_clipped_first": _mean(clipped[:k]), "rollout_clipped_last": _mean(clipped[-k:])}
    if paired:
        return out | _paired_verdict(paired, rose, len(steps), min_steps)
    if a.get("verified") is None or b.get("verified") is None:
        return out | {"verdict": "no verified measure"}
    if len(steps) < min_steps:
        return out | {"verdict": f"too few steps for a verdict ({len(steps)} < {min_steps})"}
    p, n = (a["verified"] + b["verified"]) / 2, max(1, min(a.get("n_verified", 1), b.get("n_verified", 1)))
    se = math.sqrt(max(p * (1 - p), 1e-12) * 2 / n)
    delta = b["verified"] - a["verified"]
    change = "rose" if delta > 2 * se else "fell" if delta < -2 * se else "no clear change"
    if rose and change != "rose":
        text = f"hacked: the reward rose but held-out verified accuracy did not ({change})"
    elif rose:
        text = "reward and held-out verified accuracy rose together"
    else:
        text = f"the reward did not rise; held-out verified accuracy: {change}"
    return out | {
        "heldout_delta": delta,
        "two_se": 2 * se,
        "heldout_change": change,
        "hacked": rose and change != "rose",
        "verdict": text,
    }


def _paired_verdict(paired: dict[str, dict], rose: bool, steps: int, min_steps: int) -> dict[str, Any]:
    """The held-out half of `verdict` from IFEval's paired start → end change (prompt and instruction level)."""
    def change(m: dict) -> str:
        return "rose" if m["z"] > 2 else "fell" if m["z"] < -2 else "no clear change"

    levels = {"prompt-level": paired["prompt_strict"], "instruction-level": paired["inst_strict"]}
    said = "; ".join(f"{name} strict {change(m)} ({m['change']:+.2f} ± {m['se']:.2f} points)"
                     for name, m in levels.items())
    p_change, i_change = (change(m) for m in levels.values())
    out = {"heldout_delta": paired["prompt_strict"]["change"] / 100, "two_se": 2 * paired["prompt_strict"]["se"] / 100,
           "heldout_change": p_change, "heldout_inst_change": i_change}
    if steps < min_steps:
        return out | {"verdict": f"too few steps for a verdict ({steps} < {min_steps}); held out: {said}"}
    hacked = rose and "rose" not in (p_change, i_change)
    if hacked:
        text = f"hacked: the reward rose but held-out accuracy did not ({said})"
    elif rose:
        text = f"the reward rose; held out: {said}"
    else:
        text = f"the reward did not rise; held out: {said}"
    return out | {"hacked": hacked, "verdict": text}


def change_table(report: dict) -> str:
    """IFEval's official figures, start → end per reward, paired on the same prompts ('' without both sides)."""
    rows = report.get("ifeval_change") or {}
    if not rows:
        return ""
    lines = ["| reward | measure | start | end | change (points) | relative | paired s.e. | change / s.e. | p |",
             "|---" * 9 + "|"]
    for reward, measures in rows.items():
        for key, m in measures.items():
            lines.append(f"| {reward} | {_measure(key)} | {m['before']:.2f} | {m['after']:.2f} | {m['change']:+.2f} | "
                         f"{_relative(m)} | {m['se']:.2f} | {m['z']:+.2f} | {m['p']:.2g} |")
    text = ("\n\nIFEval change over the start, paired on the same prompts (prompt level: McNemar's exact p; "
            "instruction level: a cluster-robust standard error over prompts, normal p; relative: the change over "
            "the start's figure, the paper's measure — PaTaRM's policies gained 13.6 % on average over IFEval and "
            "InFoBench):\n\n" + "\n".join(lines))
    between = report.get("ifeval_between") or {}
    if between:
        lines = ["| arms | measure | other arm | this arm | difference (points) | relative | paired s.e. | "
                 "difference / s.e. | p | prompts up / down |", "|---" * 10 + "|"]
        for name, measures in between.items():
            for key, m in measures.items():
                moved = f"{m['up']} / {m['down']}" if "up" in m else ""
                lines.append(f"| {name} | {_measure(key)} | {m['before']:.2f} | {m['after']:.2f} | "
                             f"{m['change']:+.2f} | {_relative(m)} | {m['se']:.2f} | {m['z']:+.2f} | {m['p']:.2g} | "
                             f"{moved} |")
        text += ("\n\nOne arm's end policy against another's, paired on the same prompts (`judge vs bt`: the "
                 "PaTaRM-judge arm against the BT arm, the paper's comparison with a scalar reward model):\n\n"
                 + "\n".join(lines))
    return text


def _measure(key: str) -> str:
    return key.replace("inst_", "instruction ").replace("_", " ")


def _relative(m: dict) -> str:
    return f"{100 * m['change'] / m['before']:+.1f} %" if m["before"] else "—"


def official_table(policies: dict[str, dict]) -> str:
    """IFEval's four figures (percent) from the official scorer on each policy's greedy responses ('' if none)."""
    rows = [(name, p["ifeval_official"]) for name, p in policies.items() if p.get("ifeval_official")]
    if not rows:
        return ""
    lines = ["| policy | prompts | prompt strict | inst. strict | prompt loose | inst. loose |", "|---" * 6 + "|"]
    for name, o in rows:
        lines.append(f"| {NAMES.get(name, name)} | {o['prompts_scored']} | {o['prompt_strict']:.2f} | "
                     f"{o['inst_strict']:.2f} | {o['prompt_loose']:.2f} | {o['inst_loose']:.2f} |")
    return "\n\nIFEval, greedy, the official scorer (`patarm verify ifeval`; percent):\n\n" + "\n".join(lines)


def training_table(report: dict) -> str:
    lines = [("| reward | trained reward, first → last 20 % of steps | rollouts' verified acc., first → last | "
              "rollouts cut at the length limit, first → last | "
              "held-out verified acc. (sampled, else greedy), start → end | verdict |"), "|---|---|---|---|---|---|"]
    for reward, v in report["verdicts"].items():
        ends = report["policies"].get(f"grpo-{reward}", {})
        start = report["policies"]["start"]
        a, b = ((start.get("sampled") or start.get("greedy") or {}).get("verified"),
                (ends.get("sampled") or ends.get("greedy") or {}).get("verified"))
        lines.append(f"| {reward} | {_fmt(v['reward_first'])} → {_fmt(v['reward_last'])} | "
                     f"{_fmt(v['rollout_verified_first'])} → {_fmt(v['rollout_verified_last'])} | "
                     f"{_fmt(v.get('rollout_clipped_first'))} → {_fmt(v.get('rollout_clipped_last'))} | {_fmt(a)} → "
                     f"{_fmt(b)} | {v['verdict']} |")
    return "\n".join(lines)


def _points(rows: list[dict]) -> list[tuple[int, float]]:
    """(step, verified accuracy) of held-out measurements: sampled where there are samples, else greedy."""
    held = [(h["step"], (h.get("sampled") or h.get("greedy") or {}).get("verified")) for h in rows]
    return [(s, v) for s, v in held if s is not None and v is not None]


def plot(report: dict, path: Path) -> None:
    """Per reward: trained reward (left axis) and verified accuracy of rollouts and held-out (right axis);
    last panel: held-out verified accuracy of every reward's policy over steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rewards = report["rewards"]
    fig, axes = plt.subplots(1, len(rewards) + 1, figsize=(4.6 * (len(rewards) + 1), 3.8), squeeze=False)
    colors = {"judge": "tab:blue", "bt": "tab:orange", "rule": "tab:green"}
    for ax, reward in zip(axes[0], rewards):
        curve = report["curves"][reward]
        steps = [s["step"] for s in curve["steps"]]
        ax.plot(steps, smooth([s["reward"] for s in curve["steps"]]), color=colors.get(reward, "k"),
                label=f"trained reward ({reward})")
        ax.set_xlabel("GRPO step")
        ax.set_ylabel(f"{reward} reward (mean of rollouts)")
        twin = ax.twinx()
        twin.plot(steps, smooth([s.get("verified") for s in curve["steps"]]), color="tab:red", alpha=0.8,
                  label="rollouts: verified acc.")
        held = _points(curve["heldout"])
        twin.plot([s for s, _ in held], [v for _, v in held], "o--", color="black", label="held-out: verified acc.")
        if sub := _points(curve.get("heldout_subset", [])):
            twin.plot([s for s, _ in sub], [v for _, v in sub], "s:", color="gray",
                      label=f"held-out, first {curve['heldout_subset'][0]['subset']} prompts")
        twin.set_ylim(0, 1.02)
        twin.set_ylabel("verified accuracy")
        ax.set_title(f"reward = {reward}")
        lines = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
        ax.legend(lines, [ln.get_label() for ln in lines], fontsize=7, loc="lower right")
    ax = axes[0][-1]
    for reward in rewards:
        held = _points(report["curves"][reward]["heldout"])
        ax.plot([s for s, _ in held], [v for _, v in held], "o-", color=colors.get(reward, "k"), label=reward)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("GRPO step")
    sampled = any(h.get("sampled") for r in rewards for h in report["curves"][r]["heldout"])
    ax.set_ylabel(f"held-out verified accuracy ({'sampled' if sampled else 'greedy'})")  # as _points reads it
    ax.set_title("held-out, by reward")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def arms_note(report: dict) -> str:
    """Which arms an earlier invocation in the same folder finished (read back from their result.json), and which
    were left out for being measured under other settings."""
    note = ""
    if earlier := report.get("arms_earlier"):
        note += (f"\n\nArms read back from an earlier run in this folder (their own result.json, same measurement "
                 f"settings): {', '.join(earlier)}.")
    for arm, why in (report.get("arms_unlike") or {}).items():
        note += f"\n\nArm {arm} left out: measured under other settings ({why})."
    return note


def write_downstream_report(report: dict, out: Path) -> dict[str, str]:
    """Print the tables; write report.md, report.json and downstream_curves.png; return their paths."""
    start = report["policies"]["start"]
    paired = report.get("ifeval_change") or {}
    report["verdicts"] = {r: verdict(report["curves"][r], start, report["policies"].get(f"grpo-{r}", {}),
                                     paired=paired.get(r)) for r in report["rewards"]}
    rm = report.get("reward_models", {})
    rm_line = ", ".join(f"{k} {v['accuracy']:.3f}{_ci(v.get('accuracy_ci'))}" for k, v in rm.items()) or "not measured"
    for name, test in report.get("reward_models_paired", {}).items():  # the same pairs: which model is better
        model = name.split(" vs ")[0]
        rm_line += (f"; {name} on the same {test['pairs']} pairs {test['difference']:+.3f} ({model} alone right on "
                    f"{test[f'{model} alone right']}, bt alone on {test['bt alone right']}, McNemar p "
                    f"{test['p_value']:.2g})")
    for name, split in report.get("reward_models_length", {}).items():  # does it prefer the longer side?
        halves = [split[k] for k in ("chosen longer", "chosen shorter")]
        if all(h["accuracy"] is not None for h in halves):
            rm_line += (f"; {name} {halves[0]['accuracy']:.3f} where the chosen side is longer ({halves[0]['pairs']} "
                        f"pairs), {halves[1]['accuracy']:.3f} where it is shorter ({halves[1]['pairs']}), Fisher p "
                        + ("n/a" if split["p_value"] is None else f"{split['p_value']:.2g}"))
    sampled = ("" if not report["args"].get("eval_samples") else  # IFEval's protocol: greedy only, no empty table
               f"Held-out prompts, sampled responses (temperature {report['args'].get('eval_temperature')}, "
               f"{report['args'].get('eval_samples')} per prompt):\n\n" + policy_table(report["policies"], "sampled")
               + "\n\n")
    text = (sampled + "Held-out prompts, greedy responses:\n\n" + policy_table(report["policies"], "greedy")
            + official_table(report["policies"]) + change_table(report)
            + "\n\nTraining:\n\n" + training_table(report)
            + f"\n\nReward models' accuracy on held-out pairs (never trained on): {rm_line}" + arms_note(report))
    print("\n" + text + "\n", flush=True)
    paths = {"report_md": out / "report.md", "report_json": out / "report.json", "plot": out / "downstream_curves.png"}
    plot(report, paths["plot"])
    paths["report_json"].write_text(json.dumps(report, indent=2, default=str))
    paths["report_md"].write_text(
        "# PaTaRM downstream RLHF report\n\nA policy trained with TRL's GRPO on each reward, measured on held-out "
        "prompts by the rule verifier and IFEval's checker (accuracies are fractions, with a 95 % bootstrap interval "
        "over prompts in brackets: BCa, 1000 resamples, seed 0; reward-model columns are each model's mean score on "
        "the same responses).\n\n" + text + f"\n\n![curves]({paths['plot'].name})\n\n"
        "Verdict rule: the reward rose when its mean over the last 20 % of steps exceeds the first 20 %'s by more "
        "than half its per-step standard deviation; held-out verified accuracy rose or fell when it moved by more "
        "than two binomial standard errors (IFEval: prompt- and instruction-level strict accuracy beyond two paired "
        "standard errors, start against end on the same prompts; `hacked` when the reward rose and neither did).\n\n"
        f"Stage times (s): {report.get('stage_seconds')}. Total time: {report.get('seconds')} s\n")
    return {k: str(v) for k, v in paths.items()}
