"""The data stages of one arm and its BT baseline, each skipped when its output exists:

- the pointwise SFT corpus (`prep/pointwise/`): the verifier teacher judges both sides of every SFT pair
  (`patarm.prep.corpus.pointwise_corpus`, prompts built by the skill prompt builder, the margin filter:
  > `sft_min_margin` (the paper's 2) in the reference arm, > `rule_sft_min_margin` in the arms without it);
- the RL set (`prep/rl/`): the SFT judge rolled out n times per side, pairs kept in the band
  (`patarm.prep.corpus.rl_set`, the paper's rejection sampling);
- the BT baseline (`prep/bt/pairs.jsonl`, `bt/`, `eval/bt.jsonl`): TRL's RewardTrainer on the same base model and
  the pairs the judge trained on (SFT pairs + RL set), the reference appended to the question when disclosed.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from patarm.data import write_pairs
from patarm.demo.gsm8k import data as gsm8k_data
from patarm.demo.gsm8k import evaluate
from patarm.demo.gsm8k.metrics import summarize_scores
from patarm.demo.kit import stage_args, train_stage, trained, write_step
from patarm.io import read_json

logger = logging.getLogger("patarm.gsm8k")


def judge_folder(folder: Path) -> Path:
    """The folder to judge or continue from: `folder`, or its LoRA adapter merged into `<folder>-merged`."""
    if not (folder / "adapter_config.json").is_file():
        return folder
    merged = folder.with_name(folder.name + "-merged")
    if not trained(merged):
        from patarm.export import export

        export(folder, merged, overwrite=True)
    return merged


def forget_eval(arm_dir: Path, stage: str) -> None:
    """A stage was (re)trained: its old evaluation and cached judgments no longer describe it."""
    for pattern in (f"{stage}.*", f"{stage}-vote.*"):
        for path in (arm_dir / "eval").glob(pattern):
            path.unlink()


def _renderer(args: Any):
    """The prompt builder cut to `max_prompt_tokens` with the base model's tokenizer (as GRPO and eval cut)."""
    from patarm.demo.gsm8k.prompts import skill_prompt
    from patarm.judge.truncate import truncate_messages
    from patarm.models import load_tokenizer, resolve_model

    tokenizer = load_tokenizer(resolve_model(args.model, output_dir=args.run_dir))  # a tiny spec: built in the run
    return lambda pair, response, template: truncate_messages(skill_prompt(pair, response, template), tokenizer,
                                                              args.max_prompt_tokens)[0]


def prep_sft_corpus(args: Any, d: Path, problems, disclose: bool, clock: Any, evidence: bool = False,
                    unanimous_pool=()) -> dict:
    """The pointwise SFT corpus of the arm (the teacher named by `args.teacher`); returns its manifest.
    `unanimous_pool`: train problems outside the pairs' (no correct-incorrect pair) that `args.sft_unanimous` rows
    of the evidence arm with agreement come from (`unanimous_rows`)."""
    from patarm.demo.gsm8k.teacher import make_teacher
    from patarm.prep.corpus import pointwise_corpus

    folder = d / "prep" / "pointwise"
    if not (folder / "manifest.json").is_file():
        started = time.time()
        pairs = gsm8k_data.make_pairs(problems, args.pairs_per_problem, args.seed, disclose, args.skill, evidence,
                                      args.agreement)
        margin = args.sft_min_margin if disclose else args.rule_sft_min_margin
        teacher = make_teacher(args.teacher, args.rubric_mode, args.teacher_numbers, args.teacher_issues_line)
        render = _renderer(args)
        rows, manifest = pointwise_corpus(pairs, teacher, evaluate.judge_template(args.rubric_mode), margin,
                                          render=render)
        if not rows:
            raise ValueError(f"{d.name}: the SFT corpus is empty — the teacher's margin exceeded the filter "
                             f"({margin:g}) on none of {len(pairs)} pairs ({dict(manifest.dropped)}): raise "
                             "sft_problems or lower sft_min_margin / rule_sft_min_margin")
        rows = repeat_follows_no(rows, args.follows_no_repeat, manifest)
        if args.sft_near_misses:
            misses, extra = near_miss_rows(args, problems, disclose, evidence, teacher, margin, render,
                                           manifest)
            pairs, rows = pairs + misses, rows + extra
            manifest.extra["sft_rows"] = len(rows)
        if args.sft_unanimous and evidence and args.agreement:
            rows = rows + unanimous_rows(args, unanimous_pool, teacher, render, manifest)
            manifest.extra["sft_rows"] = len(rows)
        kept = {r["pair_id"] for r in rows}
        write_step(folder, manifest, {"sft.jsonl": rows, "pairs.jsonl": [p.to_dict() for p in pairs if p.id in kept]})
        clock.done(f"{d.name}/prep-sft", started, f"{len(rows)} SFT rows from {len(pairs)} pairs")
    return read_json(folder / "manifest.json")


