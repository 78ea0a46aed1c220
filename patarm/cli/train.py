"""`patarm sft | grpo | bt --config recipe.yaml [--key value ...]`: the training stages.

Each stage's own options come first in `--help`; TRL's full option set (every field of SFTConfig,
GRPOConfig, RewardConfig and ModelConfig) is also accepted and listed by `--help-all`. By default a
stage writes `{run_dir}/<stage>` and GRPO starts from `{run_dir}/sft`.
"""

from __future__ import annotations


def main(command: str, argv: list[str]) -> None:
    import importlib

    from patarm.train import parse_args

    data, args, model_args = parse_args(command, argv)
    if not model_args.model_name_or_path:
        raise ValueError(f"patarm {command}: set model_name_or_path (a folder, a hub id, or `tiny`)")
    importlib.import_module(f"patarm.train.{command}").train(data, args, model_args)
    print(args.output_dir)
