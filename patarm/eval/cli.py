"""`patarm eval ...`: judge benchmarks, re-score saved samples, compare runs.

    patarm eval --benchmark rmbench judgebench --model PATH --output DIR [--data PATH ...] [options]
    patarm eval rescore --benchmark NAME --samples FILE [--tie-policy strict|half]
    patarm eval compare DIR1 DIR2 ... [--output FILE.md]
    patarm eval report DIR

A run writes DIR/<benchmark>/{samples.jsonl, metrics.json, plots}, DIR/metrics.json, DIR/report.md
and DIR/judgments.jsonl (the judgment cache: re-running the same command judges only what is missing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from patarm.eval import registry
from patarm.eval.records import TIE_POLICIES, RecordError, read_samples
from patarm.eval.voting import VOTING_RULES


def rescore(benchmark: str, samples: str | Path, tie_policy: str | None = None) -> dict[str, Any]:
    """Metrics recomputed from a samples file (records in the benchmark's official field names)."""
    bench = registry.get(benchmark)
    return bench.score(read_samples(samples, bench.validate), tie_policy=tie_policy)


def _tie_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tie-policy", choices=TIE_POLICIES, default=None,
                        help="a tie is wrong (strict) or half right (half); default: each benchmark's official "
                             "rule (scores strict; RewardBench generative decisions half)")


def build_run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="patarm eval", description="Judge reward-model benchmarks with a PaTaRM judge "
                                "and score them as the official code does.", epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="YAML file whose keys are these options (underscored); flags override it")
    p.add_argument("--benchmark", nargs="+", choices=sorted(registry.BENCHMARKS), help="one or more benchmarks")
    p.add_argument("--model", help="a local judge model folder (transformers) or a hub id")
    p.add_argument("--data", nargs="+", default=[], help="local benchmark data: one path per benchmark in "
                   "order, or NAME=PATH; a benchmark without one is loaded from the Hugging Face hub")
    p.add_argument("--output", help="output folder")
    p.add_argument("--mode", choices=("pointwise", "pairwise"), default="pointwise")
    p.add_argument("--num-samples", type=int, default=1, help="judge samples per judgment (voting@n)")
    p.add_argument("--voting", choices=VOTING_RULES, default="mean")
    p.add_argument("--adaptive-confidence", type=float, default=1.0,
                   help="adaptive voting stops when the chance that more draws change the outcome is at most "
                        "1 - this; 1.0 stops only when they cannot change it")
    _tie_arg(p)
    p.add_argument("--limit", type=int, default=None, help="judge at most N items per benchmark (all strata kept)")
    p.add_argument("--template", default=None, help="judge prompt template name or YAML path")
    p.add_argument("--rubric-mode", choices=("primary", "generated", "adaptive"), default=None)
    p.add_argument("--max-new-tokens", type=int, default=1024)
    p.add_argument("--temperature", type=float, default=None, help="default 0 (greedy) for n=1, else 0.7")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    p.add_argument("--no-plots", action="store_true", help="write the markdown report but no PNG plots")
    return p


def _parse_run_args(argv: list[str]) -> argparse.Namespace:
    parser = build_run_parser()
    args = parser.parse_args(argv)
    if args.config:
        from patarm.config import read_config

        values = read_config(args.config)
        known = {a.dest for a in parser._actions}
        unknown = sorted(set(values) - known)
        if unknown:
            parser.error(f"{args.config}: unknown keys {unknown}; valid keys: {sorted(known - {'help', 'config'})}")
        parser.set_defaults(**values)
        args = parser.parse_args(argv)
    for name in ("benchmark", "model", "output"):
        if not getattr(args, name):
            parser.error(f"--{name} is required")
    return args


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


