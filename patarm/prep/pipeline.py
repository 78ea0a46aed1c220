"""`patarm prep run --config configs/prep/X.yaml`: a whole data-construction pipeline from one YAML file.

    run_dir: runs/cpu-tiny                  # each step writes {run_dir}/prep/<name>/
    teachers:                               # name -> backend spec (see patarm.backends.make_backend)
      judge: {kind: openai, model: Qwen/Qwen2.5-72B-Instruct, base_url: "http://127.0.0.1:8000/v1"}
    steps:                                  # run in order; "@name" is an earlier step's directory
      - {name: raw, step: normalize, input: data/pairs.jsonl}     # relative to this file
      - {name: pointwise, step: pointwise, input: "@raw", teacher: judge, min_margin: 2}

The steps named `pointwise`, `pairwise` and `rl` are what `patarm sft` and `patarm grpo` read by default
(`{run_dir}/prep/pointwise/sft.jsonl`, `{run_dir}/prep/rl/pairs.jsonl`, ...). A step whose manifest
already matches its config and input hashes is skipped, and teacher calls are cached
(`{run_dir}/prep/cache/`), so rerunning an interrupted pipeline continues where it stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from patarm.config import RunArguments, unknown_keys_error
from patarm.io import output_apart
from patarm.prep.io import describe_input, read_manifest, step_is_done
from patarm.prep.steps import STEPS

logger = logging.getLogger("patarm.prep")


@dataclass
class PipelineArguments(RunArguments):
    """A data-construction pipeline: named teachers and the steps to run in order."""

    teachers: dict[str, Any] = field(default_factory=dict, metadata={"help":
                                     "name -> backend spec, e.g. {kind: openai, model: M, base_url: URL}"})
    steps: list[dict] = field(default_factory=list, metadata={"path": "input", "help":
                              "the steps, in order: {name, step, ...that step's options}; '@name' refers to an "
                              "earlier step's output"})
    cache_dir: str = field(default="{run_dir}/prep/cache", metadata={"help": "teacher caches"})
    description: str = field(default="", metadata={"help": "what this pipeline is for"})
    force: bool = field(default=False, metadata={"help": "rerun steps even when they are complete"})
    only: list[str] | None = field(default=None, metadata={"help": "run only these step names"})

    @property
    def output_dir(self) -> Path:
        return Path(self.run_dir) / "prep"

# Teacher settings that change how fast calls go, not what they return: left out of the step hash.
_VOLATILE = frozenset({"concurrency", "timeout_s", "max_retries", "backoff_s", "max_backoff_s", "progress",
                       "api_key", "api_key_env", "base_url", "cache", "chunk_size"})


def _resolve(value: Any, out: Path, known: set[str], where: str) -> Any:
    """Replace "@name" strings (recursively) by the directory of the earlier step `name`."""
    if isinstance(value, str) and value.startswith("@"):
        if value[1:] not in known:
            raise ValueError(f"{where}: {value!r} does not name an earlier step (known: {sorted(known)})")
        return str(out / value[1:])
    if isinstance(value, list):
        return [_resolve(v, out, known, where) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, out, known, where) for k, v in value.items()}
    return value


def plan(config: PipelineArguments, source: str = "patarm prep run") -> list[dict[str, Any]]:
    """Validate a pipeline and return its steps with references resolved and configs built."""
    out, teachers = config.output_dir, config.teachers or {}
    if not config.steps:
        raise ValueError(f"{source}: the pipeline has no steps; a pipeline config lists `steps:` "
                         "(see configs/prep/cpu-tiny.yaml)")
    known: set[str] = set()
    planned = []
    for k, entry in enumerate(config.steps):
        if not isinstance(entry, dict):
            raise ValueError(f"{source}: steps[{k}] must be a mapping {{name, step, ...}}, got {entry!r}")
        entry = dict(entry)
        name, step, teacher = entry.pop("name", None), entry.pop("step", None), entry.pop("teacher", None)
        where = f"{source}: steps[{k}] ({name or step})"
        if not name or step not in STEPS:
            raise ValueError(f"{where}: every step needs a `name` and a `step` in {sorted(STEPS)}")
        if name in known:
            raise ValueError(f"{where}: the step name {name!r} is used twice")
        cls, _, takes_teacher = STEPS[step]
        if teacher is not None and (not takes_teacher or teacher not in teachers):
            raise ValueError(f"{where}: teacher {teacher!r} is not defined under `teachers` or the step takes none")
        valid = [f.name for f in fields(cls)]
        if set(entry) - set(valid):
            raise unknown_keys_error(where, sorted(set(entry) - set(valid)), valid)
        cfg = cls(**_resolve(entry, out, known, where))
        spec = teachers.get(teacher) if teacher else None
        record = {"step": step, **asdict(cfg),
                  "teacher": {k: v for k, v in spec.items() if k not in _VOLATILE} if spec else None}
        planned.append({"name": name, "step": step, "cfg": cfg, "out": out / name, "teacher": teacher,
                        "record": record})
        known.add(name)
    return planned


def run_pipeline(config: PipelineArguments, *, make_backend: Callable | None = None) -> list[dict[str, Any]]:
    """Run (or resume) every step of a pipeline; returns the step manifests in order."""
    from patarm.backends import make_backend as default_make_backend

    steps = plan(config)
    for s in steps:  # before any step writes: no step may write over an input of its own
        output_apart(s["out"], s["cfg"].input_paths(), flag=f"step {s['name']!r}: its folder")
    built: dict[str, Any] = {}
    manifests = []
    for s in steps:
        if config.only and s["name"] not in config.only:
            continue
        inputs = [describe_input(p) for p in s["cfg"].input_paths()]
        if not config.force and step_is_done(s["out"], s["record"], inputs):
            logger.info("%s: already done for this config and these inputs, skipped", s["name"])
            manifests.append(read_manifest(s["out"]))
            continue
        teacher = None
        if s["teacher"]:
            if s["teacher"] not in built:  # built once, on first use: loading a model is slow
                build = make_backend or default_make_backend
                name = s["teacher"]
                built[name] = build(config.teachers[name], cache=Path(config.cache_dir) / f"{name}.sqlite", name=name)
            teacher = built[s["teacher"]]
        logger.info("%s: %s -> %s", s["name"], s["step"], s["out"])
        _, runner, _ = STEPS[s["step"]]
        manifests.append(runner(s["cfg"], s["out"], teacher=teacher, record=s["record"]))
    return manifests
