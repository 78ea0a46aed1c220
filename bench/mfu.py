"""How close SFT and GRPO-PAR steps on a real model come to the machine's own arithmetic, and what each speed switch
gives: SmolLM2-135M-Instruct (spec `smollm2`) on the GSM8K skill recipe's rows and lengths, all on the same threads.

    flock /tmp/patarm-cpu.lock python bench/mfu.py [--threads 2] [--sft_steps 3] [--grpo_steps 2] [--quick]

1. GEMM peak: `torch.matmul` in fp32 and bf16 at the model's linear-layer shapes for the SFT batch in use
   (tokens × 576 × {576, 192, 1536}, tokens × 1536 × 576, tokens × 576 × 49152) and at 2048³; the bf16 kernel oneDNN
   picks (ONEDNN_VERBOSE) shows whether the matmuls take the AMX / AVX512-BF16 path.
2. SFT (recipe rows: skill prompts cut to 320 tokens + the teacher's judgment; batch 8; bf16 autocast): tokens/s
   and model FLOP utilisation, sft_mfu = (6·params·tokens + attention) / step time / bf16 GEMM peak, for the
   baseline (the settings before this bench: TRL's CPU LM head on every position, padded batches in random order),
   the fast mode (the project's defaults now) and the fast mode with each switch flipped alone, so each switch is
   seen on and off (padding-free and length-grouped batches included, which did not pay). The length-grouped mode
   groups nothing here: its 32 rows make transformers' LengthGroupedSampler sort mega-batches of one batch (it
   takes len(rows) // 32 batches a mega-batch); `bench/sft_length_grouping.py` measures grouping on a whole corpus.
3. One GRPO-PAR step (one pair, 2 sides × G = 8 rollouts of 48 tokens, prompts ≤ 320 tokens; the base model, every
   rollout forced to full length so all modes do equal work), its time split into prefill, decode, log-prob passes,
   forward, backward, optimizer and reward; baseline, fast, each switch flipped; grpo_speedup = baseline / fast.
4. Held-out judging as the recipe evaluates (bf16 weights, batch 32, greedy, 96 new tokens, 4 candidates per
   problem): plain length-sorted batches against shared-prefix batches (`share_prefixes`, one prefill per prefix
   that a problem's candidates share), and shared with rows that ended leaving the batch every 16 tokens
   (`drop_finished_every`); judge_speedup = plain / (shared + dropped) seconds, judge_drop_speedup = shared /
   (shared + dropped), judge_prefill_ratio = the prefill positions (padding included) shared / plain.
5. Rollouts of one prompt (G = 8 × 48 tokens, sampled at temperature 1) as GRPO generates them, against llama.cpp
   (llama-cpp-python, `pip install "patarm[bench]"`) on the same GGUF, threads, prompt and token count:
   gen_vs_llamacpp = this project's tokens/s / llama.cpp's.

Last lines: `gemm_peak_bf16_tflops=`, `sft_mfu=`, `sft_tokens_per_s=`, `grpo_step_s=`, `grpo_speedup=`,
`gen_vs_llamacpp=`, `judge_speedup=`. Warm-up steps are left out of every timing; run it alone (another torch job
skews every ratio).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
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

from bench.mfu_generation import EVAL_TOKENS, JUDGMENT_TOKENS, PROMPT_TOKENS, G, generation, judging  # noqa: E402
from patarm.demo.gsm8k import data as gsm8k_data  # noqa: E402
from patarm.demo.gsm8k.evaluate import judge_template  # noqa: E402
from patarm.demo.gsm8k.prompts import skill_prompt  # noqa: E402
from patarm.demo.gsm8k.teacher import VerifierTeacher  # noqa: E402
from patarm.judge.truncate import truncate_messages  # noqa: E402
from patarm.models import load_causal_lm  # noqa: E402
from patarm.prep.corpus import pointwise_corpus  # noqa: E402
from patarm.train.speed import compact_lm_head  # noqa: E402

now = time.perf_counter  # `--clock cpu`: this process's CPU seconds, for a rough reading on a busy machine
# The baselines are the settings before this bench; "fast" is the project's default now. Each switch is then flipped
# alone from the fast mode: the kept ones off, the ones that did not pay (padding-free, length-grouped batches) on.
SFT_BASELINE = {
    "compact_head": False,
    "padding_free": False,
    "group_by_length": False,
    "fused_adamw": True,
    "bf16": True,
}
SFT_FAST = {**SFT_BASELINE, "compact_head": True}
GRPO_BASELINE = {"compact_head": False, "shared_prefix_loss": False, "shared_prefix_rollouts": False,
                 "rollout_cast_once": False, "fused_adamw": True, "bf16": True}
GRPO_FAST = {**GRPO_BASELINE, "compact_head": True, "shared_prefix_loss": True, "shared_prefix_rollouts": True,
             "rollout_cast_once": True}


class StepClock(TrainerCallback):
    """Wall time of every optimizer step and of the optimizer step itself (s)."""

    def __init__(self):
        self.steps, self.optimizer, self._t, self._o = [], [], 0.0, 0.0

    def on_step_begin(self, args, state, control, **kw):
        self._t = now()

    def on_pre_optimizer_step(self, args, state, control, **kw):
        self._o = now()

    def on_optimizer_step(self, args, state, control, **kw):
        self.optimizer.append(now() - self._o)

    def on_step_end(self, args, state, control, **kw):
        self.steps.append(now() - self._t)


def gemm_tflops(m: int, k: int, n: int, dtype: torch.dtype) -> float:
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    for _ in range(2):
        a @ b
    reps = max(3, int(1.5e11 / (2 * m * k * n)))
    t = now()
    for _ in range(reps):
        a @ b
    return 2 * m * k * n * reps / (now() - t) / 1e12


def onednn_bf16_kernel() -> str:
    """The implementation oneDNN runs for a bf16 matmul here (e.g. brg_matmul:avx512_core_amx / _bf16)."""
    code = "import torch; a = torch.randn(256, 256, dtype=torch.bfloat16); [a @ a for _ in range(2)]"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "ONEDNN_VERBOSE": "1"},
                         capture_output=True, text=True, timeout=120).stdout
    kernels = {line.split(",")[6] for line in out.splitlines() if line.startswith("onednn_verbose") and ",exec," in line
               and "matmul" in line}
    return ", ".join(sorted(kernels)) or "none reported (the matmul did not go through oneDNN)"


def gemm_section(tokens: int, model) -> dict:
    c = model.config
    kv = c.num_key_value_heads * (c.hidden_size // c.num_attention_heads)
    shapes = [(tokens, c.hidden_size, c.hidden_size), (tokens, c.hidden_size, kv),
              (tokens, c.hidden_size, c.intermediate_size), (tokens, c.intermediate_size, c.hidden_size),
              (tokens, c.hidden_size, c.vocab_size), (2048, 2048, 2048)]
    peak = {}
    for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        figures = [gemm_tflops(*s, dtype) for s in shapes]
        print(f"gemm {name} TFLOP/s: " + ", ".join(f"{m}x{k}x{n} {f:.3f}" for (m, k, n), f in zip(shapes, figures)),
              flush=True)
        peak[name] = max(figures)
    print(f"gemm bf16 kernel: {onednn_bf16_kernel()}", flush=True)
    return peak


def recipe_rows(ns, tokenizer) -> tuple[list[dict], list]:
    """(SFT rows, pairs): the recipe's reference-arm corpus — skill prompts cut to 320 tokens, teacher judgments."""
    problems, _ = gsm8k_data.load_problems(ns.data_dir)
    train, _ = gsm8k_data.split_problems(problems, 100, 0)
    render = lambda pair, response, t: truncate_messages(skill_prompt(pair, response, t), tokenizer,  # noqa: E731
                                                         PROMPT_TOKENS)[0]
    pairs = gsm8k_data.make_pairs(gsm8k_data.take(train, 64), 1, 0, True, "gsm8k-judge")
    rows, _ = pointwise_corpus(pairs, VerifierTeacher(), judge_template(), 2.0, render=render)
    return rows, pairs, render


