"""Stage configuration: YAML files and command-line flags into a stage's dataclasses — the one way
every `patarm <stage>` is configured:

    patarm <stage> --config recipe.yaml --config ablation.yaml --key value ...

* Keys are the fields of the stage's dataclasses (TRL's own options pass through for training stages).
  Several `--config` files merge, later ones override earlier ones; flags override every file. An
  unknown key in a file, or an unknown flag, is an error that names it and the nearest valid one.
* `run_dir` is the run folder (relative to where you run the command). Every stage writes into it and
  finds the previous stage's output there by name (`{run_dir}/prep/rl/pairs.jsonl`, `{run_dir}/sft`,
  ...): `{run_dir}` in any value expands to it, so a recipe's stages hand off without path edits.
* Relative input paths inside a config file (data files, templates, DeepSpeed configs) are read
  relative to that file's folder, so shipped configs run from any directory. Paths given as flags are
  relative to the working directory, as usual.
* `env:` in a file sets environment variables (e.g. `TOKENIZERS_PARALLELISM`) before the stage runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import re
import sys
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

RUN_DIR = "run_dir"
DEFAULT_RUN_DIR = "runs/default"
# Fields of other packages' dataclasses (TRL, transformers) that name input files or models.
INPUT_PATH_FIELDS = {"model_name_or_path", "deepspeed", "resume_from_checkpoint", "chat_template_path"}


class ConfigError(ValueError):
    """A config file or flag the stage cannot use; the message says which and what would be valid."""


def read_config(path: str | os.PathLike) -> dict[str, Any]:
    """One YAML config file as a mapping (a clear error otherwise)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config {path} is a directory; give a YAML file")
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"config file {path} is not valid YAML: {problem}{where}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a YAML mapping of keys to values, got {type(data).__name__}")
    return data


def nearest(name: str, valid: Sequence[str]) -> str:
    """' (did you mean X?)' for the closest valid name, or ''."""
    match = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def import_object(spec: str, what: str, hint: str = "") -> Any:
    """The object a dotted path names: 'package.module:name' or 'package.module.name' (the one rule for margin
    functions, prompt builders and backend kinds). `what` names the setting in the error, `hint` ends it."""
    import importlib

    module_name, _, attr = spec.partition(":") if ":" in spec else spec.rpartition(".")
    try:
        if not module_name or not attr:
            raise ValueError("it has no module part")
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(f"{what} {spec!r} is not an importable 'package.module:name' ({err}){hint}") from None


def unknown_keys_error(source: str, unknown: Sequence[str], valid: Sequence[str]) -> ConfigError:
    parts = [f"{k!r}{nearest(k, valid)}" for k in sorted(unknown)]
    return ConfigError(f"{source}: unknown key{'s' if len(parts) > 1 else ''} {', '.join(parts)}. "
                       "Run the command with --help for the valid keys.")


def expand_run_dir(value: Any, run_dir: str) -> Any:
    """`{run_dir}` replaced in a string (or in each string of a list / mapping)."""
    if isinstance(value, str):
        return value.replace("{" + RUN_DIR + "}", run_dir)
    if isinstance(value, list):
        return [expand_run_dir(v, run_dir) for v in value]
    if isinstance(value, dict):
        return {k: expand_run_dir(v, run_dir) for k, v in value.items()}
    return value


def resolve_input(value: Any, base: Path) -> Any:
    """A relative input path from a config file, made relative to the file's folder `base` (inside lists
    and mappings too).

    Values with `{run_dir}`, absolute paths, URLs and `scheme:` specs are left alone; a bare name that
    does not exist next to the config (a hub id such as `Qwen/Qwen3-8B`, a model spec such as `tiny`, a
    template name such as `pointwise`) is left alone too."""
    if isinstance(value, list):
        return [resolve_input(v, base) for v in value]
    if isinstance(value, dict):
        return {k: resolve_input(v, base) for k, v in value.items()}
    if not isinstance(value, str) or not value or "{" in value or os.path.isabs(value) or ":" in value:
        return value
    candidate = base / value
    explicit = value.startswith(("./", "../")) or value.endswith((".yaml", ".yml", ".json", ".jsonl", ".parquet",
                                                                  ".gz", ".gguf"))
    return os.path.normpath(candidate) if explicit or candidate.exists() else value


