"""Which fine-tuning learns more per CPU-minute on the GSM8K judge task: full or LoRA, fp32 or bf16 autocast.

    flock /tmp/patarm-cpu.lock python bench/gsm8k_finetune.py [--steps 12] [--batch 4] [--held_out 32]

SmolLM2-135M-Instruct (spec `smollm2`) is trained by SFT on the recipe's own corpus (reference arm: the verifier
teacher's judgments of (correct, incorrect) GSM8K pairs, skill prompts cut to 448 tokens) in each variant, with the
same rows, order and seed. Every `--every` steps the training clock stops and the judge is measured on held-out
judgments of other problems: the mean loss of the teacher's judgment (tokens of the completion only) and the verdict
accuracy — the share of held-out judgments whose right verdict (`correct :: pass`, score 9, or `fail`, 2) the model
finds more likely than the flipped one, the evidence lines being the teacher's. Printed per variant: the training
seconds and both measures at each checkpoint; the last line names the variant with the lowest held-out loss at
the training time the fastest variant took for all its steps (equal CPU time).
"""

from __future__ import annotations

import argparse
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

from patarm.demo.gsm8k import data as gsm8k_data  # noqa: E402
from patarm.demo.gsm8k.evaluate import judge_template  # noqa: E402
from patarm.demo.gsm8k.prompts import skill_prompt  # noqa: E402
from patarm.demo.gsm8k.teacher import FAIL_SCORE, PASS_SCORE, VerifierTeacher  # noqa: E402
from patarm.judge.truncate import truncate_messages  # noqa: E402
from patarm.models import load_causal_lm  # noqa: E402
from patarm.prep.corpus import pointwise_corpus  # noqa: E402
from patarm.train.sft import PaTaRMSFTTrainer, choose_loss_format, to_training_rows  # noqa: E402

VARIANTS = {"full-bf16": (False, True, 1e-4), "lora-bf16": (True, True, 5e-4), "full-fp32": (False, False, 1e-4)}


