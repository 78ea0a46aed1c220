"""`patarm judge --model DIR --input FILE [--mode pointwise|pairwise] [--num_samples N]`: judge preference
pairs (or single responses) with a saved judge; one JSON line each.

Pairs give one record per pair with every rollout's Judgment, mean scores, PAR rewards and the pair
outcome (a summary line goes to stderr); rows of `{"prompt", "response"}` give one pointwise Judgment
record per row. The template, rubric mode, score range and judgment length default to what the judge
was trained with (its `patarm_config.json`); flags override them.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patarm.config import RunArguments, check_positive
from patarm.models.settings import JudgeOptions, judge_field


@dataclass
class JudgeArguments(RunArguments):
    """Judge pairs or single responses with a saved judge."""

    model: str = field(default="{run_dir}/export", metadata={"path": "input", "help":
                       "the judge: a folder, a hub id, an http(s)://host/v1#MODEL endpoint or vllm:PATH"})
    input: str = field(default="", metadata={"path": "input", "help":
                       "pairs (any supported layout) or jsonl rows of {prompt, response}"})
    output: str = field(default="-", metadata={"help": "output jsonl (default: stdout)"})
    mode: str = field(
        default="pointwise", metadata={"help": "pointwise | pairwise", "choices": ["pointwise", "pairwise"]}
    )
    num_samples: int = field(default=1, metadata={"help": "judgments per response (voting@n); sampled when > 1"})
    template: str | None = judge_field("template")
    rubric_mode: str | None = judge_field("rubric_mode")
    margin: str = field(default="graded", metadata={"help": "PAR margin function for the reported rewards"})
    temperature: float | None = judge_field("temperature")
    max_new_tokens: int | None = judge_field("max_new_tokens")
    max_prompt_tokens: int | None = judge_field("max_prompt_tokens")
    batch_size: int = field(default=16, metadata={"help": "prompts per generation batch"})
    on_error: str = field(default="raise", metadata={"help": "malformed input rows: raise | skip (counted)",
                                                     "choices": ["raise", "skip"]})
    seed: int = field(default=0, metadata={"help": "sampling seed"})

    def __post_init__(self) -> None:
        check_positive(self, "num_samples", "batch_size")
        JudgeOptions.of(self)


def _is_single(row: Any) -> bool:
    return isinstance(row, dict) and "prompt" in row and isinstance(row.get("response"), str) and "chosen" not in row


def _single_rows(path: str) -> list[dict] | None:
    """Rows of single responses (`prompt` + `response`), or None when the file's first row is a pair."""
    from itertools import chain

    from patarm.io import DataError, iter_jsonl

    rows = iter_jsonl(path)
    first = next(rows, None)
    if first is None or not _is_single(first[1]):
        return None
    out = []
    for index, row in chain([first], rows):
        if isinstance(row, DataError):
            raise row
        if not _is_single(row):
            raise ValueError(f"{path}, line {index + 1}: expected a {{prompt, response}} row like the first one")
        out.append(row)
    return out


def main(command: str, argv: list[str]) -> None:
    from patarm.backends import GenerationOptions, make_backend
    from patarm.config import parse_stage
    from patarm.eval.pairs import judge_pairs_pairwise, judge_pairs_pointwise, summarize
    from patarm.judge import load_template, parse_judgment, render_pointwise
    from patarm.judge.truncate import PromptFitter
    from patarm.models.settings import resolve_judge_options

    (args,) = parse_stage((JudgeArguments,), argv, prog="patarm judge", description=__doc__)
    if not args.input:
        raise ValueError("patarm judge: give --input (a pairs file, or jsonl rows of {prompt, response})")
    if not Path(args.input).exists():
        raise FileNotFoundError(f"--input {args.input} does not exist")
    values, _ = resolve_judge_options(args.model, JudgeOptions.of(args), args.mode, args.num_samples)
    options = GenerationOptions(max_new_tokens=values["max_new_tokens"], temperature=values["temperature"],
                                batch_size=args.batch_size, enable_thinking=values["enable_thinking"],
                                max_prompt_tokens=values["max_prompt_tokens"])
    template = load_template(values["template"], rubric_mode=values["rubric_mode"], score_range=values["score_range"])
    singles = _single_rows(args.input) if Path(args.input).is_file() else None
    backend = make_backend(args.model, options, name="judge")
    fit = PromptFitter(backend)
    if singles is not None:
        prompts = [fit(render_pointwise(r["prompt"], r["response"], template, domain=r.get("domain"))) for r in singles]
        outputs = backend.generate(prompts, num_samples=args.num_samples, seed=args.seed)
        records = [{"id": r.get("id", i), "judgments": [parse_judgment(t, template).to_dict() for t in outs]}
                   for i, (r, outs) in enumerate(zip(singles, outputs))]
    else:
        from patarm.data import load_pairs

        pairs = load_pairs(args.input, on_error=args.on_error).pairs
        if not pairs:
            raise ValueError(f"{args.input}: no preference pairs to judge")
        if args.mode == "pointwise":
            records = judge_pairs_pointwise(pairs, backend, template, args.num_samples, args.margin, seed=args.seed,
                                            fit=fit)
        else:
            records = judge_pairs_pairwise(pairs, backend, template, args.num_samples, seed=args.seed, fit=fit)
        print(json.dumps({**summarize(records), "truncated_prompts": fit.truncated}), file=sys.stderr)
    fh = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
    try:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    finally:
        if fh is not sys.stdout:
            fh.close()