def is_input_path(f: dataclasses.Field) -> bool:
    return f.metadata.get("path") == "input" or f.name in INPUT_PATH_FIELDS


class StageParser(argparse.ArgumentParser):
    """argparse over dataclass fields (via transformers' HfArgumentParser rules) with YAML configs.

    `primary` dataclasses are listed by `--help`; the others (TRL's full option set) only by `--help-all`,
    except the few in `common`.
    """

    def __init__(self, dataclass_types: Sequence[type], *, prog: str, description: str = "",
                 primary: Sequence[type] = (), common: Sequence[str] = (), show_all: bool = False):
        super().__init__(prog=prog, description=description, add_help=False, allow_abbrev=False,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
        from transformers import HfArgumentParser

        self.dataclass_types = list(dataclass_types)
        self.add_argument("-h", "--help", action="store_true", help="show the stage's own options and exit")
        if any(t not in primary for t in self.dataclass_types) and primary:
            self.add_argument("--help-all", action="store_true", help="also show every option of the libraries "
                              "below (TRL / transformers) and exit")
        self.add_argument("--config", action="append", default=[], metavar="YAML",
                          help="a YAML file of `key: value` (repeatable; later files override earlier ones)")
        self.fields: dict[str, tuple[type, dataclasses.Field]] = {}
        hidden = 0
        for dtype in self.dataclass_types:
            is_primary = dtype in primary or not primary
            doc = dtype.__doc__ or ""  # a dataclass without a docstring gets its signature as one: not a title
            doc = "" if doc.startswith(f"{dtype.__name__}(") else doc
            title = (doc or f"{dtype.__name__} options").strip().splitlines()[0].rstrip(".") if is_primary else \
                f"common {dtype.__name__} options"
            group = self.add_argument_group(title)
            hints = typing.get_type_hints(dtype)
            for f in dataclasses.fields(dtype):
                if not f.init or f.name.startswith("_") or f.name in self.fields:
                    continue
                self.fields[f.name] = (dtype, f)
                f = _plain_field(f, hints[f.name])
                if not (is_primary or show_all or f.name in common):
                    f.metadata = {**f.metadata, "help": argparse.SUPPRESS}
                    hidden += 1
                HfArgumentParser._parse_dataclass_field(group, f)
                action = group._group_actions[-1]
                if action.nargs == "+" and f.default_factory is list:  # `--key` alone: an empty list
                    action.nargs = "*"
        self.epilog = "Every option is also a config key (without the dashes). --debug shows tracebacks on errors."
        if hidden:
            self.epilog += f" {hidden} more options of the libraries below are not shown: --help-all lists them."

    # -------------------------------------------------------------------------------------- parsing

    def parse(self, argv: Sequence[str]) -> tuple[Any, ...]:
        """The dataclass instances for `argv` (configs applied, `{run_dir}` expanded)."""
        required = [a for a in self._actions if a.required]
        for action in required:  # a config file may give them: checked once the files are read
            action.required = False
        ns, rest = self.parse_known_args(list(argv))
        if ns.help or getattr(ns, "help_all", False):
            self.print_help()
            raise SystemExit(0)
        if rest:
            bad = rest[0]
            flag = bad.split("=", 1)[0]
            options = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
            raise ConfigError(
                f"unknown option {bad!r}{nearest(flag, options)}. Run `{self.prog} --help` for the options."
            )
        given: set[str] = set()
        for path in ns.config:
            given |= self._apply_config(path)
        for action in required:
            action.required = action.dest not in given
        ns = self.parse_args(list(argv))  # again, so the config defaults sit under the flags
        values = vars(ns)
        run_dir = values.get(RUN_DIR) or DEFAULT_RUN_DIR
        out = []
        for dtype in self.dataclass_types:
            names = {f.name for f in dataclasses.fields(dtype) if f.init}
            kwargs = {k: expand_run_dir(v, run_dir) for k, v in values.items() if k in names}
            try:
                out.append(dtype(**kwargs))
            except (ValueError, TypeError) as err:
                raise ConfigError(str(err)) from None
        return tuple(out)

    def _apply_config(self, path: str) -> set[str]:
        """Set the keys of one config file as defaults; returns the keys it set."""
        values = read_config(path)
        base = Path(path).resolve().parent
        for key, value in (values.pop("env", None) or {}).items():
            os.environ[key] = str(value)
        unknown = [k for k in values if k not in self.fields]
        if unknown:
            raise unknown_keys_error(str(path), unknown, list(self.fields))
        defaults = {}
        for key, value in values.items():
            _, f = self.fields[key]
            if is_input_path(f):
                value = resolve_input(value, base)
            defaults[key] = value
        self.set_defaults(**defaults)
        return set(defaults)

    def error(self, message: str) -> typing.NoReturn:  # argparse's own errors (bad value, missing flag)
        raise ConfigError(f"{message}. Run `{self.prog} --help` for the options.")


def _plain_field(f: dataclasses.Field, hint: Any) -> dataclasses.Field:
    """A copy of `f` that HfArgumentParser understands: resolved type, our own metadata keys removed,
    dict fields parsed from JSON text."""
    metadata = {k: v for k, v in f.metadata.items() if k != "path"}
    if isinstance(metadata.get("help"), str):  # argparse %-formats help: a literal "21 % of" would break --help
        metadata["help"] = re.sub(r"(?<!%)%(?![(%])", "%%", metadata["help"])
    new = dataclasses.field(default=f.default, default_factory=f.default_factory, metadata=metadata)
    new.name, new.type = f.name, hint
    inner = _strip_optional(hint)
    if inner is dict or typing.get_origin(inner) is dict:
        new.type = _json_object  # HfArgumentParser passes a non-class type through as argparse's `type`
    elif inner is list or typing.get_origin(inner) is list:
        elem = _strip_optional((typing.get_args(inner) or (typing.Any,))[0])
        if elem in (dict, typing.Any) or typing.get_origin(elem) is dict:
            new.type = list[_json_or_text]  # mappings or paths: each flag value is JSON or plain text
    return new


def _strip_optional(hint: Any) -> Any:
    """X for `X | None`."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return hint


def _json_or_text(text: str) -> Any:
    return _json_object(text) if text.lstrip().startswith(("{", "[")) else text


def _json_object(text: str) -> Any:
    """A mapping flag: JSON (`'{"prompt": "input"}'`) or key=value pairs (`prompt=input,chosen=accepted`)."""
    if not text.lstrip().startswith(("{", "[")) and "=" in text:
        pairs = [part.split("=", 1) for part in text.split(",") if part.strip()]
        if all(len(p) == 2 and p[0].strip() for p in pairs):
            return {k.strip(): v.strip() for k, v in pairs}
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"expected key=value pairs (a=b,c=d) or a JSON object such as "
                                         f"'{{\"key\": \"value\"}}', got {text!r} ({err.msg})") from None


def check_positive(args: Any, *names: str) -> None:
    """Reject counts and sizes a stage cannot honour: each named field (when set) must be > 0."""
    for name in names:
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise ValueError(f"--{name} must be > 0, got {value}")


@dataclasses.dataclass
class RunArguments:
    """Where the run lives."""

    run_dir: str = dataclasses.field(default=DEFAULT_RUN_DIR, metadata={
        "help": "the run folder: stages write here and read the previous stage's output from here; "
                "`{run_dir}` in any value expands to it"})


def parse_stage(dataclass_types: Sequence[type], argv: Sequence[str] | None, *, prog: str, description: str = "",
                primary: Sequence[type] = (), common: Sequence[str] = (),
                defaults: dict[str, Any] | None = None) -> tuple[Any, ...]:
    """Parse `argv` for a stage whose options are the fields of `dataclass_types`; `defaults` replace
    field defaults (e.g. `output_dir: "{run_dir}/sft"`) below every config file and flag."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = StageParser(dataclass_types, prog=prog, description=description, primary=primary, common=common,
                         show_all="--help-all" in argv)
    if defaults:
        parser.set_defaults(**defaults)
    return parser.parse(argv)