def load_backend(model: str, options: Any) -> Any:
    """A transformers backend for a local folder or hub id; `vllm:PATH_OR_ID` for vLLM on local GPUs; or an
    OpenAI-compatible endpoint given as `http(s)://host:port/v1#MODEL_NAME` (concurrent requests, retries,
    on-disk cache; key in OPENAI_API_KEY)."""
    from patarm.judge.backends import HFBackend

    if model.startswith("vllm:"):
        from patarm.teachers import VLLMTeacher

        return VLLMTeacher(model[len("vllm:"):], temperature=options.temperature, top_p=options.top_p,
                           max_tokens=options.max_new_tokens, cache=os.path.join(".cache", "eval-vllm.sqlite"))

    if model.startswith(("http://", "https://")):
        from patarm.teachers import OpenAITeacher

        url, _, name = model.partition("#")
        if not name:
            raise ValueError(f"--model {model}: name the served model after '#', e.g. http://127.0.0.1:8000/v1#Qwen/Qwen3-8B")
        return OpenAITeacher(name, url, temperature=options.temperature, top_p=options.top_p,
                             max_tokens=options.max_new_tokens, cache=os.path.join(".cache", "eval-endpoint.sqlite"))
    try:
        return HFBackend.from_pretrained(model, options)
    except OSError as err:
        raise RuntimeError(f"could not load the judge model {model!r} ({err}); offline? give a local folder") from err


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Judge every requested benchmark; returns {benchmark: metrics.json content}."""
    from patarm.eval.cache import JudgmentCache
    from patarm.eval.draw import Drawer
    from patarm.eval.harness import limit_items, run_benchmark
    from patarm.eval.judging import JudgeOptions
    from patarm.eval.report import write_report
    from patarm.judge.backends import GenerationOptions

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    paths = data_paths(args.benchmark, args.data)
    items = {b: limit_items(registry.get(b).load(paths[b]), args.limit) for b in args.benchmark}  # fail early
    temperature = args.temperature if args.temperature is not None else (0.0 if args.num_samples == 1 else 0.7)
    gen = GenerationOptions(max_new_tokens=args.max_new_tokens, temperature=temperature, top_p=args.top_p,
                            batch_size=args.batch_size)
    backend = load_backend(args.model, gen)
    opts = JudgeOptions(mode=args.mode, num_samples=args.num_samples, voting=args.voting,
                        confidence=args.adaptive_confidence, template=args.template, rubric_mode=args.rubric_mode)
    sampling = {"model": str(Path(args.model).resolve()) if Path(args.model).exists() else args.model,
                "max_new_tokens": gen.max_new_tokens, "temperature": gen.temperature, "top_p": gen.top_p}
    cache = JudgmentCache(out / "judgments.jsonl")
    results = {}
    for name in args.benchmark:
        drawer = Drawer(backend, cache, sampling, batch_size=args.batch_size, seed=args.seed,
                        progress=not args.no_progress)
        result = run_benchmark(name, items[name], drawer, opts, out, tie_policy=args.tie_policy)
        result["run"].update(model=args.model, data=paths[name], limit=args.limit, temperature=temperature)
        (out / name / "metrics.json").write_text(json.dumps(result, indent=2, sort_keys=True), encoding="utf-8")
        results[name] = result
    (out / "metrics.json").write_text(json.dumps(results, indent=2, sort_keys=True), encoding="utf-8")
    write_report(out, plots=not args.no_plots)
    return results


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "rescore":
            p = argparse.ArgumentParser(prog="patarm eval rescore", description="Recompute metrics from a samples "
                                        "file; prints them as JSON on stdout.")
            p.add_argument("--benchmark", required=True, choices=sorted(registry.BENCHMARKS))
            p.add_argument("--samples", required=True, help="samples.jsonl: one record per line")
            _tie_arg(p)
            a = p.parse_args(argv[1:])
            print(json.dumps(rescore(a.benchmark, a.samples, a.tie_policy), indent=2, sort_keys=True))
        elif argv and argv[0] in ("compare", "report"):
            from patarm.eval.report import compare_main, report_main

            (compare_main if argv[0] == "compare" else report_main)(argv[1:])
        else:
            results = run(_parse_run_args(argv))
            print(json.dumps({b: r["metrics"] for b, r in results.items()}, indent=2, sort_keys=True))
    except (RecordError, ValueError, FileNotFoundError, RuntimeError) as err:
        sys.exit(f"patarm eval: {err}")


if __name__ == "__main__":
    main()
