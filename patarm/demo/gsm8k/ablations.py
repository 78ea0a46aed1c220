"""The paper's ablations on the GSM8K recipe: each a config file in `patarm/demo/configs/gsm8k-ablations/` that
changes one thing on the reference arm (same default config, seed and compute), and one table.

    patarm quickstart --recipe gsm8k-skill --ablation f-constant        # one row (runs/gsm8k-ablations/f-constant)
    patarm quickstart --recipe gsm8k-skill --ablation all               # every row, then ablations.md

Rows: `baseline` (the recipe as shipped), `f-constant` (graded vs constant f(δ)), `label-reward` (PAR vs a
pointwise ±1 label reward), `sft-more` (GRPO-PAR vs more SFT epochs), `rubric-adaptive` (rubric mode primary vs
adaptive), and for evidence-verdict consistency `as-written` (the teacher before 2026-12-06: numbers as written, no
count of issues) and `numbers-canonical` (one spelling, no count: the row as measured). The row `issues-line` (one
spelling and the count before the score) became the default on 2026-12-06 and is `baseline` now: naming it says so
rather than running the baseline twice under `--ablation all`.
`--ablation all --run_dir R` puts row NAME in `R/NAME` (default `runs/gsm8k-ablations/NAME`); the rows that change
only GRPO (f-constant, label-reward) link the baseline row's SFT judge, corpus, RL set and judgments
(`reuse_sft`, patarm.demo.gsm8k.reuse), so they differ from it in GRPO alone. `--reuse_sft RUN` (e.g. a finished
main run of the same seed and sizes) starts every row whose SFT arguments match from that run's SFT judge.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

ABLATION_DIR = Path(__file__).resolve().parents[1] / "configs" / "gsm8k-ablations"
DEFAULT_ROOT = "runs/gsm8k-ablations"


def names() -> list[str]:
    """The shipped ablations, the baseline first."""
    found = sorted(p.stem for p in ABLATION_DIR.glob("*.yaml"))
    return ["baseline"] + [n for n in found if n != "baseline"]


def flag_value(argv: list[str], flag: str) -> tuple[str | None, list[str]]:
    """The value of `--flag V` / `--flag=V` (the last one) and argv without it."""
    rest, value, k = [], None, 0
    while k < len(argv):
        if argv[k] == flag and k + 1 < len(argv):
            value, k = argv[k + 1], k + 2
            continue
        if argv[k].startswith(flag + "="):
            value = argv[k].split("=", 1)[1]
        else:
            rest.append(argv[k])
        k += 1
    return value, rest


# rows that became the default: `--ablation NAME` says which row runs them now
RETIRED = {"issues-line": "the default since 2026-12-06 (teacher_numbers canonical, teacher_issues_line true, "
                          "max_new_tokens 104): run --ablation baseline, which has the same arguments"}


def config_of(name: str) -> Path:
    if name in RETIRED:
        raise ValueError(f"--ablation {name!r} is {RETIRED[name]}")
    path = ABLATION_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"--ablation {name!r}: no such ablation; choose one of {names()} or all "
                         f"(configs in {ABLATION_DIR})")
    return path


def inject(argv: list[str]) -> list[str]:
    """The config arguments to read right after the default: `--ablation NAME` adds that ablation's config (the
    flag itself stays in argv and sets the `ablation` field)."""
    name, _ = flag_value(argv, "--ablation")
    return ["--config", str(config_of(name))] if name else []


def _pair(m: dict | None) -> str:
    return "—" if not m else f"{m['pair_accuracy']:.3f} / {m['best_of_n']:.2f}"


def row(name: str, report: dict) -> dict:
    """The reference arm's figures of one ablation run: SFT and the final stage, each read three ways (its own
    score, the evidence read out, the verdict probability) with its verdict against the truth."""
    arm = report["arms"]["reference"]
    final = "grpo" if "grpo" in arm["stages"] else "sft"
    out = {"ablation": name, "final_stage": final, "sft_rows": arm["prep"]["sft"].get("sft_rows")}
    for stage in ("sft", final):
        m = arm["stages"][stage]
        verdict = m.get("verdict") or {}
        out[stage] = {k: m[k] for k in ("pair_accuracy", "best_of_n", "top_tied_mixed")} | {
            "consistent": m["consistency"]["consistent_rate"],
            "readout": {k: m["readout"][k] for k in ("pair_accuracy", "best_of_n")} if "readout" in m else None,
            "expected": {k: m["expected"][k] for k in ("pair_accuracy", "best_of_n")} if "expected" in m else None,
            "said_pass": verdict.get("said_pass"), "p_pass_auc": verdict.get("p_pass_auc")}
    reused = report.get("reused", {}).get("reference", {})
    out["sft_judge"] = f"linked from {reused['from']}" if "sft" in reused.get("stages", []) else "own"
    out["seconds"] = report["seconds"]
    return out


def table(rows: list[dict]) -> str:
    """Markdown: one row per ablation; pair accuracy / best-of-4 % of the final stage read three ways."""
    def num(v: float | None) -> str:
        return "—" if v is None else f"{v:.3f}"

    lines = ["| ablation | final stage | own score: pair acc. / best-of-4 % | evidence read out | "
             "verdict probability | said pass | P(pass) AUC | top tied (correct & incorrect) | consistent | "
             "SFT: own / verdict probability | SFT judge |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s, f = r["sft"], r[r["final_stage"]]
        lines.append(f"| {r['ablation']} | {r['final_stage']} | {_pair(f)} | {_pair(f.get('readout'))} | "
                     f"{_pair(f.get('expected'))} | {num(f.get('said_pass'))} | {num(f.get('p_pass_auc'))} | "
                     f"{f['top_tied_mixed']:.2f} | {f['consistent']:.3f} | {_pair(s)}; {_pair(s.get('expected'))} | "
                     f"{r.get('sft_judge', 'own')} |")
    return "\n".join(lines)


def run_all(argv: list[str], parse: Callable, run: Callable) -> dict:
    """Every ablation in turn (finished stages are skipped), then `ablations.{md,json}` in the root folder."""
    _, argv = flag_value(argv, "--ablation")
    root, argv = flag_value(argv, "--run_dir")
    root = Path(root or DEFAULT_ROOT)
    given, _ = flag_value(argv, "--reuse_sft")
    rows, seconds = [], 0.0
    for name in names():
        # a row that changes only GRPO starts from the baseline row's SFT judge (patarm.demo.gsm8k.reuse decides)
        reuse = [] if given or name == "baseline" else ["--reuse_sft", str(root / "baseline")]
        report = run(parse([*argv, *reuse, "--ablation", name, "--run_dir", str(root / name)]))
        rows.append(row(name, report))
        seconds += report["seconds"]
    text = table(rows)
    print("\n" + text + "\n", flush=True)
    root.mkdir(parents=True, exist_ok=True)
    (root / "ablations.md").write_text("# GSM8K recipe: ablations on the reference arm\n\n`patarm quickstart --recipe "
                                       f"gsm8k-skill --ablation all`\n\n{text}\n")
    (root / "ablations.json").write_text(json.dumps(rows, indent=2))
    return {"rows": rows, "seconds": seconds, "paths": {"report_md": str(root / "ablations.md")}}
