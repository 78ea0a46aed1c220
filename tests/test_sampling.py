"""The pair-preserving sampler keeps every pair whole in every reward call, for any process count."""

import pytest
from accelerate.data_loader import BatchSamplerShard
from torch.utils.data import BatchSampler

from patarm.rewards import group_pairs
from patarm.sampling import PairRepeatSampler, check_pair_batching, pairs_from_columns


def _dataset(n_pairs, shuffled_rows=True):
    """pair_id/side columns for n pairs; rows deliberately not adjacent to test index mapping."""
    ids, sides = [], []
    for i in range(n_pairs):
        ids += [f"p{i}", f"p{i}"]
        sides += ["chosen", "rejected"]
    if shuffled_rows:  # rejected rows first for odd pairs, and all rows reversed
        ids, sides = ids[::-1], sides[::-1]
    return ids, sides


@pytest.mark.parametrize("num_processes", [1, 2, 4, 8])
@pytest.mark.parametrize("G, per_device, spg", [(2, 4, 1), (4, 8, 1), (4, 4, 2), (8, 16, 1), (3, 6, 2), (1, 2, 3)])
def test_every_reward_call_holds_whole_pairs(num_processes, G, per_device, spg):
    check_pair_batching(per_device, spg, G)
    ids, sides = _dataset(40)
    generation_batch_size = per_device * spg * num_processes
    sampler = PairRepeatSampler(pairs_from_columns(ids, sides), mini_repeat_count=G,
                                batch_size=generation_batch_size // G, repeat_count=spg, seed=3)
    local = per_device * spg  # TRL's train dataloader batch: one reward call per process
    seen_pairs = set()
    for rank in range(num_processes):
        shard = BatchSamplerShard(BatchSampler(sampler, local, drop_last=False), num_processes, rank)
        for batch in shard:
            assert len(batch) == local
            groups = group_pairs([ids[i] for i in batch], [sides[i] for i in batch])  # raises if split
            for c, r in groups.values():
                assert len(c) == len(r) and len(c) % G == 0
            seen_pairs.update(groups)
    assert len(seen_pairs) == (40 // (generation_batch_size // G // 2)) * (generation_batch_size // G // 2)


def test_layout_matches_trl_repeat_sampler():
    ids, sides = ["a", "a", "b", "b"], ["chosen", "rejected", "chosen", "rejected"]
    sampler = PairRepeatSampler(pairs_from_columns(ids, sides), mini_repeat_count=2, batch_size=2,
                                repeat_count=2, shuffle=False)
    assert list(sampler) == [0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3]
    assert len(sampler) == 16


def test_seeded_order_is_reproducible_and_epoch_dependent():
    pairs = [(2 * i, 2 * i + 1) for i in range(50)]
    a = PairRepeatSampler(pairs, 2, 4, seed=7)
    b = PairRepeatSampler(pairs, 2, 4, seed=7)
    assert list(a) == list(b)
    b.set_epoch(1)
    assert list(a) != list(b)
    assert sorted(set(a)) == list(range(100))


def test_batch_arithmetic_is_checked():
    with pytest.raises(ValueError, match="not a multiple of 2 × num_generations = 8"):
        check_pair_batching(per_device_train_batch_size=4, steps_per_generation=1, num_generations=4)
    with pytest.raises(ValueError, match="must be even"):
        PairRepeatSampler([(0, 1)], 2, batch_size=3)


def test_malformed_pair_columns():
    with pytest.raises(ValueError, match="lack a chosen or rejected"):
        pairs_from_columns(["a", "b"], ["chosen", "chosen"])
    with pytest.raises(ValueError, match="two 'chosen' rows"):
        pairs_from_columns(["a", "a"], ["chosen", "chosen"])
    with pytest.raises(ValueError, match="must be 'chosen' or 'rejected'"):
        pairs_from_columns(["a"], ["winner"])
