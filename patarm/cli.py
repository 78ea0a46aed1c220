"""`patarm <stage> ...`: one entry point for every stage. Heavy imports happen inside each stage."""

from __future__ import annotations

import argparse
import importlib
import sys

# stage → (module with a `main(argv)` function, one-line help)
COMMANDS = {
    "sft": ("patarm.train.sft", "supervised fine-tuning of a judge on judgment corpora (TRL SFTTrainer)"),
    "grpo": ("patarm.train.grpo", "GRPO with the Preference-Aware Reward and the pair-preserving sampler"),
    "bt": ("patarm.train.bt", "the Bradley-Terry scalar reward-model baseline (TRL RewardTrainer)"),
    "judge": ("patarm.judge.cli", "judge pairs or single responses with a saved judge; one Judgment per line"),
    "prep": ("patarm.prep_cli", "data preparation: normalize, mix, dedup, noise, classify, SFT corpora, RL set (each with a manifest)"),
    "eval": ("patarm.eval.cli", "evaluate on RewardBench 1/2, RM-Bench, JudgeBench; rescore saved samples; compare runs"),
    "bon": ("patarm.skills.bon_cli", "best-of-N selection with a reward-evaluation skill"),
    "skill": ("patarm.skills.cli", "reward-evaluation skill packages: validate, list, show"),
    "verify": ("patarm.verify.cli", "verifiers: sandboxed Python, HumanEval pass@k, math answers, IFEval"),
    "export": ("patarm.export", "export a checkpoint to the Hugging Face format with a model card (LoRA merged)"),
    "quickstart": ("patarm.quickstart", "the main job on the bundled task, end to end on a CPU"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="patarm",
        description="Train pointwise generative reward models (LLM judges) from pairwise preference data.",
        epilog="Run `patarm <stage> --help` for a stage's options.",
    )
    sub = parser.add_subparsers(dest="command", metavar="<stage>")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        if argv and argv[0] not in ("-h", "--help"):
            parser.print_help(sys.stderr)
            sys.exit(f"\npatarm: unknown stage {argv[0]!r}")
        parser.print_help()
        return
    module = importlib.import_module(COMMANDS[argv[0]][0])
    module.main(argv[1:])


if __name__ == "__main__":
    main()