def sft_step(rows: list[dict], switches: dict, ns) -> dict:
    from trl import SFTConfig

    from patarm.train.sft import PaTaRMSFTTrainer, choose_loss_format, to_training_rows

    model, tok = load_causal_lm("smollm2")
    steps = ns.sft_steps + 1
    args = SFTConfig(output_dir=tempfile.mkdtemp(), max_steps=steps, per_device_train_batch_size=8,
                     max_length=None if switches["padding_free"] else 384,  # rows are cut to fit already
                     learning_rate=1e-4, lr_scheduler_type="constant", logging_steps=1, save_strategy="no",
                     report_to=[], use_cpu=True, bf16=switches["bf16"], activation_checkpointing=False, seed=0,
                     data_seed=0, disable_tqdm=True, padding_free=switches["padding_free"],
                     train_sampling_strategy="group_by_length" if switches["group_by_length"] else "random",
                     optim="adamw_torch_fused" if switches["fused_adamw"] else "adamw_torch")
    fmt = choose_loss_format("auto", tok, args)
    clock = StepClock()
    trainer = PaTaRMSFTTrainer(model=model, args=args, processing_class=tok, callbacks=[clock],
                               train_dataset=Dataset.from_list(to_training_rows(rows[:steps * 8], fmt, False)))
    trainer.remove_callback(PrinterCallback)
    compact_lm_head(switches["compact_head"])
    trainer.train()
    logs = [h for h in trainer.state.log_history if "num_tokens" in h]
    lengths = [len(x) for x in trainer.train_dataset["input_ids"]]
    timed = sum(clock.steps[1:])
    tokens = logs[-1]["num_tokens"] - logs[0]["num_tokens"]
    if len(clock.steps) < 2:
        return {}
    return {"step_s": statistics.median(clock.steps[1:]), "tokens_per_s": tokens / timed, "tokens": tokens,
            "seconds": timed, "losses": [round(h["loss"], 3) for h in logs], "lengths": lengths,
            "optimizer_s": statistics.median(clock.optimizer[1:])}


