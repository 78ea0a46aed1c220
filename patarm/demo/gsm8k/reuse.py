"""Reuse a finished run's SFT judge (`reuse_sft: DIR`): an ablation that changes only GRPO (the reward, the margin
f(δ)) starts from the same SFT judge as the baseline, so linking the baseline's SFT stages makes the comparison
exact (one SFT judge, not two that differ by kernel noise) and saves what comes before GRPO: ~69 min a row of the
reference arm at the CPU default's sizes (SFT 39, RL set 9, base and SFT judgings 21; measured 2026-12-03).

What is linked, per arm, when the source's recipe arguments that decide it equal this run's:
- `prep/pointwise/` (the SFT corpus) and `sft/` (the SFT judge) — `SFT_KEYS`;
- `prep/rl/` (the RL set, the SFT judge's rollouts) — also `RL_KEYS`;
- `eval/base.*`, `eval/sft.*`, `eval/sft-expected.jsonl` (greedy judgments of the base and SFT judges) — also
  `EVAL_KEYS` (copied, not linked: a later stage may delete its own evaluation);
- where the SFT judge is not reused (e.g. `sft-more`: other SFT epochs), still `eval/base.*` when `BASE_KEYS` and
  `EVAL_KEYS` match (the base judge's judgments: ~8 min at the CPU default's sizes).

Folders are symbolic links to the source (nothing large is copied; the source must stay). A stage this run has
already is kept. Anything that differs is named in the log and redone here.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from patarm.demo.gsm8k.arguments import rollout_temperature
from patarm.demo.kit import step_done, trained
from patarm.io import read_json

logger = logging.getLogger("patarm.gsm8k")

SFT_KEYS = ("data_dir", "model", "teacher", "teacher_numbers", "teacher_issues_line", "skill", "rubric_mode",
            "sft_epochs", "heldout_problems", "sft_problems", "pairs_per_problem", "follows_no_repeat",
            "sft_near_misses",
            "sft_min_margin", "rule_sft_min_margin", "max_prompt_tokens", "max_new_tokens", "sft_config", "seed",
            "split_seed")
RL_KEYS = ("rl_problems", "rl_rollouts", "rl_temperature", "rl_keep", "rl_keep_rewards", "rl_near_misses",
           "eval_dtype", "eval_batch_size", "judge_device")
EVAL_KEYS = ("eval_dtype", "eval_batch_size", "judge_device", "verdict_probability")
# what decides the base judge's greedy judgments (the model, the held-out problems, the prompt, the length)
BASE_KEYS = ("data_dir", "model", "skill", "rubric_mode", "heldout_problems", "max_prompt_tokens", "max_new_tokens",
             "seed", "split_seed")
CONFIG_KEYS = ("sft_config",)
# SFT hyperparameters a stage config sets, also compared with what the source's SFT judge recorded it trained with
# (`sft/patarm_config.json`): a config file can change under the same path (the CPU default's went from 1 to 2 epochs
# on 2026-12-04), and then both runs' arguments read today's text and look equal
TRAINING_KEYS = ("num_train_epochs", "learning_rate", "lr_scheduler_type", "warmup_steps", "weight_decay",
                 "per_device_train_batch_size", "gradient_accumulation_steps")


# stage-config keys that do not change what a stage learns (how often it saves, logs, reports)
NEUTRAL_CONFIG_KEYS = ("save_strategy", "save_steps", "save_total_limit", "logging_steps", "report_to",
                       "dataloader_num_workers")


def _value(args: dict, key: str) -> Any:
    """A recipe argument as compared: a stage config by its settings when the file exists (paths differ by
    checkout), less comments and `NEUTRAL_CONFIG_KEYS`; `rl_temperature` as the temperature it samples at."""
    import yaml

    value = args.get(key)
    if key == "rl_temperature":  # as sampled: unset is the GRPO config's (before the argument: theirs, all 1.0)
        return rollout_temperature(value, args.get("grpo_config"))
    if key in CONFIG_KEYS and value and Path(value).is_file():
        settings = yaml.safe_load(Path(value).read_text()) or {}
        return {k: v for k, v in settings.items() if k not in NEUTRAL_CONFIG_KEYS}
    return value


def differences(source: dict, ours: dict, keys: tuple[str, ...]) -> list[str]:
    """The keys whose values differ between two runs' recipe arguments."""
    return [k for k in keys if _value(source, k) != _value(ours, k)]


