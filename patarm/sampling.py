"""The pair-preserving sampler (PaTaRM Appendix F, "PairRandomSampler") for TRL's GRPOTrainer.

Every preference pair is two judge prompts (dataset columns `pair_id`, `side`). PAR needs all 2·G
rollouts of a pair — G for the chosen side, G for the rejected — in the same reward call, on every
process. TRL's `RepeatSampler` shuffles prompts independently and so splits pairs. This sampler
keeps TRL's layout (each index repeated G times, each generation batch repeated for
`steps_per_generation × num_iterations` steps) but shuffles *pairs* and emits a pair's two sides
adjacently:  c0×G, r0×G, c1×G, r1×G, …

Accelerate gives each process a contiguous block of `per_device_train_batch_size ×
steps_per_generation` indices, and TRL scores each process's block in one reward call, so a block
that is a multiple of 2·G holds whole pairs only. `check_pair_batching` enforces that up front.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import Sampler


def check_pair_batching(per_device_train_batch_size: int, steps_per_generation: int, num_generations: int) -> None:
    """Raise a clear error unless every process's generation batch holds whole pairs (the same rule for any
    number of processes: each process is handed a contiguous block of this size)."""
    local = per_device_train_batch_size * steps_per_generation
    if num_generations < 1:
        raise ValueError(f"num_generations must be >= 1, got {num_generations}")
    if local % (2 * num_generations):
        raise ValueError(
            f"per_device_train_batch_size × steps_per_generation = {per_device_train_batch_size} × "
            f"{steps_per_generation} = {local} rollouts per process per reward call, which is not a multiple "
            f"of 2 × num_generations = {2 * num_generations}: the two sides of a pair (each with "
            f"num_generations rollouts) would be split across reward calls or processes. Choose e.g. "
            f"per_device_train_batch_size = {2 * num_generations}, or steps_per_generation = "
            f"{steps_per_generation * 2 * num_generations // math.gcd(local, 2 * num_generations)}."
        )


def pairs_from_columns(pair_ids: Sequence, sides: Sequence[str]) -> list[tuple[int, int]]:
    """(chosen_row, rejected_row) for each pair, in first-seen order; raises on malformed pairs."""
    found: dict = {}
    for row, (pid, side) in enumerate(zip(pair_ids, sides, strict=True)):
        if side not in ("chosen", "rejected"):
            raise ValueError(f"row {row}: column 'side' must be 'chosen' or 'rejected', got {side!r}")
        slot = found.setdefault(pid, [None, None])
        k = 0 if side == "chosen" else 1
        if slot[k] is not None:
            raise ValueError(f"rows {slot[k]} and {row}: pair {pid!r} has two '{side}' rows")
        slot[k] = row
    incomplete = [pid for pid, (c, r) in found.items() if c is None or r is None]
    if incomplete:
        raise ValueError(
            f"{len(incomplete)} pair(s) lack a chosen or rejected row, e.g. {incomplete[0]!r}: every pair_id "
            "needs exactly one 'chosen' and one 'rejected' row"
        )
    return [(c, r) for c, r in found.values()]


class PairRepeatSampler(Sampler[int]):
    """TRL's `RepeatSampler` layout, shuffled by pair, with both sides of a pair adjacent.

    Args:
        pairs: (chosen_row, rejected_row) dataset indices of each pair.
        mini_repeat_count: rollouts per prompt (G, `num_generations`).
        batch_size: unique prompts per generation batch (`generation_batch_size // G`); must be even.
        repeat_count: times each generation batch is repeated (`num_iterations × steps_per_generation`).
        shuffle, seed: pair order is a seeded permutation of (seed, epoch), so it is the same on every
            process and after a resume.
    """

    def __init__(self, pairs: Sequence[tuple[int, int]], mini_repeat_count: int, batch_size: int = 2,
                 repeat_count: int = 1, shuffle: bool = True, seed: int = 0):
        if batch_size % 2:
            raise ValueError(f"batch_size (unique prompts per generation batch) must be even, got {batch_size}")
        self.pairs = list(pairs)
        self.mini_repeat_count, self.batch_size, self.repeat_count = mini_repeat_count, batch_size, repeat_count
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.pairs_per_batch = batch_size // 2

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def pair_order(self) -> list[int]:
        """Positions in `self.pairs`, in the order this epoch visits them."""
        if not self.shuffle:
            return list(range(len(self.pairs)))
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return torch.randperm(len(self.pairs), generator=generator).tolist()

    def __iter__(self) -> Iterator[int]:
        order = self.pair_order()
        n_batches = len(order) // self.pairs_per_batch  # a last, partial batch is dropped, as TRL does
        for b in range(n_batches):
            chunk = order[b * self.pairs_per_batch:(b + 1) * self.pairs_per_batch]
            rows = [row for p in chunk for row in self.pairs[p]]
            for _ in range(self.repeat_count):
                for row in rows:
                    yield from [row] * self.mini_repeat_count

    def __len__(self) -> int:
        return (len(self.pairs) // self.pairs_per_batch) * self.batch_size * self.mini_repeat_count * self.repeat_count