class GRPOClock:
    """Splits a GRPO step: prefill and decode (forwards inside generation by query length), log-prob passes
    (no-grad forwards outside generation), training forward, backward, reward."""

    def __init__(self, trainer):
        self.parts = {k: 0.0 for k in ("prefill", "decode", "logprob", "forward", "backward", "reward")}
        self.generating, self._t = False, 0.0
        model = trainer.accelerator.unwrap_model(trainer.model)
        model.register_forward_pre_hook(self._pre, with_kwargs=True)
        model.register_forward_hook(self._post, with_kwargs=True)
        self._wrap(trainer, "_generate_single_turn", None, generating=True)
        self._wrap(trainer, "_calculate_rewards", "reward")
        self._wrap(trainer.accelerator, "backward", "backward")

    def _wrap(self, obj, name, part, generating=False):
        inner = getattr(obj, name)

        def timed(*a, **k):
            t = now()
            self.generating = generating or self.generating
            try:
                return inner(*a, **k)
            finally:
                if generating:
                    self.generating = False
                if part:
                    self.parts[part] += now() - t

        setattr(obj, name, timed)

    def _pre(self, module, args, kwargs):
        self._t = now()

    def _post(self, module, args, kwargs, output):
        ids = kwargs.get("input_ids", args[0] if args else None)
        queries = ids.shape[1] if ids is not None else 2
        part = ("prefill" if queries > 1 else "decode") if self.generating else (
            "forward" if torch.is_grad_enabled() else "logprob")
        self.parts[part] += now() - self._t

    def reset(self):
        for k in self.parts:
            self.parts[k] = 0.0