def arm_differences(source: dict, ours: dict, arm: str, base: bool = False) -> list[str]:
    """What else decides one arm's SFT corpus, judge and judgments: the evidence arm's agreement line (its prompts,
    its teacher's lines), the judgment length it then gets (`evidence_max_new_tokens`, unused without it), whether
    its prompt states the score rule (`evidence_score_rule`) and its unanimous SFT rows (`sft_unanimous`; both
    unused without it). `base`: only what decides the base judge's judgments (its prompts and length; the SFT rows
    do not)."""
    if arm != "evidence":
        return []

    def effective(args: dict) -> tuple:
        agree = bool(args.get("evidence_agreement"))
        return (agree, (args.get("evidence_max_new_tokens") if agree else None),
                agree and bool(args.get("evidence_score_rule")),  # absent in runs before 2026-12-07 #19: false
                (args.get("sft_unanimous") or 0) if agree else 0)  # absent before 2026-12-07 #20: 0

    keys = ("evidence_agreement", "evidence_max_new_tokens", "evidence_score_rule", "sft_unanimous")
    deciding = keys[:3] if base else keys  # the base judge's prompts and length; SFT rows decide only SFT onwards
    mine, theirs = effective(ours), effective(source)
    return [k for k, a, b in zip(keys, theirs, mine) if a != b and k in deciding]


def trained_otherwise(sft_dir: Path, ours: dict) -> list[str]:
    """The SFT hyperparameters (`TRAINING_KEYS`) this run would train with that differ from what the SFT judge in
    `sft_dir` recorded, as `key recorded -> ours`; [] when it recorded none."""
    import yaml

    from patarm.models.settings import RUN_CONFIG_FILE

    recorded_file = Path(sft_dir) / RUN_CONFIG_FILE
    config = ours.get("sft_config")
    if not recorded_file.is_file() or not config or not Path(config).is_file():
        return []
    recorded = read_json(recorded_file).get("training") or {}
    wanted = yaml.safe_load(Path(config).read_text()) or {}
    if ours.get("sft_epochs") is not None:
        wanted["num_train_epochs"] = ours["sft_epochs"]

    def same(a: Any, b: Any) -> bool:
        try:
            return float(a) == float(b)
        except (TypeError, ValueError):
            return str(a) == str(b)

    return [f"{k} {recorded[k]} -> {wanted[k]}" for k in TRAINING_KEYS
            if k in wanted and k in recorded and not same(recorded[k], wanted[k])]


def _link(src: Path, dst: Path) -> None:
    """`dst` → `src` unless this run has `dst` already (a stage of its own is kept)."""
    if not (dst.exists() or dst.is_symlink()):
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.symlink_to(src.resolve(), target_is_directory=True)


