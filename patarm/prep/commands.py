"""Command-line sub-commands of `patarm prep`, generated from the step config dataclasses.

Every config field becomes a flag (`min_margin` -> `--min-margin`) with the field's help text; list
fields take several values, dict fields a JSON object. Teacher steps add `--teacher` (a kind such as
`rule`, a JSON object, or a YAML file with a teacher spec) and `--cache-dir`.
"""

from __future__ import annotations

import argparse
import json
import os
import types
import typing
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Callable

from patarm.prep.steps import STEPS


def _json_or_text(value: str) -> Any:
    """A JSON object/list when the value looks like one, else the text (e.g. a mix source path)."""
    return json.loads(value) if value.lstrip().startswith(("{", "[")) else value


def _base_type(hint: Any) -> Any:
    """int for `int | None`, dict for `dict[str, str] | None`, list for `list`."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = [a for a in typing.get_args(hint) if a is not type(None)][0]
    return typing.get_origin(hint) or hint


def _flag_kwargs(f, hint: Any) -> dict[str, Any]:
    """argparse keyword arguments for one dataclass field."""
    kwargs: dict[str, Any] = {"help": f.metadata.get("help", ""), "dest": f.name}
    if "choices" in f.metadata:
        kwargs["choices"] = f.metadata["choices"]
    base = _base_type(hint)
    if base is bool:
        kwargs["action"] = argparse.BooleanOptionalAction
    elif base is list:
        kwargs.update(nargs="*", type=_json_or_text)
    elif base is dict:
        kwargs["type"] = json.loads
    elif base in (int, float, str):
        kwargs["type"] = base
    if f.default is not MISSING:
        kwargs["default"] = f.default
    elif f.default_factory is not MISSING:  # type: ignore[misc]
        kwargs["default"] = f.default_factory()  # type: ignore[misc]
    else:
        kwargs["required"] = True
    return kwargs


def _add_step_args(step: str) -> Callable[[argparse.ArgumentParser], None]:
    cls, _, takes_teacher = STEPS[step]

    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--output", required=True, help="output directory (dataset + manifest.json)")
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            kwargs = _flag_kwargs(f, hints[f.name])
            if f.name == "input":
                kwargs["required"] = True
            parser.add_argument(f"--{f.name.replace('_', '-')}", **kwargs)
        if takes_teacher:
            parser.add_argument("--teacher", default=None, help="teacher: a kind (rule), a JSON spec such as "
                                '\'{"kind": "openai", "model": "M", "base_url": "http://h:8000/v1"}\', or a YAML file')
            parser.add_argument("--cache-dir", default=None, help="teacher cache directory (default: OUTPUT/cache)")
    return add


def teacher_spec(value: str) -> dict[str, Any]:
    """A teacher spec from a kind name, a JSON object or a YAML file."""
    if value.lstrip().startswith("{"):
        return json.loads(value)
    if os.path.isfile(value):
        from patarm.config import read_config

        return read_config(value)
    return {"kind": value}


def _run_step(step: str) -> Callable[[argparse.Namespace], dict]:
    cls, runner, takes_teacher = STEPS[step]

    def run(args: argparse.Namespace) -> dict:
        cfg = cls(**{f.name: getattr(args, f.name) for f in fields(cls)})
        teacher = None
        if takes_teacher and args.teacher:
            from patarm.teachers import make_teacher

            teacher = make_teacher(teacher_spec(args.teacher), args.cache_dir or str(Path(args.output) / "cache"))
        return runner(cfg, args.output, teacher=teacher)
    return run


def _run_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="pipeline YAML, e.g. configs/prep/cpu-tiny.yaml")
    parser.add_argument("--output-dir", default=None, help="override the config's output_dir")
    parser.add_argument("--force", action="store_true", help="rerun steps even when they are complete")
    parser.add_argument("--only", nargs="*", default=None, help="run only these step names")


def _run_pipeline(args: argparse.Namespace) -> list[dict]:
    from patarm.prep.pipeline import run_pipeline

    return run_pipeline(args.config, output_dir=args.output_dir, force=args.force, only=args.only)


COMMANDS: dict[str, tuple[Callable, Callable]] = {
    **{step: (_add_step_args(step), _run_step(step)) for step in STEPS},
    "run": (_run_args, _run_pipeline),
}
