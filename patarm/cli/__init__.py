"""`patarm <command> ...`: one entry point for every stage and tool. Heavy imports happen inside each
command, so `patarm --help` is instant. Expected errors (a missing file, a bad config key, a malformed
row...) print one paragraph and exit with code 2; `--debug` shows the traceback instead."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback

from patarm import __version__

# command → (module with a `main(argv)` function, one-line help)
COMMANDS = {
    "prep": ("patarm.cli.prep", "data preparation: normalize, mix, dedup, noise, classify, SFT corpora, RL set"),
    "sft": ("patarm.cli.train", "supervised fine-tuning of a judge on judgment corpora (TRL SFTTrainer)"),
    "grpo": ("patarm.cli.train", "GRPO with the Preference-Aware Reward and the pair-preserving sampler"),
    "bt": ("patarm.cli.train", "the Bradley-Terry scalar reward-model baseline (TRL RewardTrainer)"),
    "export": ("patarm.cli.export", "export a checkpoint to the Hugging Face format with a model card (LoRA merged)"),
    "judge": ("patarm.cli.judge", "judge pairs or single responses with a saved judge; one Judgment per line"),
    "eval": ("patarm.cli.eval", "evaluate on RewardBench 1/2, RM-Bench, JudgeBench; rescore, compare, report"),
    "skill": ("patarm.cli.skill", "reward-evaluation skills: validate, list, show, route, bon (best-of-N)"),
    "bon": ("patarm.cli.skill", "alias of `patarm skill bon`: best-of-N selection with a skill"),
    "verify": ("patarm.cli.verify", "verifiers: sandboxed Python, HumanEval pass@k, math answers, IFEval"),
    "convert": ("patarm.cli.convert", "convert a GGUF model file (e.g. the SmolLM2 package) to a Hugging Face folder"),
    "serve": ("patarm.cli.serve", "serve a judge over HTTP: /v1/judge, OpenRLHF /get_reward, chat completions"),
    "quickstart": ("patarm.cli.quickstart", "the main job on the bundled task, end to end on a CPU"),
    "downstream": (
        "patarm.cli.downstream",
        "a policy trained by GRPO on the judge, BT and rule rewards (--recipe case | ifeval: SmolLM2 on IFEval)",
    ),
}
# What a user can get wrong: reported as one paragraph, never as a traceback (unless --debug).
EXPECTED = (ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError, KeyError,
            ImportError, RuntimeError, OSError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="patarm",
        description="Train pointwise generative reward models (LLM judges) from pairwise preference data.",
        epilog="Run `patarm <command> --help` for a command's options. Add --debug to any command for tracebacks.",
    )
    parser.add_argument("--version", action="version", version=f"patarm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


class _StderrHandler(logging.StreamHandler):
    """A handler on whatever sys.stderr is at the time of each record (tests swap it)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def setup_logging() -> None:
    """patarm's own INFO lines (what a run is doing) on stderr; libraries stay at WARNING."""
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
    root = logging.getLogger("patarm")
    if not root.handlers:
        root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False


def report_error(command: str, err: BaseException) -> None:
    """One paragraph on stderr: what went wrong and where (the exception's own message says what to do)."""
    message = str(err).strip() or type(err).__name__
    if isinstance(err, KeyError):
        message = f"missing key {message}"
    print(f"patarm {command}: error: {message}", file=sys.stderr)


def is_main_process() -> bool:
    """Whether this process reports errors: rank 0 under `accelerate launch` / torchrun (every rank reads the same
    config and data, so they fail alike and one paragraph is enough), or the only process."""
    return os.environ.get("RANK", "0") in ("", "0")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0] in ("-h", "--help", "--version"):
        parser.parse_args(argv or ["--help"])
        return
    command = argv[0]
    if command not in COMMANDS:
        from patarm.config import nearest

        print(f"patarm: unknown command {command!r}{nearest(command, list(COMMANDS))}; commands: "
              f"{', '.join(COMMANDS)}", file=sys.stderr)
        sys.exit(2)
    debug = "--debug" in argv or os.environ.get("PATARM_DEBUG") == "1"
    setup_logging()
    if not debug:
        from patarm.quiet import quiet_libraries

        quiet_libraries()
    try:
        module = importlib.import_module(COMMANDS[command][0])
        module.main(command, [a for a in argv[1:] if a != "--debug"])
    except KeyboardInterrupt:
        print(f"patarm {command}: interrupted", file=sys.stderr)
        sys.exit(130)
    except EXPECTED as err:
        if debug:
            traceback.print_exc()
        if debug or is_main_process():
            report_error(command, err)
        sys.exit(2)
