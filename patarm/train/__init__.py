"""The training stages — `sft`, `grpo` (with PAR) and `bt` (the scalar baseline) — each a `train(data, args,
model_args)` function beside its config dataclass, and `parse_args(stage, argv)`: the stage's arguments
from YAML configs and flags, exactly as `patarm <stage>` reads them (so a script or a notebook can build the
same run without the CLI)."""

from __future__ import annotations

from typing import Any

STAGES = ("sft", "grpo", "bt")
# Options most runs set, shown by --help beside the stage's own (the rest: --help-all).
COMMON = ("model_name_or_path", "dtype", "use_peft", "lora_r", "output_dir", "seed", "learning_rate",
          "lr_scheduler_type", "num_train_epochs", "max_steps", "per_device_train_batch_size",
          "gradient_accumulation_steps", "max_length", "num_generations", "max_completion_length", "temperature",
          "beta", "bf16", "use_cpu", "logging_steps", "save_strategy", "save_steps", "report_to",
          "resume_from_checkpoint", "use_vllm")


def stage_types(stage: str) -> tuple[type, ...]:
    """The dataclasses a training stage is configured with: (data arguments, TRL config, ModelConfig)."""
    from trl import ModelConfig

    if stage == "sft":
        from trl import SFTConfig

        from patarm.train.sft import SFTDataArguments
        return SFTDataArguments, SFTConfig, ModelConfig
    if stage == "grpo":
        from patarm.train.grpo import GRPODataArguments, PaTaRMGRPOConfig
        return GRPODataArguments, PaTaRMGRPOConfig, ModelConfig
    if stage == "bt":
        from trl import RewardConfig

        from patarm.train.bt import BTDataArguments
        return BTDataArguments, RewardConfig, ModelConfig
    from patarm.config import nearest

    raise ValueError(f"unknown training stage {stage!r}{nearest(stage, list(STAGES))}; stages: {', '.join(STAGES)}")


def stage_defaults(stage: str) -> dict[str, Any]:
    """Where a stage writes, and where GRPO starts, inside the run folder."""
    defaults: dict[str, Any] = {"output_dir": "{run_dir}/" + stage}
    if stage == "grpo":
        defaults["model_name_or_path"] = "{run_dir}/sft"
    import torch

    if not torch.cuda.is_available():  # TRL's defaults (bf16 on) refuse a machine without a GPU: make it work,
        from patarm.train.common import cpu_bf16  # with bf16 autocast where the CPU runs it natively (faster)

        defaults.update(bf16=cpu_bf16()[0], use_cpu=True)
    return defaults


def parse_args(stage: str, argv: list[str]) -> tuple[Any, ...]:
    """The stage's (data, training, model) arguments from configs and flags."""
    from patarm.config import parse_stage

    types = stage_types(stage)
    return parse_stage(types, argv, prog=f"patarm {stage}", description=_description(stage), primary=types[:1],
                       common=COMMON, defaults=stage_defaults(stage))


def run_stage(stage: str, parsed: tuple[Any, ...]) -> str:
    """Train and save one stage from its parsed (data, training, model) arguments, as `patarm <stage>` does;
    returns the output folder. The trainer is dropped and collected, so a recipe's next stage starts with its
    memory free."""
    import gc
    import importlib

    data, args, model_args = parsed
    if not model_args.model_name_or_path:
        raise ValueError(f"patarm {stage}: set model_name_or_path (a folder, a hub id, or `tiny`)")
    importlib.import_module(f"patarm.train.{stage}").train(data, args, model_args)
    gc.collect()
    return args.output_dir


def _description(stage: str) -> str:
    import importlib

    doc = importlib.import_module(f"patarm.train.{stage}").__doc__ or ""
    return doc.strip()
