"""`patarm judge`: judge preference pairs (or single responses) with any saved judge; one JSON line each.

    patarm judge --model runs/quickstart/export --input pairs.jsonl [--mode pointwise|pairwise] [--num-samples N]

Pairs give one record per pair with every rollout's Judgment, mean scores, PAR rewards and the pair
outcome; rows of `{"prompt", "response"}` give one pointwise Judgment record per row.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from patarm.judge.backends import GenerationOptions, HFBackend
from patarm.judge.parse import parse_judgment
from patarm.judge.templates import load_template, render_pointwise


def _single_rows(path: str) -> list[dict] | None:
    """Rows of single responses (`prompt` + `response`), or None when the file holds pairs."""
    with open(path, encoding="utf-8") as fh:
        first = next((line for line in fh if line.strip()), "")
    try:
        row = json.loads(first)
    except json.JSONDecodeError:
        return None
    if not (isinstance(row, dict) and "response" in row and "chosen" not in row):
        return None
    rows = []
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if line.strip():
                r = json.loads(line)
                if not isinstance(r.get("response"), str) or "prompt" not in r:
                    raise ValueError(f"{path}, row {i}: single-response rows need 'prompt' and a text 'response'")
                rows.append(r)
    return rows


def main(argv: list[str]) -> None:
    from patarm.judge.run import judge_pairs_pairwise, judge_pairs_pointwise, summarize

    p = argparse.ArgumentParser(prog="patarm judge", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="A saved judge folder or hub id.")
    p.add_argument("--input", required=True, help="Pairs (any supported layout) or {prompt, response} rows.")
    p.add_argument("--mode", choices=["pointwise", "pairwise"], default="pointwise")
    p.add_argument("--num-samples", type=int, default=1, help="Rollouts per response (voting@n).")
    p.add_argument("--template", default=None, help="Judge template (default: pointwise / pairwise).")
    p.add_argument("--rubric-mode", choices=["primary", "generated", "adaptive"], default="adaptive")
    p.add_argument("--margin", default="graded", help="PAR margin function for the reported rewards.")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--max-new-tokens", type=int, default=1024)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--output", default="-", help="Output jsonl (default: stdout).")
    p.add_argument("--on-error", choices=["raise", "skip"], default="raise")
    ns = p.parse_args(argv)

    options = GenerationOptions(max_new_tokens=ns.max_new_tokens, temperature=ns.temperature, batch_size=ns.batch_size)
    backend = HFBackend.from_pretrained(ns.model, options)
    template = load_template(ns.template or ns.mode, rubric_mode=ns.rubric_mode)
    singles = _single_rows(ns.input) if Path(ns.input).is_file() else None
    if singles is not None:
        prompts = [render_pointwise(r["prompt"], r["response"], template, domain=r.get("domain")) for r in singles]
        outputs = backend.generate(prompts, num_samples=ns.num_samples)
        records = [{"id": r.get("id", i), "judgments": [parse_judgment(t, template).to_dict() for t in outs]}
                   for i, (r, outs) in enumerate(zip(singles, outputs))]
    else:
        from patarm.data import load_pairs

        pairs = load_pairs(ns.input, on_error=ns.on_error).pairs
        if ns.mode == "pointwise":
            records = judge_pairs_pointwise(pairs, backend, template, ns.num_samples, ns.margin)
        else:
            records = judge_pairs_pairwise(pairs, backend, template, ns.num_samples)
        print(json.dumps(summarize(records)), file=sys.stderr)
    fh = sys.stdout if ns.output == "-" else open(ns.output, "w", encoding="utf-8")
    try:
        for record in records:
            fh.write(json.dumps(record) + "\n")
    finally:
        if fh is not sys.stdout:
            fh.close()