def reuse_sft(source_dir: str | Path, run_dir: str | Path, arms: list[str], ours: dict,
              defaults: dict | None = None) -> dict:
    """Link the source run's SFT stages of each arm into `run_dir` where their arguments match; returns what was
    reused per arm (and why not, where not) — the report's `reused`. An argument the source's report lacks (the run
    predates it) counts as its value in `defaults`: an argument is added with a default that keeps the old behaviour."""
    source_dir = Path(source_dir)
    report = source_dir / "report.json"
    if not report.is_file():
        raise ValueError(f"reuse_sft {source_dir}: no report.json there — name a finished run folder of this recipe "
                         "(its SFT judge and its recipe arguments are read from it)")
    source = (defaults or {}) | read_json(report)["arguments"]
    theirs, mine = (read_json(p) if p.is_file() else None for p in (source_dir / "split.json",
                                                                   Path(run_dir) / "split.json"))
    split_diff = [k for k in ("heldout", "sft", "rl") if theirs and mine and theirs.get(k) != mine.get(k)]
    if {"heldout", "sft"} & set(split_diff):
        raise ValueError(f"reuse_sft {source_dir}: its held-out/SFT split differs from {run_dir}'s split.json")
    out: dict[str, Any] = {}
    sft_diff, rl_diff = differences(source, ours, SFT_KEYS), differences(source, ours, RL_KEYS)
    if "rl" in split_diff and "rl_problems" not in rl_diff:
        rl_diff.append("rl problems")  # another RL pool of the same size: the RL set is redone
    common_sft_diff = sft_diff
    for arm in arms:
        sft_diff = common_sft_diff + arm_differences(source, ours, arm)
        src, dst = source_dir / arm, Path(run_dir) / arm
        own = (dst / "sft").exists() and not (dst / "sft").is_symlink()
        done = arm in source.get("arms", []) and trained(src / "sft")
        otherwise = trained_otherwise(src / "sft", ours) if done and not sft_diff else []
        if sft_diff or own or not done or otherwise:
            why = (f"arguments differ: {sft_diff}" if sft_diff else "this run has an SFT stage of its own" if own
                   else "no finished SFT stage of this arm there" if not done
                   else f"its SFT judge was trained otherwise: {otherwise}")
            # the base judge's judgments do not depend on SFT: copied where what decides them is the same
            base_diff = differences(source, ours, BASE_KEYS + EVAL_KEYS) + arm_differences(source, ours, arm, base=True)
            base = [] if base_diff else _copy_evals(src, dst, ("base.*",))
            logger.info("%s: the SFT judge is not reused from %s (%s)%s", arm, source_dir, why,
                        f"; reused: {', '.join(base)}" if base else "")
            out[arm] = {"from": str(source_dir), "stages": base, "not_reused": why}
            continue
        for name in ("prep/pointwise", "sft"):
            _link(src / name, dst / name)
        copied = False
        if not rl_diff and step_done(src / "prep" / "rl"):
            _link(src / "prep" / "rl", dst / "prep" / "rl")
        elif copied := _copy_cache(src / "prep" / "rl" / "cache.sqlite", dst / "prep" / "rl" / "cache.sqlite"):
            logger.info("%s: the RL set is redone with %s's rollout cache (a rollout it has — the same judge, prompt "
                        "and sampling — is not drawn again)", arm, source_dir)
        stages = [n for n in ("prep/pointwise", "sft", "prep/rl") if (dst / n).is_symlink()]
        stages += ["prep/rl/cache.sqlite"] if copied else []
        if not differences(source, ours, EVAL_KEYS):
            stages += _copy_evals(src, dst, ("base.*", "sft.*", "sft-expected.jsonl"))
        logger.info("%s: reused from %s: %s%s", arm, source_dir, ", ".join(stages) or "nothing",
                    f" (RL set redone: {rl_diff} differ)" if rl_diff else "")
        out[arm] = {"from": str(source_dir), "stages": stages} | ({"rl_differs": rl_diff} if rl_diff else {})
    return out


def _copy_cache(src: Path, dst: Path) -> bool:
    """Copy the source's RL rollout cache (SQLite's backup API: a consistent copy) where this run has none; the
    cache keys on the judge's content (`patarm.backends.cache.model_cache_id`), so the reused judge's rollouts of the
    same prompts are found and nothing else is."""
    import sqlite3

    if not src.is_file() or dst.exists():
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    part = dst.with_name(dst.name + ".part")
    theirs, ours = sqlite3.connect(src), sqlite3.connect(part)
    try:
        theirs.backup(ours)
    finally:
        theirs.close()
        ours.close()
    part.replace(dst)
    return True


def _copy_evals(src: Path, dst: Path, patterns: tuple[str, ...]) -> list[str]:
    """Copy the source arm's evaluation files matching `patterns` (a file this run has is kept); the names copied
    whole, as `eval/<name>`."""
    (dst / "eval").mkdir(parents=True, exist_ok=True)
    copied = []
    for pattern in patterns:
        for path in sorted((src / "eval").glob(pattern)):
            copy = dst / "eval" / path.name
            if not copy.exists():
                shutil.copy2(path, copy)
            if copy.stat().st_size == path.stat().st_size:
                copied.append(f"eval/{path.name}")
    return copied
