"""`patarm eval` as a library: judge every requested benchmark with one judge, score each as its official
code does, and write the run folder (per-benchmark samples and metrics, the judgment cache, report.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patarm.config import RunArguments, check_positive
from patarm.eval import registry
from patarm.eval.records import TIE_POLICIES, read_samples
from patarm.eval.voting import VOTING_RULES
from patarm.io import write_json
from patarm.models.settings import JudgeOptions, judge_field

logger = logging.getLogger("patarm.eval")


@dataclass
class EvalArguments(RunArguments):
    """Judge reward-model benchmarks and score them as the official code does."""

    benchmark: list[str] = field(
        default_factory=list, metadata={"help": f"one or more of {sorted(registry.BENCHMARKS)}"}
    )
    model: str = field(default="{run_dir}/export", metadata={"path": "input", "help":
                       "the judge: a folder, a hub id, an http(s)://host/v1#MODEL endpoint or vllm:PATH"})
    data: list[str] = field(default_factory=list, metadata={"path": "input", "help":
                            "local benchmark data: one path per benchmark in order, or NAME=PATH; a benchmark "
                            "without one is loaded from the Hugging Face hub"})
    output: str = field(default="{run_dir}/eval", metadata={"help": "output folder"})
    mode: str = field(
        default="pointwise", metadata={"help": "pointwise | pairwise", "choices": ["pointwise", "pairwise"]}
    )
    num_samples: int = field(default=1, metadata={"help": "judge samples per judgment (voting@n)"})
    voting: str = field(default="mean", metadata={"help": "mean | majority | adaptive", "choices": list(VOTING_RULES)})
    adaptive_confidence: float = field(default=1.0, metadata={"help":
                                       "adaptive voting stops when the chance that more draws change the outcome is "
                                       "at most 1 - this; 1.0 stops only when they cannot change it"})
    tie_policy: str | None = field(default=None, metadata={"help": "a tie is wrong (strict) or half right (half); "
                                   "default: each benchmark's official rule", "choices": list(TIE_POLICIES)})
    limit: int | None = field(default=None, metadata={"help": "judge at most N items per benchmark (strata kept)"})
    template: str | None = judge_field("template")
    rubric_mode: str | None = judge_field("rubric_mode")
    max_new_tokens: int | None = judge_field("max_new_tokens")
    max_prompt_tokens: int | None = judge_field("max_prompt_tokens")
    temperature: float | None = judge_field("temperature")
    top_p: float = field(default=1.0, metadata={"help": "nucleus sampling"})
    batch_size: int = field(default=32, metadata={"help": "prompts per generation batch"})
    seed: int = field(default=0, metadata={"help": "sample k of a prompt is drawn with seed + k"})
    progress: bool = field(default=True, metadata={"help": "show progress bars"})
    plots: bool = field(default=True, metadata={"help": "write PNG plots beside report.md"})
    bootstrap_resamples: int = field(default=1000, metadata={"help": "bootstrap resamples for the 95% intervals "
                                     "(clusters resampled within strata, seeded by --seed); 0 skips the intervals"})

    def __post_init__(self) -> None:
        check_positive(self, "num_samples", "limit", "batch_size", "top_p", "adaptive_confidence")
        if self.adaptive_confidence > 1 or self.top_p > 1:
            raise ValueError("--adaptive_confidence and --top_p are at most 1")
        if self.bootstrap_resamples < 0:
            raise ValueError(f"--bootstrap_resamples must be >= 0, got {self.bootstrap_resamples}")
        JudgeOptions.of(self)


def data_paths(benchmarks: list[str], data: list[str]) -> dict[str, str | None]:
    """Map each benchmark to its local data path (None: the hub) from NAME=PATH or positional values."""
    paths: dict[str, str | None] = {b: None for b in benchmarks}
    positional = [d for d in data if "=" not in d or d.split("=", 1)[0] not in registry.BENCHMARKS]
    if positional and len(positional) != len(data):
        raise ValueError("--data: give either one path per benchmark, in order, or NAME=PATH for each")
    if positional:
        if len(positional) != len(benchmarks):
            raise ValueError(f"--data has {len(positional)} paths for {len(benchmarks)} benchmarks; "
                             "give one per benchmark or use NAME=PATH")
        return dict(zip(benchmarks, positional))
    for d in data:
        name, path = d.split("=", 1)
        if name not in paths:
            raise ValueError(f"--data {d}: {name} is not among --benchmark {benchmarks}")
        paths[name] = path
    return paths


def rescore(benchmark: str, samples: str | Path, tie_policy: str | None = None) -> dict[str, Any]:
    """Metrics recomputed from a samples file: `patarm eval`'s records, or the benchmark's own output file
    (its field names and spellings, mapped by the module's `from_official`)."""
    bench = registry.get(benchmark)
    return bench.score(read_samples(samples, bench.validate, bench.from_official), tie_policy=tie_policy)


def run_eval(args: EvalArguments) -> dict[str, Any]:
    """Judge every requested benchmark; returns {benchmark: metrics.json content}."""
    from patarm.backends import GenerationOptions, make_backend
    from patarm.eval.harness import limit_items, run_benchmark
    from patarm.eval.judging import JudgingPlan
    from patarm.eval.report import write_report
    from patarm.judge import load_template
    from patarm.models.settings import resolve_judge_options

    if not args.benchmark:
        raise ValueError(f"give --benchmark: one or more of {sorted(registry.BENCHMARKS)}")
    for name in args.benchmark:
        registry.get(name)
    values, _ = resolve_judge_options(args.model, JudgeOptions.of(args), args.mode, args.num_samples)
    load_template(values["template"], rubric_mode=values["rubric_mode"])  # a wrong template fails before any work
    out = Path(args.output)
    paths = data_paths(args.benchmark, args.data)
    items = {b: limit_items(registry.get(b).load(paths[b]), args.limit) for b in args.benchmark}  # fail early
    gen = GenerationOptions(max_new_tokens=values["max_new_tokens"], temperature=values["temperature"],
                            top_p=args.top_p, batch_size=args.batch_size, enable_thinking=values["enable_thinking"],
                            max_prompt_tokens=values["max_prompt_tokens"])
    out.mkdir(parents=True, exist_ok=True)
    backend = make_backend(args.model, gen, cache=out / "cache.sqlite", progress=args.progress, name="eval")
    opts = JudgingPlan(mode=args.mode, num_samples=args.num_samples, voting=args.voting,
                        confidence=args.adaptive_confidence, template=values["template"],
                        rubric_mode=values["rubric_mode"], seed=args.seed)
    results = {}
    for name in args.benchmark:
        result = run_benchmark(name, items[name], backend, opts, out, tie_policy=args.tie_policy,
                               n_resamples=args.bootstrap_resamples)
        result["run"].update(model=args.model, data=paths[name], limit=args.limit,
                             temperature=values["temperature"], max_new_tokens=values["max_new_tokens"])
        write_json(result, out / name / "metrics.json")
        results[name] = result
    write_json(results, out / "metrics.json")
    write_report(out, plots=args.plots)
    return results

