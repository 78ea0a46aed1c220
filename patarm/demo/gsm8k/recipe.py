"""A real judge that learns to use a skill: SmolLM2-135M-Instruct trained with PaTaRM on real GSM8K solutions, and
measured as a best-of-4 selector.

    patarm quickstart --recipe gsm8k-skill [--config more.yaml] [--key value ...]

Per arm — `reference` (the reference answer mounted as the skill's per-sample resource) and `no-reference` —
in its own run folder `{run_dir}/<arm>/`: pairs (a correct and an incorrect solution of one problem) → pointwise
SFT corpus from the verifier teacher → base judge evaluated → SFT → evaluated → RL set rejection-sampled with
the SFT judge (n rollouts, the kept band) → GRPO-PAR → evaluated → the Bradley-Terry baseline on the same base
model and pairs → evaluated. Problems are split by id (seeded); every size is a value of
`patarm/demo/configs/gsm8k-recipe.yaml` (stage settings: `gsm8k-{sft,grpo,bt}.yaml`). A stage whose output exists
is skipped, so an interrupted run resumes; the report is `{run_dir}/report.{md,json}` and `bo4.png`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from patarm.config import RunArguments, check_positive
from patarm.demo.gsm8k import data as gsm8k_data
from patarm.demo.gsm8k import evaluate
from patarm.demo.gsm8k.metrics import pool_baselines, summarize_scores
from patarm.demo.gsm8k.stages import (
    bt_stage,
    forget_eval,
    judge_folder,
    prep_sft_corpus,
    rl_stage,
    stage_args,
    train_stage,
    trained,
)
from patarm.demo.kit import Clock, grpo_curve
from patarm.io import read_json, write_json

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
DEFAULT_CONFIG = CONFIG_DIR / "gsm8k-recipe.yaml"
ARMS = ("reference", "no-reference")
STAGES = ("base", "sft", "grpo")
logger = logging.getLogger("patarm.gsm8k")


@dataclass
class GSM8KArguments(RunArguments):
    """The GSM8K skill recipe: data, sizes and the stage configs."""

    run_dir: str = field(default="runs/gsm8k-skill", metadata={"help": "the run folder (one sub-folder per arm)"})
    data_dir: str = field(default="../shared/benchmarks/gsm8k", metadata={"path": "input", "help":
                          "folder with example_model_solutions.jsonl (4 models' GSM8K test solutions) and test.jsonl"})
    model: str = field(default="smollm2", metadata={"help": "the base model spec of the judge and of the BT baseline"})
    arms: list[str] = field(default_factory=lambda: list(ARMS), metadata={"help": "reference and/or no-reference"})
    skill: str = field(default="gsm8k-judge", metadata={"help": "the skill framing the judge prompt: gsm8k-judge "
                       "(compact) or a bank skill such as reward-judge (its routed resources enter the prompt)"})
    heldout_problems: int = field(default=100, metadata={"help": "problems held out for evaluation"})
    sft_problems: int = field(default=96, metadata={"help": "train problems (with a correct and an incorrect "
                              "solution) whose pairs make the SFT corpus"})
    rl_problems: int = field(default=16, metadata={"help": "further train problems whose pairs are the RL pool"})
    pairs_per_problem: int = field(default=1, metadata={"help": "(correct, incorrect) pairs drawn per problem"})
    rl_rollouts: int = field(default=4, metadata={"help": "rejection sampling: judge rollouts per response (n)"})
    rl_keep: list[float] = field(default_factory=lambda: [0.125, 0.75], metadata={
        "help": "rejection sampling: keep pairs whose share of right rollouts lies in [low, high]"})
    grpo_steps: int = field(default=8, metadata={"help": "GRPO-PAR optimizer steps"})
    max_prompt_tokens: int = field(default=320, metadata={"help": "judge prompts are cut to this many tokens"})
    max_new_tokens: int = field(default=48, metadata={"help": "judgment length limit (evaluation, rejection "
                                "sampling; GRPO's is max_completion_length)"})
    eval_batch_size: int = field(default=32, metadata={"help": "prompts per generation batch"})
    eval_dtype: str = field(default="bfloat16", metadata={"help": "weights' dtype for judging and sampling"})
    judge_device: str = field(default="cpu", metadata={"help": "where judging and rejection sampling run: cpu, or "
                              "cuda (a GPU)"})
    bt_baseline: bool = field(default=True, metadata={"help": "train and evaluate the Bradley-Terry baseline"})
    sft_config: str = field(default="gsm8k-sft.yaml", metadata={"path": "input", "help": "the SFT stage config"})
    grpo_config: str = field(default="gsm8k-grpo.yaml", metadata={"path": "input", "help": "the GRPO stage config"})
    bt_config: str = field(default="gsm8k-bt.yaml", metadata={"path": "input", "help": "the BT stage config"})
    seed: int = field(default=0, metadata={"help": "seed of the split, the pairs, the models and the sampling"})

    def __post_init__(self) -> None:
        check_positive(self, "heldout_problems", "sft_problems", "rl_problems", "pairs_per_problem", "rl_rollouts",
                       "grpo_steps", "max_prompt_tokens", "max_new_tokens", "eval_batch_size")
        unknown = set(self.arms) - set(ARMS)
        if unknown or not self.arms:
            raise ValueError(f"arms: choose from {list(ARMS)}, got {self.arms}")
        if len(self.rl_keep) != 2 or not 0 <= self.rl_keep[0] <= self.rl_keep[1] <= 1:
            raise ValueError(f"rl_keep must be [low, high] with 0 <= low <= high <= 1, got {self.rl_keep}")


def parse_args(argv: list[str]) -> GSM8KArguments:
    """The recipe's arguments: the CPU default config, then the given configs and flags."""
    from patarm.config import parse_stage

    (args,) = parse_stage((GSM8KArguments,), ["--config", str(DEFAULT_CONFIG), *argv],
                          prog="patarm quickstart --recipe gsm8k-skill", description=__doc__)
    return args