def grpo_step(pairs, render, switches: dict, ns) -> dict:
    from patarm.rewards import PairRewards
    from patarm.train.grpo import PaTaRMGRPOConfig, PaTaRMGRPOTrainer, pairs_to_judge_rows

    model, tok = load_causal_lm("smollm2")
    steps = ns.grpo_steps + 1
    rows = pairs_to_judge_rows(pairs[:steps], judge_template(), build=render)
    args = PaTaRMGRPOConfig(output_dir=tempfile.mkdtemp(), max_steps=steps, num_generations=G,
                            per_device_train_batch_size=2 * G, max_completion_length=JUDGMENT_TOKENS,
                            learning_rate=1e-5, beta=0.0, temperature=1.0, logging_steps=1, save_strategy="no",
                            report_to=[], use_cpu=True, bf16=switches["bf16"], activation_checkpointing=False, seed=0,
                            disable_tqdm=True, chat_template_kwargs={"enable_thinking": False}, shuffle_dataset=False,
                            generation_kwargs={"min_new_tokens": JUDGMENT_TOKENS},
                            optim="adamw_torch_fused" if switches["fused_adamw"] else "adamw_torch",
                            shared_prefix_loss=switches["shared_prefix_loss"],
                            shared_prefix_rollouts=switches["shared_prefix_rollouts"],
                            rollout_cast_once=switches["rollout_cast_once"])
    clock = StepClock()
    trainer = PaTaRMGRPOTrainer(model=model, args=args, reward_funcs=PairRewards(judge_template()).reward_funcs(),
                                train_dataset=Dataset.from_list(rows), processing_class=tok, callbacks=[clock])
    trainer.remove_callback(PrinterCallback)
    compact_lm_head(switches["compact_head"])
    split = GRPOClock(trainer)
    parts = []

    class Collect(TrainerCallback):
        def on_step_end(self, *a, **k):
            parts.append(dict(split.parts, optimizer=clock.optimizer[-1]))
            split.reset()

    trainer.add_callback(Collect())
    trainer.train()
    timed = parts[1:]
    breakdown = {k: statistics.mean(p[k] for p in timed) for k in timed[0]}
    step = statistics.mean(clock.steps[1:])
    breakdown["other"] = step - sum(breakdown.values())
    return {"step_s": step, "breakdown": breakdown}


