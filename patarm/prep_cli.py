"""`patarm prep <step> ...`: the data-construction steps (PaTaRM Appendix C) from the command line.

Each step reads pairs (a file, a hub id, or a previous step's directory) and writes its dataset(s) and
a `manifest.json` into `--output DIR`. `patarm prep run --config configs/prep/X.yaml` runs a whole
pipeline; steps already complete for the same config and inputs are skipped, and teacher calls are
cached on disk, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from patarm.data import DataError

STEPS_HELP = {
    "synthetic": "write pairs of the bundled rule-verifiable task (CPU runs, tests)",
    "normalize": "load, validate and normalise one source into DIR/pairs.jsonl",
    "mix": "merge several sources with per-source caps and source filters",
    "dedup": "remove exact and near-duplicate pairs",
    "noise": "flip the label of a seeded fraction of pairs (robustness ablation)",
    "classify": "label each pair's domain (teacher LLM with a heuristic fallback)",
    "pointwise": "pointwise SFT corpus: teacher scores, keep pairs with a margin > min_margin",
    "pairwise": "pairwise SFT corpus: teacher A/B decisions that agree with the label",
    "rl": "RL set: n judge rollouts per pair, keep correct rates in [low, high]; GRPO rows",
    "run": "run a whole pipeline from a YAML config",
}


def _registry() -> dict[str, tuple[Callable, Callable]]:
    """step -> (add its arguments, run it)."""
    from patarm.prep.commands import COMMANDS

    return COMMANDS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="patarm prep", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", metavar="<step>", required=True)
    for name, (add_args, _) in _registry().items():
        add_args(sub.add_parser(name, help=STEPS_HELP[name], description=STEPS_HELP[name]))
    return parser


def _summary(manifest: dict[str, Any]) -> str:
    dropped = ", ".join(f"{k}={v}" for k, v in sorted(manifest.get("dropped", {}).items())) or "none"
    return f"{manifest.get('step')}: rows_in={manifest['rows_in']} rows_out={manifest['rows_out']} dropped: {dropped}"


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    _, run = _registry()[args.step]
    try:
        result = run(args)
    except (DataError, FileNotFoundError, ValueError) as err:
        sys.exit(f"patarm prep {args.step}: error: {err}")
    for manifest in result if isinstance(result, list) else [result]:
        print(_summary(manifest))


if __name__ == "__main__":
    main()