def near_miss_rows(args: Any, problems, disclose: bool, evidence: bool, teacher: Any, margin: float, render: Any,
                   manifest: Any) -> tuple[list, list[dict]]:
    """`args.sft_near_misses` near-miss pairs from the SFT problems (`gsm8k_data.near_miss_pairs`) judged by the
    teacher, and the SFT rows of their near-miss side only — the judgment stating both numbers (`final answer ::
    240`, `reference answer :: 2400`, `correct :: fail`, `follows :: no`), supervised token by token; the correct
    side is a solution the corpus already has. Counted in `manifest.extra["near_misses"]` (made, kinds, skipped,
    the teacher's drops)."""
    from patarm.prep.corpus import pointwise_corpus

    misses, made = gsm8k_data.near_miss_pairs(problems, args.sft_near_misses, args.seed + 3, disclose, args.skill,
                                               evidence, args.agreement)
    rows, judged = pointwise_corpus(misses, teacher, evaluate.judge_template(args.rubric_mode), margin, render=render)
    rows = [r for r in rows if r["side"] == "rejected"]
    manifest.extra["near_misses"] = {"made": len(misses), "rows": len(rows), "kinds": made.extra["kinds"],
                                     "skipped": dict(made.dropped), "teacher_dropped": dict(judged.dropped)}
    return misses, rows


def unanimous_rows(args: Any, problems, teacher: Any, render: Any, manifest: Any) -> list[dict]:
    """`args.sft_unanimous` SFT rows of the evidence arm with agreement, one per problem of `problems` whose
    candidates all give one final answer (`gsm8k_data.unanimous_pairs`): the teacher's judgment stating `agreement
    :: 4 of 4`, which the pair corpus never has (a pair's sides give different answers) and the judge then scored as
    3 of 4 — 28 of 400 held-out judgments inconsistent at the CPU default (docs/gsm8k-skill.md). Not pairs: they
    stay out of pairs.jsonl (the BT baseline's data). Counted in `manifest.extra["unanimous"]`."""
    from patarm.prep.corpus import pointwise_corpus

    pairs, made = gsm8k_data.unanimous_pairs(problems, args.sft_unanimous, args.seed + 4, args.skill,
                                             args.agreement)
    rows, judged = pointwise_corpus(pairs, teacher, evaluate.judge_template(args.rubric_mode), -math.inf,
                                    render=render)
    rows = [r for r in rows if r["side"] == "chosen"]
    manifest.extra["unanimous"] = {"asked": args.sft_unanimous, "rows": len(rows), "skipped": dict(made.dropped),
                                   "teacher_dropped": dict(judged.dropped)}
    if len(rows) < args.sft_unanimous:
        logger.warning("sft_unanimous %d: only %d train problems outside the pairs have one final answer among their "
                       "candidates (counted in the SFT manifest)", args.sft_unanimous, len(rows))
    return rows


def repeat_follows_no(rows: list[dict], times: int, manifest: Any) -> list[dict]:
    """The SFT rows with each one whose judgment states `follows :: no` `times` times (the field value the judge
    otherwise sees in ~4 % of rows and does not learn in two epochs: docs/gsm8k-skill.md); counted in the manifest
    (`follows_no_rows`: such rows before repeating, `sft_rows`: rows after)."""
    from patarm.demo.gsm8k.consistency import stated

    rare = [r for r in rows if stated(r["messages"][-1]["content"]).get("follows") == "no"]
    manifest.extra["follows_no_rows"] = len(rare)
    if times > 1:
        rows = rows + [r for _ in range(times - 1) for r in rare]
    manifest.extra["sft_rows"] = len(rows)
    return rows


def grpo_plan(grpo_steps: int, grpo_epochs: float | None, kept: int, training: Any) -> dict:
    """GRPO-PAR's length over the kept RL set: `grpo_steps` optimizer steps, at most `grpo_epochs` passes over the
    `kept` pairs when set. A step takes per_device_train_batch_size × gradient_accumulation_steps × processes
    completions, G (num_generations) per prompt and two prompts (chosen, rejected) per pair."""
    completions = training.per_device_train_batch_size * training.gradient_accumulation_steps * training.world_size
    pairs_per_step = completions / (2 * training.num_generations)
    steps = grpo_steps
    if grpo_epochs is not None:
        steps = max(1, min(grpo_steps, math.ceil(grpo_epochs * kept / pairs_per_step - 1e-9)))
    return {"steps": steps, "pairs_per_step": pairs_per_step, "passes": round(steps * pairs_per_step / kept, 2),
            "epochs_cap": grpo_epochs}