def switch_modes(baseline: dict, fast: dict, quick: bool) -> dict[str, dict]:
    """baseline, fast, and fast with each switch flipped alone (`-name`: switched off, `+name`: switched on)."""
    modes = {"baseline": baseline, "fast": fast}
    if not quick:
        for k, v in fast.items():
            modes[f"fast {'-' if v else '+'}{k}"] = {**fast, k: not v}
    return modes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sft_steps", type=int, default=3, help="timed SFT steps per mode (after one warm-up)")
    parser.add_argument("--grpo_steps", type=int, default=2, help="timed GRPO steps per mode (after one warm-up)")
    parser.add_argument("--quick", action="store_true", help="baseline and fast mode only (no leave-one-out)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["gemm", "sft", "grpo", "gen", "judge"])
    parser.add_argument("--judge_problems", type=int, default=16, help="held-out problems judged (4 candidates each)")
    parser.add_argument("--judge_batch", type=int, default=32, help="rows per judging batch (the recipe's 32)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="wall seconds (the figures), or this process's CPU seconds (a rough reading while other "
                             "jobs run; with --threads 1)")
    parser.add_argument("--data_dir", default=str(ROOT.parent / "shared" / "benchmarks" / "gsm8k"))
    ns = parser.parse_args()
    if not Path(ns.data_dir, "example_model_solutions.jsonl").is_file():
        print(f"bench/mfu.py: the GSM8K pool is not in {ns.data_dir}; pass --data_dir (the folder with "
              "example_model_solutions.jsonl and test.jsonl)", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(ns.threads)
    global now
    now = time.process_time if ns.clock == "cpu" else time.perf_counter
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
        f"{ns.threads}, torch {torch.__version__}; clock {ns.clock}; load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    model, tok = load_causal_lm("smollm2")
    params = sum(p.numel() for p in model.parameters())
    rows, pairs, render = recipe_rows(ns, tok)
    peak = {"bf16": float("nan")}
    results = {}
    if "gemm" not in ns.skip:
        lengths = [len(tok.apply_chat_template(r["messages"], tokenize=True, return_dict=False)) for r in rows[:64]]
        peak = gemm_section(8 * round(statistics.mean(lengths)), model)
    if "sft" not in ns.skip:
        c = model.config
        for name, sw in switch_modes(SFT_BASELINE, SFT_FAST, ns.quick).items():
            r = sft_step(rows, sw, ns)
            mean_len = statistics.mean(r["lengths"])
            sq_over_len = statistics.mean(x * x for x in r["lengths"]) / mean_len
            flops = r["tokens"] * (6 * params + 6 * c.num_hidden_layers * c.hidden_size * sq_over_len)
            r["mfu"] = flops / r["seconds"] / (peak["bf16"] * 1e12)
            results[f"sft {name}"] = r
            print(f"sft {name:<22} {r['step_s']:6.2f} s/step  {r['tokens_per_s']:6.0f} tokens/s  mfu {r['mfu']:.3f}  "
                  f"optimizer {r['optimizer_s']:.2f} s  losses {r['losses']}", flush=True)
    if "grpo" not in ns.skip:
        for name, sw in switch_modes(GRPO_BASELINE, GRPO_FAST, ns.quick).items():
            r = grpo_step(pairs, render, sw, ns)
            results[f"grpo {name}"] = r
            parts = "  ".join(f"{k} {v:.2f}" for k, v in r["breakdown"].items())
            print(f"grpo {name:<28} {r['step_s']:6.2f} s/step  ({parts})", flush=True)
    gen = None
    if "gen" not in ns.skip:
        gen = generation(pairs, render, ns, now)
        print(f"gen G={G} x {JUDGMENT_TOKENS} tokens, prompt {gen['prompt_tokens']} tokens: tokens/s autocast "
              f"{gen['autocast']:.1f}, bf16 weights {gen['bf16 weights']:.1f}, llama.cpp "
              f"{gen['llama.cpp'] or float('nan'):.1f}", flush=True)
    judged = None
    if "judge" not in ns.skip:
        judged = judging(ns, now)
        plain, share, drop = judged["plain"], judged["share"], judged["drop"]
        same = [sum(a == b for a, b in zip(plain["texts"], m["texts"])) for m in (share, drop)]
        print(f"judge {judged['prompts']} held-out prompts (bf16 weights, batch {judged['batch']}, {EVAL_TOKENS} new "
              f"tokens): plain {plain['seconds']:.1f} s ({plain['prefill_tokens']} prefill positions), shared "
              f"prefixes {share['seconds']:.1f} s ({share['prefill_tokens']}), + ended rows dropped every 16 tokens "
              f"{drop['seconds']:.1f} s; new tokens {plain['new_tokens']} / {share['new_tokens']} / "
              f"{drop['new_tokens']}; same texts as plain {same[0]} / {same[1]} of {judged['prompts']}", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print(f"gemm_peak_bf16_tflops={peak['bf16']:.3f}")
    if "sft fast" in results:
        print(f"sft_tokens_per_s={results['sft fast']['tokens_per_s']:.0f}")
        print(f"sft_speedup={results['sft fast']['tokens_per_s'] / results['sft baseline']['tokens_per_s']:.2f}")
        print(f"sft_mfu={results['sft fast']['mfu']:.3f}")
    if "grpo fast" in results:
        print(f"grpo_step_s={results['grpo fast']['step_s']:.2f}")
        print(f"grpo_speedup={results['grpo baseline']['step_s'] / results['grpo fast']['step_s']:.2f}")
    if gen and gen["llama.cpp"]:
        print(f"gen_vs_llamacpp={gen['autocast'] / gen['llama.cpp']:.2f}")
    if judged:
        print(f"judge_prefill_ratio={judged['share']['prefill_tokens'] / judged['plain']['prefill_tokens']:.2f}")
        print(f"judge_drop_speedup={judged['share']['seconds'] / judged['drop']['seconds']:.2f}")
        print(f"judge_speedup={judged['plain']['seconds'] / judged['drop']['seconds']:.2f}")


if __name__ == "__main__":
    main()
