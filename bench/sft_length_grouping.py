"""What length-grouped SFT batches save on a recipe's own corpus: SmolLM2-135M-Instruct (spec `smollm2`) trained
through the project's SFT path (PaTaRMSFTTrainer, the compact LM head, bf16 autocast where the CPU has it) over the
same rows twice, once in TRL's random order (`train_sampling_strategy: random`, the default) and once length-grouped
(`group_by_length`: transformers' LengthGroupedSampler, rows of similar length batched together).

    flock /tmp/patarm-cpu.lock python bench/sft_length_grouping.py \
        --corpus runs/gsm8k-skill/reference/prep/pointwise/sft.jsonl

`bench/mfu.py`'s length-grouped mode trains 32 rows, where LengthGroupedSampler sorts mega-batches of len // 32
batches — one — and so groups nothing; the recipes cut judge prompts at 512 tokens (`max_prompt_tokens`), and a
batch pads its rows to its longest. `--modes group_by_length random` runs the two modes in the other order: the
first run pays for set-up the single warm-up step does not cover (7–21 s on 8–12 batches, measured), so run both
orders and compare each mode's time when it ran second.
The corpus is tokenised once (TRL's own preparation) and one step trains to warm the kernels up. Per mode, one
epoch's batches are drawn in that sampler's order (seed 0, batch 8) and `--steps` of them, taken evenly through the
epoch, are trained in that order: their seconds and padded positions (rows × the batch's longest row, what the
forward and backward compute) project the epoch's time (a systematic sample). Also, over whole epochs (5 seeds, no
training), the share of the padded positions that are real tokens in each order (`useful_share_random=`,
`useful_share_grouped=`).

Last lines: `epoch_positions_ratio=` (grouped / random, seed 0's epochs), `s_per_kposition_random=`,
`s_per_kposition_grouped=`, `sft_group_speedup=` (projected epoch seconds, random / grouped). Run it alone:
another torch job skews every ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers.trainer_callback import PrinterCallback  # noqa: E402

from bench.real_model import StepTimer  # noqa: E402
from patarm.models import load_causal_lm  # noqa: E402

BATCH = 8
WORK = tempfile.mkdtemp(prefix="sft-length-grouping-")


def fail(message: str) -> None:
    """Bad input: one paragraph on stderr, exit 2."""
    print(message, file=sys.stderr)
    sys.exit(2)


def read_rows(path: Path) -> list[dict]:
    rows = []
    with path.open() as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                fail(f"{path}: row {number}: not a JSON object ({err.msg}); an SFT corpus has one JSON row a line")
            if not isinstance(row, dict) or not isinstance(row.get("messages"), list) or len(row["messages"]) < 2:
                fail(f"{path}: row {number}: field 'messages' must be a list of at least two turns (the judge "
                         "prompt and the judgment), as `patarm prep` writes sft.jsonl")
            rows.append(row)
    return rows


def trainer_for(dataset: Dataset, strategy: str, max_length: int, spec: str, texts: list[str]):
    from trl import SFTConfig

    from patarm.train.sft import PaTaRMSFTTrainer, choose_loss_format, to_training_rows

    model, tok = load_causal_lm(spec, texts=texts, output_dir=WORK)  # a tiny spec builds its tokenizer from texts
    args = SFTConfig(output_dir=tempfile.mkdtemp(), num_train_epochs=1, per_device_train_batch_size=BATCH,
                     max_length=max_length, learning_rate=1e-4, lr_scheduler_type="constant", logging_steps=1,
                     save_strategy="no", report_to=[], use_cpu=True, activation_checkpointing=False, seed=0,
                     data_seed=0, disable_tqdm=True, train_sampling_strategy=strategy)
    fmt = choose_loss_format("auto", tok, args)  # also sets completion_only_loss / assistant_only_loss on args
    if "input_ids" not in dataset.column_names:  # raw rows: TRL tokenises them; tokenised rows are used as they are
        dataset = Dataset.from_list(to_training_rows(dataset.to_list(), fmt, False))
    trainer = PaTaRMSFTTrainer(model=model, args=args, processing_class=tok, train_dataset=dataset)
    trainer.remove_callback(PrinterCallback)
    return trainer


def epoch_order(lengths: list[int], strategy: str, seed: int) -> list[int]:
    """One epoch's row order as the Trainer's sampler for `strategy` draws it."""
    from transformers.trainer_pt_utils import LengthGroupedSampler

    generator = torch.Generator().manual_seed(seed)
    if strategy == "group_by_length":
        return list(LengthGroupedSampler(BATCH, lengths=lengths, generator=generator))
    return torch.randperm(len(lengths), generator=generator).tolist()


def batches(order: list[int]) -> list[list[int]]:
    return [order[i:i + BATCH] for i in range(0, len(order), BATCH)]


def useful_share(lengths: list[int], strategy: str) -> float:
    """Real tokens / padded positions over one epoch in the sampler's order, the mean of 5 seeds."""
    return statistics.mean(sum(lengths) / sum(len(b) * max(lengths[k] for k in b)
                                              for b in batches(epoch_order(lengths, strategy, seed)))
                           for seed in range(5))


