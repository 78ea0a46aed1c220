"""`patarm prep <step> ...`: the data-construction steps (PaTaRM Appendix C).

    patarm prep run --config configs/prep/cpu-tiny.yaml [--run_dir DIR] [--force] [--only NAME ...]
    patarm prep <step> --input DIR_OR_FILE --output DIR [--teacher SPEC] [--key value ...]

`run` runs a whole pipeline into `{run_dir}/prep/<step name>/`; steps already complete for the same config
and inputs are skipped and teacher calls are cached, so an interrupted run resumes where it stopped.
A single step reads pairs (a file, a hub id, or a previous step's folder) and writes its dataset(s) and
a `manifest.json` into `--output`. Every step's options are the fields of its config dataclass
(`patarm.prep.steps`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

STEPS_HELP = {
    "normalize": "load, validate and normalise one source into DIR/pairs.jsonl",
    "mix": "merge several sources with per-source caps and source filters",
    "dedup": "remove exact and near-duplicate pairs",
    "noise": "flip the label of a seeded fraction of pairs (robustness ablation)",
    "classify": "label each pair's domain (teacher LLM with a heuristic fallback)",
    "pointwise": "pointwise SFT corpus: teacher scores, keep pairs with a margin > min_margin",
    "pairwise": "pairwise SFT corpus: teacher A/B decisions that agree with the label",
    "rl": "RL set: n judge rollouts per pair, keep correct rates in [low, high]",
    "run": "run a whole pipeline from a YAML config",
}


@dataclass
class StepOutput:
    """Where a single step writes, and its teacher."""

    output: str = field(default="", metadata={"help": "output folder (dataset + manifest.json)"})
    teacher: str | None = field(default=None, metadata={"help": "teacher: a kind (rule), a model spec, a JSON "
                                "spec such as '{\"kind\": \"openai\", \"model\": \"M\", \"base_url\": \"URL\"}', "
                                "or a YAML file with one"})
    cache_dir: str | None = field(default=None, metadata={"help": "teacher cache folder (default: OUTPUT/cache)"})


def teacher_spec(value: str) -> dict[str, Any] | str:
    """A teacher spec from a JSON object, a YAML file, a kind name (`rule`) or a model spec string."""
    if value.lstrip().startswith("{"):
        return json.loads(value)
    if os.path.isfile(value) and value.endswith((".yaml", ".yml")):
        from patarm.config import read_config

        return read_config(value)
    from patarm.backends import KINDS

    return {"kind": value} if value in KINDS and value != "hf" else value


def summary(manifest: dict[str, Any]) -> str:
    dropped = ", ".join(f"{k}={v}" for k, v in sorted(manifest.get("dropped", {}).items())) or "none"
    return f"{manifest.get('step')}: rows_in={manifest['rows_in']} rows_out={manifest['rows_out']} dropped: {dropped}"


def _run_step(step: str, argv: list[str]) -> list[dict]:
    from patarm.config import parse_stage
    from patarm.prep.steps import STEPS

    cls, runner, takes_teacher = STEPS[step]
    cfg, out = parse_stage((cls, StepOutput), argv, prog=f"patarm prep {step}", description=STEPS_HELP[step],
                           primary=(cls, StepOutput))
    if not out.output:
        raise ValueError(f"patarm prep {step}: give --output DIR")
    if "input" in {f.name for f in fields(cls)} and not cfg.input:
        raise ValueError(f"patarm prep {step}: give --input (a pairs file, a hub id, or a previous step's folder)")
    from patarm.io import output_apart

    output_apart(out.output, cfg.input_paths() if hasattr(cfg, "input_paths") else [])
    teacher = None
    if out.teacher:
        if not takes_teacher:
            raise ValueError(f"patarm prep {step}: this step takes no teacher")
        from patarm.backends import make_backend

        cache = Path(out.cache_dir or Path(out.output) / "cache") / "teacher.sqlite"
        teacher = make_backend(teacher_spec(out.teacher), cache=cache, name="teacher")
    return [runner(cfg, out.output, teacher=teacher)]


def main(command: str, argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in STEPS_HELP:
        from patarm.config import nearest

        lines = [__doc__.strip(), "", "steps:"] + [f"  {name:<10} {text}" for name, text in STEPS_HELP.items()]
        if argv and argv[0] not in ("-h", "--help"):
            raise ValueError(f"unknown prep step {argv[0]!r}{nearest(argv[0], list(STEPS_HELP))}; "
                             f"steps: {', '.join(STEPS_HELP)}")
        print("\n".join(lines))
        return
    step, rest = argv[0], argv[1:]
    if step == "run":
        from patarm.config import parse_stage
        from patarm.prep.pipeline import PipelineArguments, run_pipeline

        (config,) = parse_stage((PipelineArguments,), rest, prog="patarm prep run", description=STEPS_HELP["run"])
        manifests = run_pipeline(config)
    else:
        manifests = _run_step(step, rest)
    for manifest in manifests:
        print(summary(manifest))
