"""YAML configs + command-line overrides into the stage dataclasses, through TRL's `TrlParser`.

Several `--config` files may be given: later files override earlier ones, so an ablation is a small
override file on top of a recipe (`--config configs/grpo/qwen3-8b.yaml --config configs/ablations/f-constant.yaml`).
Command-line flags override every file. Unknown keys are errors that name the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import yaml


def read_config(path: str | os.PathLike) -> dict[str, Any]:
    """One YAML config file as a mapping (a clear error otherwise)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a YAML mapping of dataclass fields, got {type(data).__name__}")
    return data


def split_config_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Pull every `--config FILE` out of argv; returns (config paths, remaining args)."""
    configs, rest, it = [], [], iter(argv)
    for arg in it:
        if arg == "--config":
            configs.append(next(it, None) or _missing())
        elif arg.startswith("--config="):
            configs.append(arg.split("=", 1)[1])
        else:
            rest.append(arg)
    return configs, rest


def _missing() -> str:
    raise ValueError("--config needs a file path")


def parse_config(dataclass_types: Sequence[type], argv: Sequence[str], prog: str | None = None) -> tuple[Any, ...]:
    """Instances of `dataclass_types` from the YAML files and flags in `argv`."""
    from trl import TrlParser

    paths, rest = split_config_args(argv)
    parser = TrlParser(list(dataclass_types), prog=prog)
    for path in paths:
        values = read_config(path)
        for key, value in (values.pop("env", None) or {}).items():
            os.environ[key] = str(value)
        unknown = parser.set_defaults_with_config(**values)
        if unknown:
            keys = sorted({u[2:] for u in unknown[::2]})
            raise ValueError(f"{path}: unknown config keys {keys}; valid keys are the fields of "
                             f"{', '.join(t.__name__ for t in dataclass_types)}")
    return tuple(parser.parse_args_into_dataclasses(args=rest))
