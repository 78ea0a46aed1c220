"""The policy's GRPO step in the IFEval downstream recipe, by precision and speed switch: plain TRL `GRPOTrainer`
on SmolLM2-135M-Instruct with the recipe's policy config (`ifeval-policy-grpo.yaml`: 4 prompts × G = 4 rollouts of
at most 256 tokens) and the rule reward, on the recipe's own RL prompts (built from the shared Alpaca + IFEval data).

    flock /tmp/patarm-cpu.lock python bench/policy_grpo.py [--steps 3] [--modes fp32 bf16 bf16-once bf16-once-compact
                                                                       bf16-fast]

Modes, each from the same start, prompts and seed:
- `fp32`: fp32 weights, no autocast;
- `bf16`: TRL's `bf16=True` on the CPU (accelerate's autocast around every forward, so during generation the
  weights are cast again for every decoded token);
- `bf16-once`: the same, the rollouts generated inside one autocast region (`patarm.train.grpo.RolloutAutocastMixin`:
  each weight cast once per generation batch);
- `bf16-once-compact`: `bf16-once` with TRL's fused LM head projecting only the completion tokens on the CPU too
  (`patarm.train.speed.compact_lm_head`; TRL projects every position, the prompt's and the padding's, off Triton);
- `bf16-once-sdpa`: `bf16-once` plus the project's CPU decode attention (`install_cpu_decode_attention`,
  process-wide, so it runs last);
- `bf16-fast`: the recipe's policy trainer (`patarm.train.grpo.GRPOSpeedMixin`): the compact head, the decode
  attention, each prompt's G rollouts scored in one packed sequence and decoded from one prefill;
- `bf16-fast-head`: that plus the CPU fused LM head (`cpu_lm_head: true`, `patarm.train.lm_head`).
The modes that install the decode attention (process-wide) run after the others.
Per mode: the median step time, the share spent generating, and the trained reward per step (the rollouts differ
by precision, so only the timing is compared). The first step is a warm-up, left out of the medians.
Last lines: `<mode>_step_s=` and `speedup_<mode>=` (the first mode's step time / the mode's). Identical rewards
and lengths in two precisions mean the precision did not switch: the timing then compares nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from real_model import StepTimer  # noqa: E402  (bench/, the script's folder, is on sys.path)

DATA = ROOT.parent / "shared" / "benchmarks"
WARMUP = 1


def rl_rows(run_dir: Path, n: int) -> list[dict]:
    """The IFEval recipe's first `n` RL prompts (its prompts stage and task stage, into `run_dir`)."""
    from patarm.demo.downstream import loop
    from patarm.demo.ifeval.recipe import parse_args, stage_prompts
    from patarm.demo.kit import Clock
    from patarm.io import read_jsonl
    from patarm.verify.ifeval import _use_nltk_data

    args = parse_args(["--run_dir", str(run_dir), "--alpaca_file", str(DATA / "alpaca" / "alpaca_5000.json"),
                       "--ifeval_file", str(DATA / "ifeval" / "input_data.jsonl")])
    _use_nltk_data(args.nltk_data or None)
    stage_prompts(args, run_dir, Clock())
    loop.stage_task(args, run_dir)
    return read_jsonl(run_dir / "task" / "rl.jsonl")[:n], args


