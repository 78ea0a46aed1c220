"""Training the policy with plain `trl.GRPOTrainer` on one reward, and the BT model's held-out pair accuracy."""

from __future__ import annotations

import dataclasses
import gc
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from patarm.demo.downstream.config import DownstreamArguments
from patarm.demo.downstream.eval import Evaluator, HeldoutCallback
from patarm.io import read_json, read_jsonl, write_json
from patarm.models.settings import RUN_CONFIG_FILE

logger = logging.getLogger("patarm.downstream")


def grpo_config(args: DownstreamArguments, out: Path, folder: Path, overrides: Sequence[str] = ()) -> Any:
    """TRL's GRPOConfig (with the speed switches, `SpeedGRPOConfig`) from `args.grpo_config`, with this run's output
    folder, steps and seed, then `args.grpo_settings` and `overrides` (`--key value`, as on a command line). On a CPU,
    `bf16` defaults to autocast where the CPU computes in bf16 (as `patarm sft` / `grpo` do), else fp32."""
    import torch

    from patarm.config import ConfigError, RunArguments, parse_stage
    from patarm.train.common import cpu_bf16, precision_sentence
    from patarm.train.grpo import SpeedGRPOConfig

    defaults = {} if torch.cuda.is_available() else {"bf16": cpu_bf16()[0], "use_cpu": True}
    argv = ["--config", args.grpo_config, "--run_dir", str(out), "--output_dir", str(folder), "--max_steps",
            str(args.grpo_steps), "--seed", str(args.seed), *settings_flags(args.grpo_settings or {}), *overrides]
    try:
        _, config = parse_stage((RunArguments, SpeedGRPOConfig), argv, prog="patarm downstream (policy GRPO)",
                                defaults=defaults)
    except ConfigError as err:  # say where the policy's GRPO fields came from
        raise ConfigError(f"the policy's GRPO config {args.grpo_config} with grpo_settings {args.grpo_settings}: "
                          f"{err}") from None
    # one switch for rollouts and measurement: a policy is measured on the prompts it was trained on
    config.chat_template_kwargs = {**(config.chat_template_kwargs or {}), "enable_thinking": args.enable_thinking}
    if config.use_cpu:
        logger.info("policy GRPO: %s", precision_sentence(bool(config.bf16), *cpu_bf16()))
    return config


def settings_flags(settings: dict[str, Any]) -> list[str]:
    """A mapping of config fields as command-line flags: `--key value`, a list's items as separate values."""
    flags: list[str] = []
    for key, value in settings.items():
        flags += [f"--{key}", *(map(str, value) if isinstance(value, list) else [str(value)])]
    return flags


def train_policy(args: DownstreamArguments, out: Path, folder: Path, policy: str, reward_fn: Any,
                 evaluator: Evaluator, scorer_names: Sequence[str]) -> None:
    """GRPO of `policy` on `reward_fn` over the task's RL prompts; saves the policy into `folder`, then marks it
    trained (`patarm_config.json`) and removes its checkpoints. With checkpoints on (the config's `save_strategy:
    steps`), a run stopped mid-training resumes from the newest complete checkpoint in `folder`: the steps after
    it are dropped from metrics.jsonl and heldout.jsonl and trained again."""
    from datasets import Dataset
    from transformers.trainer_callback import ProgressCallback
    from trl import GRPOTrainer

    from patarm.models import load_causal_lm
    from patarm.train.common import (
        AtomicCheckpointMixin,
        JsonlMetricsCallback,
        QuietProgressCallback,
        complete_checkpoints,
    )
    from patarm.train.grpo import GRPOSpeedMixin

    class PolicyGRPOTrainer(AtomicCheckpointMixin, GRPOSpeedMixin, GRPOTrainer):
        pass

    config = grpo_config(args, out, folder)
    rows = read_jsonl(out / "task" / "rl.jsonl")
    model, tokenizer = load_causal_lm(policy, dtype=None if config.use_cpu else "bfloat16")
    callbacks: list[Any] = [JsonlMetricsCallback()]
    if args.eval_every:
        n = args.eval_every_prompts
        subset = 0 < n < len(evaluator.items)  # the first n held-out prompts, the same at every measurement
        every = dataclasses.replace(evaluator, items=evaluator.items[:n]) if subset else evaluator
        callbacks.append(HeldoutCallback(every, args.eval_every, str(folder / "heldout.jsonl"), scorer_names,
                                         subset=subset))
    # TRL's GRPOTrainer as it is, with the speed switches that change how, not what, it computes (GRPOSpeedMixin:
    # the compact LM head, each prompt's rollouts scored in one packed sequence and decoded from one prefill, the
    # rollouts in one autocast region under bf16)
    trainer = PolicyGRPOTrainer(model=model, reward_funcs=[reward_fn], args=config,
                                train_dataset=Dataset.from_list(rows), processing_class=tokenizer, callbacks=callbacks)
    if any(isinstance(cb, ProgressCallback) for cb in trainer.callback_handler.callbacks):
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(QuietProgressCallback)
    logger.info("GRPO on %s: %d steps of %d rollouts (%d per prompt) from %s", reward_fn.__name__, config.max_steps,
                config.per_device_train_batch_size * config.gradient_accumulation_steps, config.num_generations, policy)
    resume = complete_checkpoints(folder)
    if resume:
        logger.info("GRPO on %s resumes from %s", reward_fn.__name__, resume[-1])
    trainer.train(resume_from_checkpoint=str(resume[-1]) if resume else None)
    trainer.save_model(str(folder))
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(str(folder))
        write_json({"stage": "policy-grpo", "policy": policy, "reward": reward_fn.__name__,
                    "training": {k: v for k, v in config.to_dict().items() if not k.startswith("_")}},
                   folder / RUN_CONFIG_FILE)
        for checkpoint in folder.glob("checkpoint-*"):  # the policy is saved: its checkpoints are only disk now
            shutil.rmtree(checkpoint, ignore_errors=True)
    del trainer, model
    gc.collect()


def bt_pair_accuracy(bt: str, pairs_path: Path, cache: Path) -> dict[str, Any]:
    """The BT model's held-out pair accuracy: the chosen response's score strictly above the rejected one's (and each
    pair's outcome, `right`, in file order). The cache is reused unless it predates `right` or the BT model was
    saved after it (a BT model retrained in the same folder, e.g. with other `bt_facts`, is measured again)."""
    saved = Path(bt) / "patarm_config.json"
    newer = saved.is_file() and cache.is_file() and saved.stat().st_mtime > cache.stat().st_mtime
    if cache.is_file() and not newer and "right" in (cached := read_json(cache)):
        return cached
    from patarm.data import load_pairs
    from patarm.demo.downstream.rewards import ScalarReward
    from patarm.eval.stats import mean_ci

    pairs = load_pairs(str(pairs_path)).pairs
    scorer = ScalarReward(bt)
    chosen = scorer([p.prompt for p in pairs], [p.chosen for p in pairs])
    rejected = scorer([p.prompt for p in pairs], [p.rejected for p in pairs])
    right = [float(c > r) for c, r in zip(chosen, rejected)]
    result = {"accuracy": sum(right) / len(pairs), "accuracy_ci": list(mean_ci(right)), "pairs": len(pairs),
              "source": str(pairs_path), "right": right}
    write_json(result, cache)
    return result
