"""GRPO step-time overhead of PaTaRM's trainer (pair-preserving sampler + PAR/format rewards with
parsing) against TRL's plain GRPOTrainer with a trivial reward: same tiny model, batch, G and
completion length (EOS is suppressed so every completion has exactly the same length).

    python bench/grpo_overhead.py [--steps 30] [--rounds 4]

The two trainers alternate in rounds so machine noise hits both; the last line is
`grpo_overhead_ratio=<median PaTaRM step time / median TRL step time>` (target <= 1.05).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from datasets import Dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from patarm.data import load_pairs  # noqa: E402
from patarm.models.tiny import build_tiny_judge  # noqa: E402
from patarm.rewards import PairRewards  # noqa: E402
from patarm.train.grpo import PaTaRMGRPOTrainer, pairs_to_judge_rows  # noqa: E402


class StepTimer(TrainerCallback):
    def __init__(self):
        self.times, self._t = [], None

    def on_step_begin(self, args, state, control, **kw):
        self._t = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        self.times.append(time.perf_counter() - self._t)


def trivial_reward(completions, **kwargs):
    return [float(len(str(c))) % 3 for c in completions]


def run(kind: str, model_dir: str, dataset: Dataset, steps: int, G: int, length: int) -> list[float]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(), max_steps=steps, per_device_train_batch_size=2 * G, num_generations=G,
        max_completion_length=length, learning_rate=1e-5, beta=0.0, logging_steps=1000, save_strategy="no",
        report_to=[], use_cpu=True, bf16=False, activation_checkpointing=False, seed=0, disable_tqdm=True,
        generation_kwargs={"min_new_tokens": length},  # equal lengths for both trainers
    )
    timer = StepTimer()
    if kind == "patarm":
        trainer = PaTaRMGRPOTrainer(
            model=model,
            args=args,
            reward_funcs=PairRewards("pointwise-compact").reward_funcs(),
            train_dataset=dataset,
            processing_class=tok,
            callbacks=[timer],
        )
    else:
        trainer = GRPOTrainer(model=model, args=args, reward_funcs=trivial_reward, train_dataset=dataset,
                              processing_class=tok, callbacks=[timer])
    trainer.train()
    return timer.times[2:]  # drop warm-up steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--length", type=int, default=48)
    ns = parser.parse_args()
    rows = pairs_to_judge_rows(load_pairs(ROOT / "patarm/demo/assets/if_pairs_demo.jsonl").pairs, "pointwise-compact")
    model_dir = tempfile.mkdtemp()
    build_tiny_judge([m["content"] for r in rows for m in r["prompt"]], model_dir, vocab_size=512,
                     hidden_size=64, num_layers=2)
    dataset = Dataset.from_list(rows)
    times = {"patarm": [], "trl": []}
    for r in range(ns.rounds):
        for kind in ("trl", "patarm") if r % 2 == 0 else ("patarm", "trl"):
            times[kind] += run(kind, model_dir, dataset, ns.steps, ns.generations, ns.length)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"median step time: patarm {med['patarm'] * 1000:.1f} ms, trl {med['trl'] * 1000:.1f} ms "
          f"({len(times['patarm'])} steps each, G={ns.generations}, batch {2 * ns.generations}, length {ns.length})")
    print(f"grpo_overhead_ratio={med['patarm'] / med['trl']:.3f}")


if __name__ == "__main__":
    main()