def run_mode(mode: str, rows: list[dict], args, steps: int, out: Path) -> dict:
    from datasets import Dataset
    from trl import GRPOTrainer

    from patarm.demo.downstream.rewards import RuleReward
    from patarm.demo.downstream.train import grpo_config
    from patarm.models import load_causal_lm
    from patarm.train.grpo import GRPOSpeedMixin, RolloutAutocastMixin
    from patarm.train.speed import compact_lm_head

    if mode.endswith("sdpa"):
        from patarm.models.attention import install_cpu_decode_attention

        install_cpu_decode_attention()
    compact_lm_head(mode == "bf16-once-compact")
    overrides = ["--cpu_lm_head", str(mode == "bf16-fast-head")]
    args.grpo_steps = steps
    # the precision given while the config is built, so TrainingArguments' __post_init__ sees it (setting the
    # attribute afterwards did not switch it: the first run's fp32 and bf16 rollouts came out token for token the same)
    config = grpo_config(args, out, out / mode, ["--bf16", str(mode != "fp32"), "--report_to", "none",
                                                 "--disable_tqdm", "true", *overrides])
    if config.mixed_precision != ("no" if mode == "fp32" else "bf16"):
        sys.exit(f"{mode}: the config's mixed_precision is {config.mixed_precision!r}")
    mixin = GRPOSpeedMixin if mode.startswith("bf16-fast") else RolloutAutocastMixin if "once" in mode else None
    cls = type("Policy", (mixin, GRPOTrainer), {}) if mixin else GRPOTrainer
    model, tokenizer = load_causal_lm(args.policy_model)
    timer = StepTimer()
    trainer = cls(model=model, reward_funcs=[RuleReward()], args=config, train_dataset=Dataset.from_list(rows),
                  processing_class=tokenizer, callbacks=[timer])
    generating: list[float] = []
    generate = trainer._generate_single_turn

    def timed(*a, **kw):
        t = time.perf_counter()
        try:
            return generate(*a, **kw)
        finally:
            generating.append(time.perf_counter() - t)

    trainer._generate_single_turn = timed
    trainer.train()
    rewards = [round(h["reward"], 3) for h in trainer.state.log_history if "reward" in h]
    lengths = [round(h["completions/mean_length"]) for h in trainer.state.log_history if "completions/mean_length" in h]
    step_s = statistics.median(timer.times[WARMUP:])
    gen_s = statistics.median(generating[WARMUP:]) if len(generating) > WARMUP else generating[-1]
    return {"step_s": step_s, "generate_s": gen_s, "steps": [round(t, 1) for t in timer.times], "rewards": rewards,
            "lengths": lengths}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps per mode (the first is a warm-up)")
    modes = ["fp32", "bf16", "bf16-once", "bf16-once-compact", "bf16-once-sdpa", "bf16-fast", "bf16-fast-head"]
    parser.add_argument("--modes", nargs="+", default=["fp32", "bf16-once", "bf16-fast"], choices=modes)
    parser.add_argument("--threads", type=int, default=2)
    ns = parser.parse_args()
    if not (DATA / "ifeval" / "input_data.jsonl").is_file():
        sys.exit(f"needs the shared benchmark data in {DATA} (Alpaca + IFEval)")
    installs = [i for i, m in enumerate(ns.modes) if m in ("bf16-once-sdpa", "bf16-fast", "bf16-fast-head")]
    if installs and installs != list(range(len(ns.modes) - len(installs), len(ns.modes))):
        sys.exit(f"{ns.modes[installs[0]]} installs a process-wide attention path: give bf16-once-sdpa / bf16-fast / "
                 "bf16-fast-head after the other modes")
    torch.set_num_threads(ns.threads)
    from patarm.train.common import cpu_bf16

    fast, why = cpu_bf16()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
          f"{ns.threads}, torch {torch.__version__}; bf16 default: {fast} ({why}); load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        rows, args = rl_rows(out, 64)
        for mode in ns.modes:
            r = results[mode] = run_mode(mode, rows, args, ns.steps, out)
            print(f"{mode}: {r['step_s']:.1f} s a step (generating {r['generate_s']:.1f} s), steps {r['steps']}, "
                  f"reward {r['rewards']}, mean completion tokens {r['lengths']}", flush=True)
    for mode, r in results.items():
        print(f"{mode}_step_s={r['step_s']:.1f}")
    base = ns.modes[0]
    for mode, r in results.items():
        if mode != base:
            print(f"speedup_{mode}={results[base]['step_s'] / r['step_s']:.2f}")


if __name__ == "__main__":
    main()
