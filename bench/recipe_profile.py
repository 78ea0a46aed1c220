"""Where the GSM8K skill recipe's wall clock goes, against the arithmetic each stage has to do: for a finished run
folder, every stage's seconds (`timings.json`) beside its model FLOPs counted from what it processed, the FLOP/s
reached, and the floor — the seconds the same work takes at the machine's measured bf16 GEMM peak.

    python bench/recipe_profile.py --config patarm/demo/configs/gsm8k-small.yaml --run_dir runs/gsm8k-small
                                   [--peak_tflops 0.409]   # else measured here (bench/mfu.py's GEMM section)

The arguments are the recipe's (`patarm quickstart --recipe gsm8k-skill ...`): they rebuild the split and the judge
prompts. Work counted (P = the model's parameters, H = its LM head, tied to the embedding; linear layers only, so
attention — ~5-10 % at these lengths — counts as overhead):
  sft       6·(P−H)·tokens + 6·H·judgment tokens (the compact LM head scores only labelled positions)
  rl-set    prefill 2·(P−H) per distinct prompt token + decode 2·P per sampled token (the cached texts)
  grpo      per step: rollouts (prefill once per prompt, decode 2·P per token) + forward/backward
            6·(P−H)·(prompts + rollouts) + 6·H·rollout tokens (shared-prefix loss: the prompt once)
  eval-*    prefill 2·(P−H) per prompt token that the shared-prefix plan runs (no padding) + decode 2·P per token
  bt        6·(P−H)·tokens (a scalar head); eval-bt 2·(P−H) per token of the 400 scored conversations
Last lines: `recipe_wall_s=` (the stages' seconds summed), `recipe_floor_s=` (their work at the peak),
`recipe_mfu=` (floor / wall) and `recipe_floor_minutes_per_arm=`.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _last(path: Path, key: str) -> float:
    values = [json.loads(line).get(key) for line in path.read_text().splitlines() if line.strip()]
    return float([v for v in values if v is not None][-1])


def _texts(db: Path) -> list[str]:
    with sqlite3.connect(db) as c:
        return [row[0] for row in c.execute("select text from completions")]


def arm_work(args, arm: str, d: Path, heldout, tok, P: int, H: int) -> dict[str, float]:
    """Model FLOPs of each finished stage of one arm (keys as in timings.json, without the arm)."""
    from patarm.backends.prefix import plan_segments
    from patarm.demo.gsm8k.evaluate import bt_prompt, fitted_prompts
    from patarm.demo.gsm8k.recipe import DISCLOSES

    disclose, evidence = DISCLOSES[arm]
    prompts = fitted_prompts(heldout, disclose, args.skill, tok, args.max_prompt_tokens, evidence, args.rubric_mode)
    ids = tok([tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts],
              add_special_tokens=False)["input_ids"]
    segments = plan_segments(ids, args.eval_batch_size)
    prefill = sum(s.prefix + sum(len(ids[r]) - s.prefix for r in s.rows) for s in segments)
    mean_prompt = sum(map(len, ids)) / len(ids)

    def decoded(texts: list[str]) -> int:
        return sum(len(t) + 1 for t in tok(texts, add_special_tokens=False)["input_ids"])

    work: dict[str, float] = {}
    for stage in ("base", "sft", "grpo"):
        path = d / "eval" / f"{stage}.jsonl"
        if path.is_file():
            texts = [t for line in path.read_text().splitlines() for t in json.loads(line)["texts"]]
            work[f"eval-{stage}"] = 2 * (P - H) * prefill + 2 * H * len(ids) + 2 * P * decoded(texts)
    if (d / "sft" / "metrics.jsonl").is_file():
        rows = [json.loads(line) for line in (d / "prep" / "pointwise" / "sft.jsonl").read_text().splitlines()]
        labels = decoded([r["messages"][-1]["content"] for r in rows])
        work["sft"] = 6 * (P - H) * _last(d / "sft" / "metrics.jsonl", "num_tokens") + 6 * H * labels
    rl = d / "prep" / "rl"
    if (rl / "cache.sqlite").is_file():
        pool = json.loads((rl / "manifest.json").read_text())["rows_in"]
        work["rl-set"] = 2 * (P - H) * 2 * pool * mean_prompt + 2 * P * decoded(_texts(rl / "cache.sqlite"))
    if (d / "grpo" / "metrics.jsonl").is_file():
        steps = [json.loads(line) for line in (d / "grpo" / "metrics.jsonl").read_text().splitlines()]
        flops = 0.0
        for s in steps:
            if "completions/mean_length" in s:
                rollouts, prompts_len = 16 * s["completions/mean_length"], 2 * mean_prompt
                flops += 2 * (P - H) * prompts_len + 2 * P * rollouts  # generation
                flops += 6 * (P - H) * (prompts_len + rollouts) + 6 * H * rollouts  # forward + backward
        work["grpo"] = flops
    if (d / "bt" / "metrics.jsonl").is_file():
        work["bt"] = 6 * (P - H) * _last(d / "bt" / "metrics.jsonl", "num_tokens")
    if (d / "eval" / "bt.jsonl").is_file():
        convs = [tok.apply_chat_template(bt_prompt(p.question, p.answer if disclose else None)
                                         + [{"role": "assistant", "content": s}], tokenize=True, return_dict=True)
                 for p in heldout for s in p.solutions]
        work["eval-bt"] = 2 * (P - H) * sum(min(len(c["input_ids"]), 384) for c in convs)
    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peak_tflops", type=float, default=None, help="bf16 GEMM peak; default: measured here")
    ns, rest = parser.parse_known_args()
    import torch

    from patarm.demo.gsm8k import data as gsm8k_data
    from patarm.demo.gsm8k.recipe import parse_args
    from patarm.io import read_json
    from patarm.models import load_causal_lm

    args = parse_args(rest)
    out = Path(args.run_dir)
    if not (out / "timings.json").is_file():
        parser.exit(2, f"recipe_profile: {out / 'timings.json'} does not exist. Give --run_dir a folder written by "
                       "`patarm quickstart --recipe gsm8k-skill` (with the same --config and sizes), or "
                       "{run_dir}/seed-<s> for a --seeds run.\n")
    timings = read_json(out / "timings.json")
    problems, _ = gsm8k_data.load_problems(args.data_dir)
    split_seed = args.seed if args.split_seed is None else args.split_seed
    _, heldout = gsm8k_data.split_problems(problems, args.heldout_problems, split_seed)
    model, tok = load_causal_lm(args.model)
    P = sum(p.numel() for p in model.parameters())
    H = model.get_output_embeddings().weight.numel()
    if ns.peak_tflops is None:
        from bench.mfu import gemm_section

        torch.set_num_threads(torch.get_num_threads())
        ns.peak_tflops = gemm_section(2400, model)["bf16"]
    peak = ns.peak_tflops * 1e12
    wall = floor = 0.0
    timed: set[str] = set()
    print(f"bf16 GEMM peak {ns.peak_tflops:.3f} TFLOP/s; P = {P / 1e6:.1f}M, LM head {H / 1e6:.1f}M")
    print(f"{'stage':<26}{'wall s':>9}{'TFLOP':>9}{'TFLOP/s':>9}{'of peak':>9}{'floor s':>9}")
    for arm in args.arms:
        if not (out / arm).is_dir():
            continue
        for stage, flops in sorted(arm_work(args, arm, out / arm, heldout, tok, P, H).items()):
            seconds = timings.get(f"{arm}/{stage}")
            if not seconds:
                continue
            wall, floor = wall + seconds, floor + flops / peak
            timed.add(arm)
            print(f"{arm + '/' + stage:<26}{seconds:>9.1f}{flops / 1e12:>9.1f}{flops / seconds / 1e12:>9.3f}"
                  f"{flops / seconds / peak:>9.2f}{flops / peak:>9.1f}")
    arms = len(timed)
    print(f"recipe_wall_s={wall:.0f}")
    print(f"recipe_floor_s={floor:.0f}")
    print(f"recipe_mfu={floor / wall:.2f}")
    print(f"recipe_floor_minutes_per_arm={floor / 60 / max(arms, 1):.1f}")


if __name__ == "__main__":
    main()
