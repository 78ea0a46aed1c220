"""The GSM8K recipe's teachers and training-free baselines on the real best-of-4 pool: no model, no torch.

    python bench/gsm8k_teacher.py [--data_dir ../shared/benchmarks/gsm8k] [--heldout 100] [--seed 0]

For each teacher (`binary` 9/2, `graded` 1-10) with the reference (the `reference` arm) and without it (the
evidence-only rule the `evidence` and `no-reference` arms are taught), every candidate of every problem is judged
as the recipe's SFT corpus would judge it; printed per set (the recipe's held-out problems, and the whole pool):
best-of-4 (ties broken uniformly, expectation), pair accuracy (ties wrong), the share of problems whose top score
is shared by a correct and an incorrect candidate, the score histogram (correct / incorrect candidates), the
chosen − rejected margin δ over every (correct, incorrect) pair with the share the paper's SFT filter (δ > 2)
keeps and the share PAR's graded f(δ) pays its higher value (δ > 2), and the evidence–verdict consistency of
the teacher's own judgments. Then majority vote and the training-free skill (`patarm bon --reference none`,
skill reward-judge: answer agreement + calculator checks, its own tie rule: the lowest index) on the same sets.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from patarm.demo.gsm8k import data  # noqa: E402
from patarm.demo.gsm8k.consistency import summarize as consistency  # noqa: E402
from patarm.demo.gsm8k.metrics import pool_baselines, summarize_scores  # noqa: E402
from patarm.demo.gsm8k.teacher import FAIL_SCORE, PASS_SCORE, GradedTeacher, judgment_text, verify  # noqa: E402


def judge_all(problems, teacher: str, disclose: bool, agreement: bool = False) -> tuple[list[dict], list[str]]:
    """Records (scores per problem) and every judgment text, as the teacher writes them; `agreement`: the evidence
    arm's agreement line over the problem's candidates (`evidence_agreement`, the recipe's teacher settings)."""
    from patarm.judge import parse_judgment

    graded = GradedTeacher("primary", "canonical", True) if agreement else GradedTeacher()
    records, texts = [], []
    for p in problems:
        row = []
        for s in p.solutions:
            if teacher == "graded":
                row.append(graded.judge(p.question, s, p.answer, disclose, list(p.solutions) if agreement else None))
            else:
                answer, ok = verify(p.question, s, p.answer)
                row.append(judgment_text(answer, p.answer if disclose else None, ok))
        scores = [parse_judgment(t, "pointwise-compact").score for t in row]
        records.append({"scores": scores, "correct": p.correct, "valid": [s is not None for s in scores]})
        texts += row
    return records, texts


def deltas(records: list[dict]) -> Counter:
    """chosen − rejected score over every (correct, incorrect) candidate pair."""
    out: Counter = Counter()
    for r in records:
        for c, sc in enumerate(r["scores"]):
            for i, si in enumerate(r["scores"]):
                if r["correct"][c] and not r["correct"][i]:
                    out[sc - si] += 1
    return out


def report(name: str, problems) -> None:
    print(f"\n## {name}: {len(problems)} problems, {sum(len(p.solutions) for p in problems)} candidates")
    print("| teacher | reference | best-of-4 % | pair acc. | top tied (correct & incorrect) | δ > 2 (SFT filter keeps) "
          "| consistent |")
    print("|---|---|---|---|---|---|---|")
    detail = []
    for teacher, disclose, agreement in (("binary", True, False), ("binary", False, False), ("graded", True, False),
                                     ("graded", False, False), ("graded", False, True)):
        records, texts = judge_all(problems, teacher, disclose, agreement)
        s, d, c = summarize_scores(records), deltas(records), consistency(texts)
        n = sum(d.values())
        hidden = "not mounted (rule)" if teacher == "graded" else "not mounted (verdict from the hidden reference)"
        hidden += " + agreement (evidence arm)" if agreement else ""
        print(
            f"| {teacher} | {'mounted' if disclose else hidden} | {s['best_of_n']:.2f} | "
            f"{s['pair_accuracy']:.3f} | {s['top_tied_mixed']:.3f} | "
            f"{sum(v for k, v in d.items() if k > 2) / n:.3f} "
            f"| {c['consistent']}/{c['judgments']} |"
        )
        hist = {lab: Counter(sc for r in records for sc, ok in zip(r["scores"], r["correct"]) if ok == lab)
                for lab in (True, False)}
        detail.append(f"- {teacher}, reference {'mounted' if disclose else 'not mounted'}"
                      f"{' + agreement' if agreement else ''}: scores of correct "
                      f"{dict(sorted(hist[True].items()))}, of incorrect {dict(sorted(hist[False].items()))}; "
                      f"δ {dict(sorted(d.items()))}")
    print("\n".join(detail))
    b = pool_baselines(problems)
    print(f"- majority vote {b['majority_vote']:.2f} %, random {b['random']:.2f} %, Oracle@4 {b['oracle']:.2f} %, "
          f"single models {', '.join(f'{v:.2f}' for v in b['single'].values())}")
    from patarm.demo.gsm8k.metrics import skill_selection
    from patarm.skills.bon import PoolItem, evaluate_pool
    from patarm.skills.package import find_skill

    items = [PoolItem(p.question, p.solutions, p.sources, p.correct, None) for p in problems]
    bon = evaluate_pool(find_skill("reward-judge"), items, "math", with_reference=False)
    print(f"- training-free skill (patarm bon --reference none, reward-judge): {bon['skill_selection']:.2f} % "
          f"(its rule: the lowest index among ties); {skill_selection(problems):.2f} % with ties broken uniformly")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(ROOT.parent.parent / "shared" / "benchmarks" / "gsm8k"))
    parser.add_argument("--heldout", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--whole_pool", action="store_true", help="also the whole pool (1,319 problems)")
    args = parser.parse_args()
    assert (PASS_SCORE, FAIL_SCORE) == (9, 2)
    problems, _ = data.load_problems(args.data_dir)
    _, heldout = data.split_problems(problems, args.heldout, args.seed)
    report(f"held-out problems of the recipe (seed {args.seed})", heldout)
    if args.whole_pool:
        report("the whole pool", problems)


if __name__ == "__main__":
    main()