def run(args: GSM8KArguments) -> dict:
    """Every stage of every arm (skipping finished ones), then the report; returns the report dict."""
    from patarm.demo.gsm8k.report import write_report

    out = Path(args.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    clock = Clock(out)
    problems, manifest = gsm8k_data.load_problems(args.data_dir)
    train, heldout = gsm8k_data.split_problems(problems, args.heldout_problems, args.seed)
    sft_set = gsm8k_data.take(train, args.sft_problems)
    rl_pool = gsm8k_data.take(train, args.rl_problems, start=args.sft_problems)
    _check_split(out, heldout, sft_set, rl_pool)
    logger.info("%d problems (%s); held out %d, SFT pairs from %d problems, RL pool from %d", len(problems),
                manifest.to_dict()["dropped"] or "none dropped", len(heldout), len(sft_set), len(rl_pool))
    arms = {arm: run_arm(args, arm, out / arm, sft_set, rl_pool, heldout, clock) for arm in args.arms}
    report = {"command": "patarm quickstart --recipe gsm8k-skill", "arguments": asdict(args),
              "baselines": pool_baselines(heldout), "arms": arms, "timings": clock.timings,
              "seconds": round(time.time() - clock.t0, 1), "data": manifest.to_dict()}
    return report | {"paths": write_report(report, out)}


def _check_split(out: Path, heldout, sft_set, rl_pool) -> None:
    """Write the split's ids; a resumed run must have the same split (else its stages would mix data)."""
    split = {"heldout": [p.id for p in heldout], "sft": [p.id for p in sft_set], "rl": [p.id for p in rl_pool]}
    path = out / "split.json"
    if path.is_file() and read_json(path) != split:
        raise ValueError(f"{out} was made with another split (sizes or seed changed): use a new --run_dir, or the "
                         f"sizes and seed that made it (see {out / 'report.json'})")
    assert not set(split["heldout"]) & (set(split["sft"]) | set(split["rl"])), "a held-out problem is in training"
    write_json(split, path)


def run_arm(args: GSM8KArguments, arm: str, d: Path, sft_set, rl_pool, heldout, clock: Clock) -> dict:
    """One arm end to end in its run folder `d`; returns its evaluation summaries and prep counts."""
    disclose = arm == "reference"
    result: dict[str, Any] = {"stages": {}, "prep": {}}
    result["prep"]["sft"] = prep_sft_corpus(args, d, sft_set, disclose, clock)
    judged = {"base": args.model}
    started = time.time()
    if not trained(d / "sft"):
        forget_eval(d, "sft")
        train_stage("sft", stage_args("sft", args.sft_config, d, "--model_name_or_path", args.model,
                                  "--seed", str(args.seed)))
        clock.done(f"{arm}/sft", started)
    judged["sft"] = str(judge_folder(d / "sft"))
    result["prep"]["rl"] = rl_stage(args, d, rl_pool, disclose, judged["sft"], clock)
    if result["prep"]["rl"]["kept"]:
        started = time.time()
        if not trained(d / "grpo"):
            forget_eval(d, "grpo")
            train_stage("grpo", stage_args("grpo", args.grpo_config, d, "--model_name_or_path", judged["sft"],
                                       "--seed", str(args.seed), "--max_steps", str(args.grpo_steps),
                                       "--max_prompt_length", str(args.max_prompt_tokens)))
            clock.done(f"{arm}/grpo", started)
        judged["grpo"] = str(judge_folder(d / "grpo"))
    else:
        logger.warning("%s: the RL set is empty (no pool pair in the kept band), so there is no GRPO stage", arm)
    for stage, model in judged.items():
        result["stages"][stage] = _evaluate(args, arm, d, stage, model, heldout, disclose, clock)
    if args.bt_baseline:
        result["bt"] = bt_stage(args, d, arm, heldout, disclose, clock)
    result["grpo_curve"] = grpo_curve(d / "grpo" / "metrics.jsonl")
    return result


def _evaluate(args: GSM8KArguments, arm: str, d: Path, stage: str, model: str, heldout, disclose: bool,
              clock: Clock) -> dict:
    path = d / "eval" / f"{stage}.jsonl"
    if path.is_file():
        records = evaluate.load_records(path)
    else:
        started = time.time()
        records = evaluate.judge_problems(model, heldout, disclose, args.skill, path, args.max_prompt_tokens,
                                          args.max_new_tokens, args.eval_batch_size, args.eval_dtype,
                                          name=f"{arm}/{stage} judge", device=args.judge_device)
        clock.done(f"{arm}/eval-{stage}", started)
    summary = summarize_scores(records)
    logger.info("%s / %s: pair accuracy %.3f, format-valid %.3f, best-of-4 %.1f %%", arm, stage,
                summary["pair_accuracy"], summary["format_valid"], summary["best_of_n"])
    return summary