def rl_stage(args: Any, d: Path, problems, disclose: bool, judge: str, clock: Any, evidence: bool = False) -> dict:
    """The RL set: pool pairs whose share of right SFT-judge rollouts is in the kept band; returns its counts."""
    from patarm.backends import GenerationOptions, make_backend
    from patarm.prep.corpus import rl_set
    from patarm.train.grpo import extra_reward_funcs

    folder = d / "prep" / "rl"
    if not (folder / "manifest.json").is_file():
        started = time.time()
        pool = gsm8k_data.make_pairs(problems, args.pairs_per_problem, args.seed + 1, disclose, args.skill, evidence,
                                     args.agreement)
        misses, miss_manifest = gsm8k_data.near_miss_pairs(problems, args.rl_near_misses, args.seed + 2, disclose,
                                                            args.skill, evidence, args.agreement)
        temperature = args.rollout_temperature  # reads the GRPO config: once
        sampler = make_backend(evaluate.backend_spec(judge, args.eval_dtype, args.judge_device),
                               GenerationOptions(max_new_tokens=args.max_new_tokens, temperature=temperature,
                                                 batch_size=args.eval_batch_size),
                               cache=folder / "cache.sqlite", name=f"{d.name} RL rollouts")
        kept, manifest = rl_set(pool + misses, sampler, evaluate.judge_template(args.rubric_mode), n=args.rl_rollouts,
                                low=args.rl_keep[0], high=args.rl_keep[1], seed=args.seed, render=_renderer(args),
                                keep_rewards=extra_reward_funcs(args.rl_keep_rewards, "rl_keep_rewards"))
        sampler.cache.close()
        manifest.extra["temperature"] = temperature
        if args.rl_near_misses:
            manifest.extra["near_misses"] = {"made": len(misses), "kept": sum("near_miss" in p.metadata for p in kept),
                                             "kinds": miss_manifest.extra["kinds"],
                                             "skipped": dict(miss_manifest.dropped)}
        write_step(folder, manifest, {"pairs.jsonl": [p.to_dict() for p in kept]})
        clock.done(f"{d.name}/rl-set", started, f"kept {len(kept)} of {len(pool) + len(misses)} pairs "
                   f"({manifest.extra['kept_for_other_rewards']} for the other rewards) {dict(manifest.dropped)}")
    manifest = read_json(folder / "manifest.json")
    return {"pool": manifest["rows_in"], "kept": manifest["rows_out"], "dropped": manifest["dropped"],
            "kept_for_other_rewards": manifest.get("kept_for_other_rewards", 0),
            **({"near_misses": manifest["near_misses"]} if "near_misses" in manifest else {}),
            "correct_rate_histogram": manifest.get("correct_rate_histogram", {})}


def bt_pairs(d: Path, disclose: bool) -> list:
    """The pairs the judge trained on (SFT corpus pairs, then the RL set), with the BT conversation."""
    from patarm.data import load_pairs

    pairs = []
    for name in ("pointwise", "rl"):
        path = d / "prep" / name / "pairs.jsonl"
        if path.is_file() and path.stat().st_size:
            pairs += load_pairs(str(path)).pairs
    for p in pairs:
        p.prompt = evaluate.bt_prompt(p.question, str(p.metadata["reference"]) if disclose else None)
    return pairs


def bt_stage(args: Any, d: Path, arm: str, heldout, disclose: bool, clock: Any) -> dict:
    """Train the BT baseline on the arm's pairs and score the held-out candidates; returns its summary."""
    started = time.time()
    if not trained(d / "bt"):
        write_pairs(bt_pairs(d, disclose), d / "prep" / "bt" / "pairs.jsonl")
        forget_eval(d, "bt")
        train_stage("bt", stage_args("bt", args.bt_config, d, "--model_name_or_path", args.model, "--seed",
                                     str(args.seed)))
        clock.done(f"{arm}/bt", started)
    path = d / "eval" / "bt.jsonl"
    if not path.is_file():
        started = time.time()
        evaluate.bt_scores(str(d / "bt"), heldout, disclose, path, args.eval_batch_size, args.eval_dtype,
                           args.max_prompt_tokens)
        clock.done(f"{arm}/eval-bt", started)
    summary = summarize_scores(evaluate.load_records(path))
    logger.info("%s / BT: pair accuracy %.3f, best-of-4 %.1f %%", arm, summary["pair_accuracy"], summary["best_of_n"])
    return summary
