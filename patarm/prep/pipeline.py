"""`patarm prep run --config configs/prep/X.yaml`: a whole data-construction pipeline from one YAML file.

    output_dir: runs/prep/cpu-tiny          # each step writes output_dir/<name>/
    cache_dir: null                         # teacher caches (default: output_dir/cache)
    teachers:                               # name -> teacher spec (see patarm.teachers.make_teacher)
      judge: {kind: openai, model: Qwen/Qwen2.5-72B-Instruct, base_url: "http://127.0.0.1:8000/v1"}
    steps:                                  # run in order; "@name" is an earlier step's directory
      - {name: raw, step: normalize, input: data/pairs.jsonl}
      - {name: pointwise, step: pointwise, input: "@raw", teacher: judge, min_margin: 2}

A step whose manifest already matches its config and input hashes is skipped, and teacher calls are
cached, so rerunning an interrupted pipeline continues where it stopped.
"""

from __future__ import annotations

import os
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Callable

from patarm.config import read_config
from patarm.prep.io import describe_input, read_manifest, step_is_done
from patarm.prep.steps import STEPS

# Teacher settings that change how fast calls go, not what they return: left out of the step hash.
_VOLATILE = frozenset({"concurrency", "timeout_s", "max_retries", "backoff_s", "max_backoff_s", "progress",
                       "api_key", "api_key_env", "base_url", "cache", "chunk_size"})
_TOP_KEYS = {"output_dir", "cache_dir", "teachers", "steps", "description"}


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


def plan(config: dict[str, Any], source: str = "<config>") -> list[dict[str, Any]]:
    """Validate a pipeline config and return its steps with references resolved and configs built."""
    unknown = set(config) - _TOP_KEYS
    if unknown:
        raise ValueError(f"{source}: unknown top-level keys {sorted(unknown)}; expected {sorted(_TOP_KEYS)}")
    out = Path(config.get("output_dir") or "runs/prep")
    teachers = config.get("teachers") or {}
    known: set[str] = set()
    planned = []
    for k, entry in enumerate(config.get("steps") or []):
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
        valid = {f.name for f in fields(cls)}
        if set(entry) - valid:
            raise ValueError(f"{where}: unknown keys {sorted(set(entry) - valid)}; valid: {sorted(valid)}")
        cfg = cls(**_resolve(entry, out, known, where))
        spec = teachers.get(teacher) if teacher else None
        record = {"step": step, **asdict(cfg),
                  "teacher": {k: v for k, v in spec.items() if k not in _VOLATILE} if spec else None}
        planned.append({"name": name, "step": step, "cfg": cfg, "out": out / name, "teacher": teacher,
                        "record": record})
        known.add(name)
    return planned


def run_pipeline(config_path: str | os.PathLike, *, output_dir: str | None = None, force: bool = False,
                 only: list[str] | None = None, make_teacher: Callable | None = None,
                 log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Run (or resume) every step of a pipeline config; returns the step manifests in order."""
    from patarm.teachers import make_teacher as default_make_teacher

    config = read_config(config_path)
    if output_dir:
        config["output_dir"] = output_dir
    steps = plan(config, str(config_path))
    cache_dir = config.get("cache_dir") or str(Path(config.get("output_dir") or "runs/prep") / "cache")
    built: dict[str, Any] = {}
    manifests = []
    for s in steps:
        if only and s["name"] not in only:
            continue
        inputs = [describe_input(p) for p in s["cfg"].input_paths()]
        if not force and step_is_done(s["out"], s["record"], inputs):
            log(f"[prep] {s['name']}: already done for this config and these inputs, skipped")
            manifests.append(read_manifest(s["out"]))
            continue
        teacher = None
        if s["teacher"]:
            if s["teacher"] not in built:  # built once, on first use: loading a model is slow
                build = make_teacher or default_make_teacher
                built[s["teacher"]] = build(config["teachers"][s["teacher"]], cache_dir, s["teacher"])
            teacher = built[s["teacher"]]
        log(f"[prep] {s['name']}: {s['step']} -> {s['out']}")
        _, runner, _ = STEPS[s["step"]]
        manifests.append(runner(s["cfg"], s["out"], teacher=teacher, record=s["record"]))
    return manifests
