"""A real judge that learns to use a skill: SmolLM2-135M-Instruct trained with PaTaRM on real GSM8K solutions, and
measured as a best-of-4 selector.

    patarm quickstart --recipe gsm8k-skill [--config more.yaml] [--key value ...] [--seeds 0 1 2] [--ablation NAME|all]

Per arm — `reference` (the reference answer mounted as the skill's per-sample resource), `no-reference`, and
`evidence` (the skill's arithmetic-check verifier run into the prompt, and with `evidence_agreement` its
answer-agreement verifier over the problem's candidates; the reference not) — in its own run folder
`{run_dir}/<arm>/`: pairs (a correct and an incorrect solution of one problem) → pointwise SFT corpus from the
verifier teacher (`teacher: graded`, evidence first, 1-10) → base judge evaluated → SFT → evaluated → RL set
rejection-sampled with the SFT judge (n rollouts, the kept band) → GRPO-PAR → evaluated (also with voting@k and
adaptive voting when `vote_k` > 0) → the Bradley-Terry baseline on the same base model and pairs → evaluated. Every
evaluation reports evidence–verdict consistency and, beside the judge's own scores, Skill-RM's deterministic
readout (the graded scale applied to the facts each judgment states; `consistency.readout`). Problems are split by
id (seeded); every size is a value of `patarm/demo/configs/gsm8k-recipe.yaml` (stage settings:
`gsm8k-{sft,grpo,bt}.yaml`). A stage whose output exists is skipped, so an interrupted run resumes; the report is
`{run_dir}/report.{md,json}` and `bo4.png`. `--seeds` repeats the recipe per seed on one held-out split
(`report-seeds.md`: mean ± s.e.); `--ablation` reads one of `patarm/demo/configs/gsm8k-ablations/` (or runs all of
them and
writes their table).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from patarm.demo.gsm8k import data as gsm8k_data
from patarm.demo.gsm8k import evaluate
from patarm.demo.gsm8k.arguments import (  # noqa: F401  (re-exported: the recipe's arguments)
    ARMS,
    BINARY_HINT,
    CONFIG_DIR,
    DEFAULT_CONFIG,
    DISCLOSES,
    STAGES,
    GSM8KArguments,
    argument_defaults,
    parse_args,
)
from patarm.demo.gsm8k.metrics import pool_baselines, skill_selection, summarize_scores
from patarm.demo.gsm8k.stages import (
    bt_stage,
    forget_eval,
    grpo_plan,
    judge_folder,
    prep_sft_corpus,
    rl_stage,
    stage_args,
    train_stage,
    trained,
)
from patarm.demo.kit import Clock, grpo_curve
from patarm.io import read_json, write_json

logger = logging.getLogger("patarm.gsm8k")


def main(argv: list[str]) -> dict:
    """`patarm quickstart --recipe gsm8k-skill ...`: one run, the seeds mode, or every ablation (`--ablation all`)."""
    from patarm.demo.gsm8k import ablations

    if ablations.flag_value(argv, "--ablation")[0] == "all":
        return ablations.run_all(argv, parse_args, run)
    return run(parse_args(argv))


def run(args: GSM8KArguments) -> dict:
    """Every stage of every arm (skipping finished ones), then the report; returns the report dict."""
    from patarm.demo.gsm8k.report import write_report

    out = Path(args.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    if args.seeds:
        from patarm.demo.gsm8k.seeds import run_seeds

        return run_seeds(args, run)
    clock = Clock(out)
    problems, manifest = gsm8k_data.load_problems(args.data_dir)
    split_seed = args.seed if args.split_seed is None else args.split_seed
    train, heldout = gsm8k_data.split_problems(problems, args.heldout_problems, split_seed)
    sft_set = gsm8k_data.take(train, args.sft_problems)
    rl_pool = gsm8k_data.take(train, args.rl_problems, start=args.sft_problems)
    _check_split(out, heldout, sft_set, rl_pool)
    reused = {}
    if args.reuse_sft:
        from patarm.demo.gsm8k.reuse import reuse_sft

        reused = reuse_sft(args.reuse_sft, out, args.arms, asdict(args), argument_defaults())
    logger.info("%d problems (%s); held out %d, SFT pairs from %d problems, RL pool from %d", len(problems),
                manifest.to_dict()["dropped"] or "none dropped", len(heldout), len(sft_set), len(rl_pool))
    unanimous_pool = [p for p in train if not p.mixed]  # outside every pair: the evidence arm's `sft_unanimous`
    arms = {arm: run_arm(args, arm, out / arm, sft_set, rl_pool, heldout, clock, unanimous_pool) for arm in args.arms}
    baselines = pool_baselines(heldout) | {"skill_no_reference": skill_selection(heldout)}
    report = {"command": "patarm quickstart --recipe gsm8k-skill", "arguments": asdict(args),
              "baselines": baselines, "arms": arms, "timings": clock.timings,
              "seconds": round(time.time() - clock.t0, 1), "data": manifest.to_dict()} | (
                  {"reused": reused} if reused else {})
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


def _base_judge(args: GSM8KArguments) -> str:
    """The base model as judged: a `tiny` spec (tests) is built inside the run folder, not under ./runs."""
    from patarm.models import parse_tiny_spec, resolve_model

    return args.model if parse_tiny_spec(args.model) is None else resolve_model(args.model, output_dir=args.run_dir)


def run_arm(args: GSM8KArguments, arm: str, d: Path, sft_set, rl_pool, heldout, clock: Clock,
            unanimous_pool=()) -> dict:
    """One arm end to end in its run folder `d`; returns its evaluation summaries and prep counts."""
    disclose, evidence = DISCLOSES[arm]
    if evidence and args.evidence_agreement and args.evidence_max_new_tokens:
        args = replace(args, max_new_tokens=args.evidence_max_new_tokens)
    result: dict[str, Any] = {"stages": {}, "prep": {}}
    result["prep"]["sft"] = prep_sft_corpus(args, d, sft_set, disclose, clock, evidence, unanimous_pool)
    judged = {"base": _base_judge(args)}
    started = time.time()
    if not trained(d / "sft"):
        forget_eval(d, "sft")
        epochs = () if args.sft_epochs is None else ("--num_train_epochs", str(args.sft_epochs))
        train_stage("sft", stage_args("sft", args.sft_config, d, "--model_name_or_path", args.model,
                                  "--seed", str(args.seed), "--max_length",
                                  str(args.max_prompt_tokens + args.max_new_tokens + 16), *epochs))
        clock.done(f"{arm}/sft", started)
    judged["sft"] = str(judge_folder(d / "sft"))
    result["prep"]["rl"] = (rl_stage(args, d, rl_pool, disclose, judged["sft"], clock, evidence) if args.grpo_steps
                            else {"pool": 0, "kept": 0, "dropped": {"no GRPO stage (grpo_steps 0)": 0}})
    if args.grpo_steps and result["prep"]["rl"]["kept"]:
        started = time.time()
        parsed = stage_args("grpo", args.grpo_config, d, "--model_name_or_path", judged["sft"],
                            "--seed", str(args.seed if args.grpo_seed is None else args.grpo_seed),
                            "--max_steps", str(args.grpo_steps),
                            "--max_prompt_length", str(args.max_prompt_tokens),
                            "--max_completion_length", str(args.max_new_tokens),
                            "--rubric_mode", args.rubric_mode, "--margin", args.margin, "--reward", args.reward)
        result["prep"]["grpo"] = grpo_plan(args.grpo_steps, args.grpo_epochs, result["prep"]["rl"]["kept"],
                                           parsed[1])
        parsed[1].max_steps = result["prep"]["grpo"]["steps"]
        if not trained(d / "grpo"):
            forget_eval(d, "grpo")
            train_stage("grpo", parsed)
            clock.done(f"{arm}/grpo", started)
        judged["grpo"] = str(judge_folder(d / "grpo"))
    elif args.grpo_steps:
        logger.warning("%s: the RL set is empty (no pool pair in the kept band), so there is no GRPO stage", arm)
    for stage, model in judged.items():
        result["stages"][stage] = _evaluate(args, arm, d, stage, model, heldout, clock)
    if args.bt_baseline and arm != "evidence":
        result["bt"] = bt_stage(args, d, arm, heldout, disclose, clock)
    result["grpo_curve"] = grpo_curve(d / "grpo" / "metrics.jsonl")
    return result


def _expected(args: GSM8KArguments, arm: str, d: Path, stage: str, model: str, heldout, records: list[dict],
              clock: Clock) -> list[dict]:
    """The greedy judgments scored by the judge's verdict probability (`verdict.expected_records`), kept in
    `eval/<stage>-expected.jsonl` so that a resumed run does not redo them."""
    from patarm.demo.gsm8k.verdict import expected_records
    from patarm.io import write_jsonl

    path = d / "eval" / f"{stage}-expected.jsonl"
    if path.is_file():
        return evaluate.load_records(path)
    disclose, evidence = DISCLOSES[arm]
    started = time.time()
    out = expected_records(model, records, lambda tok: evaluate.fitted_prompts(
        heldout, disclose, args.skill, tok, args.max_prompt_tokens, evidence, args.rubric_mode,
        args.agreement), args.eval_dtype,
        args.eval_batch_size, args.judge_device)
    write_jsonl(out, path)
    clock.done(f"{arm}/expected-{stage}", started)
    return out


def _evaluate(args: GSM8KArguments, arm: str, d: Path, stage: str, model: str, heldout, clock: Clock) -> dict:
    """The stage's greedy judgments (and k sampled ones when voting): metrics and evidence–verdict consistency."""
    from patarm.demo.gsm8k.consistency import readout_records
    from patarm.demo.gsm8k.consistency import summarize as consistency
    from patarm.demo.gsm8k.verdict import verdict_summary
    from patarm.demo.gsm8k.vote import voting_summary

    disclose, evidence = DISCLOSES[arm]
    runs = {"": 0} | ({"-vote": args.vote_k} if args.vote_k and stage in args.vote_stages else {})
    summary: dict[str, Any] = {}
    for suffix, samples in runs.items():
        path = d / "eval" / f"{stage}{suffix}.jsonl"
        if path.is_file():
            records = evaluate.load_records(path)
        else:
            started = time.time()
            records = evaluate.judge_problems(model, heldout, disclose, args.skill, path, args.max_prompt_tokens,
                                              args.max_new_tokens, args.eval_batch_size, args.eval_dtype,
                                              name=f"{arm}/{stage}{suffix} judge", device=args.judge_device,
                                              evidence=evidence, rubric_mode=args.rubric_mode, samples=samples,
                                              temperature=args.vote_temperature, seed=args.seed,
                                              agreement=args.agreement)
            clock.done(f"{arm}/eval-{stage}{suffix}", started)
        if samples:
            summary["voting"] = voting_summary(records, samples)
        else:
            summary |= summarize_scores(records)
            summary["consistency"] = consistency([t for r in records for t in r["texts"]])
            summary["readout"] = summarize_scores(readout_records(records))
            verdicts = records
            if args.verdict_probability and disclose and stage != "base":
                verdicts = _expected(args, arm, d, stage, model, heldout, records, clock)
                summary["expected"] = summarize_scores(verdicts)
            if disclose and (truth := verdict_summary(verdicts)) is not None:
                summary["verdict"] = truth  # the pass/fail words (and P(pass)) against the candidates' correctness
    logger.info("%s / %s: pair accuracy %.3f, format-valid %.3f, best-of-4 %.1f %%, consistent %.3f; evidence read "
                "out: pair accuracy %.3f, best-of-4 %.1f %%", arm, stage, summary["pair_accuracy"],
                summary["format_valid"], summary["best_of_n"], summary["consistency"]["consistent_rate"],
                summary["readout"]["pair_accuracy"], summary["readout"]["best_of_n"])
    if "expected" in summary:
        logger.info("%s / %s: verdict probability: pair accuracy %.3f, best-of-4 %.1f %%", arm, stage,
                    summary["expected"]["pair_accuracy"], summary["expected"]["best_of_n"])
    return summary


