"""`patarm bon --pool FILE --skill NAME [--model PATH]`: best-of-N selection with a skill.

Prints one JSON object: selection accuracy (percent) without the reference answer and with it
mounted as a sample-specific resource, each next to every single source's accuracy and Oracle@N.
"""

from __future__ import annotations

import argparse
import json
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="patarm bon", description=__doc__)
    parser.add_argument("--pool", required=True, help="jsonl pool (generic or GSM8K example_model_solutions layout)")
    parser.add_argument("--skill", default="reward-judge", help="skill folder or name in the shipped bank")
    parser.add_argument("--model", default=None, help="a judge model (transformers path) adding judge-score evidence")
    parser.add_argument("--domain", default="math")
    parser.add_argument("--reference", choices=("both", "none", "mounted"), default="both",
                        help="evaluate without the reference, with it mounted, or both")
    parser.add_argument("--verifiers", default=None, help="comma-separated verifier ids (default: all in scope)")
    parser.add_argument("--source-prior", action="store_true",
                        help="mount a cross-fitted calibration table of source accuracies (other folds' labels)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N items")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    from patarm.skills.bon import evaluate_pool, load_pool, model_judge
    from patarm.skills.package import find_skill

    skill = find_skill(args.skill)
    items = load_pool(args.pool, args.limit)
    verifiers = args.verifiers.split(",") if args.verifiers else None
    judge = None
    if args.model:
        from patarm.judge.backends import GenerationOptions, HFBackend

        backend = HFBackend.from_pretrained(args.model, GenerationOptions(max_new_tokens=args.max_new_tokens))
        judge = model_judge(backend, skill, args.domain)
    modes = {"both": (False, True), "none": (False,), "mounted": (True,)}[args.reference]
    report = {}
    for with_ref in modes:
        key = "with_reference" if with_ref else "without_reference"
        report[key] = evaluate_pool(skill, items, args.domain, with_ref, verifiers, judge, args.source_prior)
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