def corpus(ns, tokenizer) -> tuple[list[dict], list[dict]]:
    """(train rows, held-out rows): the recipe's reference-arm SFT rows from disjoint train problems."""
    problems, _ = gsm8k_data.load_problems(ns.data_dir)
    train, _ = gsm8k_data.split_problems(problems, 100, 0)
    render = lambda pair, response, t: truncate_messages(skill_prompt(pair, response, t), tokenizer, 448)[0]  # noqa: E731
    need = ns.steps * ns.batch // 2
    pairs = gsm8k_data.make_pairs(gsm8k_data.take(train, need + ns.held_out // 2, start=300), 1, 0, True,
                                  "gsm8k-judge")
    rows, _ = pointwise_corpus(pairs, VerifierTeacher(), judge_template(), 2.0, render=render)
    return rows[:2 * need], rows[2 * need:]


def flipped(judgment: str) -> str:
    if "correct :: pass" in judgment:
        return judgment.replace("correct :: pass", "correct :: fail").replace(
            f"<score>{PASS_SCORE}<", f"<score>{FAIL_SCORE}<"
        )
    return judgment.replace("correct :: fail", "correct :: pass").replace(
        f"<score>{FAIL_SCORE}<", f"<score>{PASS_SCORE}<"
    )


@torch.no_grad()
def completion_logprob(model, tokenizer, prompt: list[dict], completion: str) -> tuple[float, int]:
    """(sum of log-probabilities of the completion's tokens, their count) given the prompt."""
    head = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    ids_head = tokenizer(head, add_special_tokens=False)["input_ids"]
    ids = tokenizer(head + completion, add_special_tokens=False)["input_ids"]
    logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float().log_softmax(-1)
    target = torch.tensor(ids[1:])
    lp = logits[torch.arange(len(target)), target][len(ids_head) - 1:]
    return float(lp.sum()), len(lp)


def measure(model, tokenizer, held_out: list[dict]) -> tuple[float, float]:
    """(mean held-out completion loss per token, verdict accuracy)."""
    was = model.training
    model.eval()
    nll = tokens = right = 0
    for row in held_out:
        prompt, judgment = row["messages"][:-1], row["messages"][-1]["content"]
        lp, n = completion_logprob(model, tokenizer, prompt, judgment)
        nll, tokens = nll - lp, tokens + n
        right += lp > completion_logprob(model, tokenizer, prompt, flipped(judgment))[0]
    model.train(was)
    return nll / tokens, right / len(held_out)


class Checkpoints(TrainerCallback):
    """Training seconds (evaluation excluded) and the held-out measures every `every` steps."""

    def __init__(self, tokenizer, held_out, every):
        self.tok, self.held_out, self.every, self.train_s, self.points, self._t = (
            tokenizer,
            held_out,
            every,
            0.0,
            [],
            0.0,
        )

    def on_step_begin(self, args, state, control, **kw):
        self._t = time.perf_counter()

    def on_step_end(self, args, state, control, model=None, **kw):
        self.train_s += time.perf_counter() - self._t
        if state.global_step % self.every == 0:
            loss, acc = measure(model, self.tok, self.held_out)
            self.points.append((state.global_step, round(self.train_s, 1), round(loss, 4), round(acc, 3)))
            print(f"  step {state.global_step}: {self.train_s:.0f} s training, held-out loss {loss:.4f}, "
                  f"verdict accuracy {acc:.3f}", flush=True)


def run(name: str, rows, held_out, ns) -> list[tuple]:
    lora, bf16, lr = VARIANTS[name]
    model, tok = load_causal_lm("smollm2")
    args = SFTConfig(output_dir=tempfile.mkdtemp(), max_steps=ns.steps, per_device_train_batch_size=ns.batch,
                     max_length=512, learning_rate=lr, lr_scheduler_type="constant", logging_steps=1,
                     save_strategy="no", report_to=[], use_cpu=True, bf16=bf16, activation_checkpointing=False,
                     seed=0, data_seed=0, disable_tqdm=True)
    fmt = choose_loss_format("auto", tok, args)
    peft = None
    if lora:
        from peft import LoraConfig

        peft = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")
    points = Checkpoints(tok, held_out, ns.every)
    print(f"{name}: lr {lr}, loss format {fmt}", flush=True)
    points.points.append((0, 0.0, *[round(x, 4) for x in measure(model, tok, held_out)]))
    print(f"  step 0: held-out loss {points.points[0][2]:.4f}, verdict accuracy {points.points[0][3]:.3f}", flush=True)
    trainer = PaTaRMSFTTrainer(model=model, args=args, processing_class=tok, callbacks=[points], peft_config=peft,
                               train_dataset=Dataset.from_list(to_training_rows(rows, fmt, False)))
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    return points.points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_dir", default=str(ROOT.parent / "shared" / "benchmarks" / "gsm8k"))
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--every", type=int, default=4)
    parser.add_argument("--held_out", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ns = parser.parse_args()
    torch.set_num_threads(ns.threads)
    _, tok = load_causal_lm("smollm2")
    rows, held_out = corpus(ns, tok)
    print(f"{len(rows)} training rows, {len(held_out)} held-out judgments", flush=True)
    curves = {name: run(name, rows, held_out, ns) for name in ns.variants}
    budget = min(c[-1][1] for c in curves.values())
    at = {name: [p for p in c if p[1] <= budget + 1e-6][-1] for name, c in curves.items()}
    for name, c in curves.items():
        print(f"{name}: {c}")
    best = min(at, key=lambda n: at[n][2])
    print(f"at {budget:.0f} s of training: " + ", ".join(f"{n} loss {p[2]} acc {p[3]} (step {p[0]})"
                                                        for n, p in at.items()) + f"; best_per_cpu_minute={best}")


if __name__ == "__main__":
    main()
