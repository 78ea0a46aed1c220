"""`patarm sft | grpo | bt --config recipe.yaml [--key value ...]`: the training stages.

Each stage's own options come first in `--help`; TRL's full option set (every field of SFTConfig,
GRPOConfig, RewardConfig and ModelConfig) is also accepted and listed by `--help-all`. By default a
stage writes `{run_dir}/<stage>` and GRPO starts from `{run_dir}/sft`.
"""

from __future__ import annotations


def main(command: str, argv: list[str]) -> None:
    from patarm.train import parse_args, run_stage

    print(run_stage(command, parse_args(command, argv)))