def run_mode(tokenized: Dataset, strategy: str, ns, texts: list[str]) -> dict:
    """Train on `ns.steps` batches taken evenly through one epoch in the order of `strategy` (seed 0), in that
    order; the epoch's time is projected from theirs (a systematic sample of its batches)."""
    lengths = [len(x) for x in tokenized["input_ids"]]
    epoch = batches(epoch_order(lengths, strategy, 0))
    n = min(ns.steps, len(epoch))
    picked = [epoch[min(round(i * len(epoch) / n), len(epoch) - 1)] for i in range(n)]
    picked = [b for b in picked if len(b) == BATCH]
    trainer = trainer_for(tokenized.select([k for b in picked for k in b]), "sequential", ns.max_length, ns.model,
                          texts)
    clock = StepTimer()
    trainer.add_callback(clock)
    shapes: list[tuple[int, int]] = []
    collate = trainer.data_collator

    def recording(features):
        batch = collate(features)
        shapes.append(tuple(batch["input_ids"].shape))
        return batch

    trainer.data_collator = recording
    trainer.train()
    positions = [n * width for n, width in shapes]
    expected = [BATCH * max(lengths[k] for k in b) for b in picked]
    if positions != expected:
        sys.exit(f"bench/sft_length_grouping.py: the batches trained ({positions}) are not the ones picked "
                 f"({expected}): the trainer reordered or cut the rows")
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"step_s": clock.times, "positions": positions, "seconds": sum(clock.times),
            "epoch_batches": len(epoch), "epoch_positions": sum(len(b) * max(lengths[k] for k in b) for b in epoch),
            "epoch_s": sum(clock.times) * len(epoch) / len(picked), "mean_loss": statistics.mean(losses)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, type=Path,
                        help="an SFT corpus (`{run_dir}/prep/pointwise/sft.jsonl` of a recipe run)")
    parser.add_argument("--steps", type=int, default=12, help="batches timed per mode, taken evenly through an epoch")
    parser.add_argument("--max_length", type=int, default=640, help="SFT's max_length (the recipe's: prompt + "
                        "judgment budget + 16)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--modes", nargs=2, default=["random", "group_by_length"],
                        choices=["random", "group_by_length"], help="the order the two modes run in (run both "
                        "orders to see whether the first pays for the second's warm-up)")
    parser.add_argument("--model", default="smollm2", help="model spec (the recipes' smollm2; `tiny` for a smoke run)")
    ns = parser.parse_args()
    if sorted(ns.modes) != ["group_by_length", "random"]:
        parser.error("--modes: give both modes, random and group_by_length, in the order to run them")
    if not ns.corpus.is_file():
        fail(f"bench/sft_length_grouping.py: --corpus {ns.corpus}: no such file; pass a recipe run's "
                 "prep/pointwise/sft.jsonl (e.g. from `patarm quickstart --recipe gsm8k-skill`)")
    torch.set_num_threads(ns.threads)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
          f"{ns.threads}, torch {torch.__version__}; load average {os.getloadavg()[0]:.2f}", flush=True)
    corpus = read_rows(ns.corpus)
    texts = [m["content"] for r in corpus for m in r["messages"]]
    warm = trainer_for(Dataset.from_list(corpus), "sequential", ns.max_length, ns.model, texts)  # tokenises
    tokenized = warm.train_dataset
    lengths = [len(x) for x in tokenized["input_ids"]]
    warm.args.max_steps = 1
    warm.train()  # one step warms the kernels up
    del warm
    share = {s: useful_share(lengths, s) for s in ("random", "group_by_length")}
    print(f"corpus: {len(corpus)} rows, {len(lengths)} after TRL's preparation, tokens per row mean "
          f"{statistics.mean(lengths):.0f}, min {min(lengths)}, max {max(lengths)}; real tokens / padded positions "
          f"over an epoch (batch {BATCH}, 5 seeds): random {share['random']:.3f}, length-grouped "
          f"{share['group_by_length']:.3f}", flush=True)
    results = {}
    for strategy in ns.modes:
        r = results[strategy] = run_mode(tokenized, strategy, ns, texts)
        print(f"{strategy:<16} {len(r['positions'])} of the epoch's {r['epoch_batches']} batches: {r['seconds']:.1f} s "
              f"(median {statistics.median(r['step_s']):.2f} s/step), {sum(r['positions'])} padded positions, "
              f"{1000 * r['seconds'] / sum(r['positions']):.4f} s per 1k; epoch {r['epoch_positions']} positions, "
              f"projected {r['epoch_s']:.0f} s; mean loss {r['mean_loss']:.3f}", flush=True)
    rnd, grp = results["random"], results["group_by_length"]
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print(f"useful_share_random={share['random']:.3f}")
    print(f"useful_share_grouped={share['group_by_length']:.3f}")
    print(f"epoch_positions_ratio={grp['epoch_positions'] / rnd['epoch_positions']:.3f}")
    print(f"s_per_kposition_random={1000 * rnd['seconds'] / sum(rnd['positions']):.4f}")
    print(f"s_per_kposition_grouped={1000 * grp['seconds'] / sum(grp['positions']):.4f}")
    print(f"sft_group_speedup={rnd['epoch_s'] / grp['epoch_s']:.2f}")


if __name__ == "__main__":
    main()
