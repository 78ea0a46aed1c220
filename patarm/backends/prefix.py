"""Prefix-shared batched generation for local transformers models: prompts that start alike are prefilled once.

A judge's prompts repeat themselves: the same system prompt and question before each of a problem's candidate
responses, the same whole prompt for each of n samples. `plan_batches` sorts the tokenised prompts so that rows
with a common start are neighbours, cuts them into segments that each share a prefix (a dynamic programme over
the sorted order that maximises the prefill tokens saved), and packs the segments into batches of rows.
`generate_batch` prefills each segment's prefix once, copies its KV cache to the segment's rows
(transformers' `Cache.reorder_cache`) and lets `generate` continue from there with the rest of each prompt:

    [pad … prefix of the segment][pad … the row's own suffix] → generate

Rows are padded on the left within each part; the attention mask covers both gaps, and positions come from the
mask (`cumsum − 1`) as `generate` computes them for left-padded rows, so every row sees its own prompt at its
own positions. Greedy texts equal plain batched generation's up to floating-point rounding (the sums run in
another order); sampled texts are another seeded draw.

With `drop_every` = k, `generate` pauses every k new tokens and the rows that have ended leave the batch (their
KV-cache rows dropped), so a batch stops decoding rows that are done instead of running every row until its
longest ends; the rest continue from the cache `generate` returned.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# A segment shares its prefix only if that saves at least this many prefill tokens (below it, plain rows).
MIN_SAVED_TOKENS = 32


@dataclass
class Segment:
    rows: list[int]  # indices into the token lists
    prefix: int  # tokens of each row prefilled once for the segment (0: none; always < every row's length)


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def plan_segments(tokens: Sequence[Sequence[int]], max_rows: int) -> list[Segment]:
    """Rows cut into segments of at most `max_rows` rows that each share a prefix, maximising the prefill
    tokens saved ((rows − 1) × prefix per segment); every row is in exactly one segment."""
    order = sorted(range(len(tokens)), key=lambda i: tuple(tokens[i]))
    n = len(order)
    adjacent = [_common(tokens[order[k]], tokens[order[k + 1]]) for k in range(n - 1)]
    best = [0] * (n + 1)  # best[k]: tokens saved by the best cut of order[:k]
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        best[end], cut[end] = best[end - 1], end - 1  # order[end-1] alone
        shared, shortest = len(tokens[order[end - 1]]), len(tokens[order[end - 1]])
        for start in range(end - 2, max(end - max_rows, 0) - 1, -1):
            shared = min(shared, adjacent[start])
            shortest = min(shortest, len(tokens[order[start]]))
            prefix = min(shared, shortest - 1)
            saved = (end - start - 1) * prefix if prefix * (end - start - 1) >= MIN_SAVED_TOKENS else 0
            if best[start] + saved > best[end]:
                best[end], cut[end] = best[start] + saved, start
    segments, end = [], n
    while end > 0:
        start = cut[end]
        rows = [order[k] for k in range(start, end)]
        prefix = 0
        if len(rows) > 1:
            prefix = min(min(adjacent[start:end - 1]), min(len(tokens[r]) for r in rows) - 1)
            prefix = prefix if prefix * (len(rows) - 1) >= MIN_SAVED_TOKENS else 0
        segments.append(Segment(rows, prefix))
        end = start
    return segments[::-1]


def plan_batches(tokens: Sequence[Sequence[int]], batch_size: int, share: bool = True) -> list[list[Segment]]:
    """Batches of at most `batch_size` rows made of whole segments, segments of like suffix length together (the
    padding stays small); with `share` off, every row is its own segment, sorted by length (plain batching)."""
    if share:
        segments = plan_segments(tokens, batch_size)
    else:
        segments = [Segment([i], 0) for i in range(len(tokens))]
    segments.sort(key=lambda s: max(len(tokens[r]) - s.prefix for r in s.rows))
    batches: list[list[Segment]] = []
    rows = 0
    for seg in segments:
        if not batches or rows + len(seg.rows) > batch_size:
            batches.append([])
            rows = 0
        batches[-1].append(seg)
        rows += len(seg.rows)
    return batches


def _prefixes(tokens: Sequence[Sequence[int]], batch: list[Segment]) -> list[int] | None:
    """Tokens prefilled once per segment of a batch, or None for a plain left-padded batch (nothing shared). A
    segment without a shared prefix (one row) prefills its first token with the others, so no row is empty."""
    if not any(seg.prefix for seg in batch) or min(len(tokens[r]) for seg in batch for r in seg.rows) < 2:
        return None
    assert all(seg.prefix or len(seg.rows) == 1 for seg in batch), "plan_segments shares within every segment"
    return [max(seg.prefix, 1) for seg in batch]


def padded_prefill(tokens: Sequence[Sequence[int]], batch: list[Segment]) -> int:
    """Prompt positions `generate_batch` runs for one batch, padding included (the prefill's cost)."""
    rows = [r for seg in batch for r in seg.rows]
    prefixes = _prefixes(tokens, batch)
    if prefixes is None:
        return len(rows) * max(len(tokens[r]) for r in rows)
    tail = max(len(tokens[r]) - p for seg, p in zip(batch, prefixes) for r in seg.rows)
    return len(batch) * max(prefixes) + len(rows) * tail


def cache_argument(model: Any) -> str:
    """The keyword a model's forward takes its KV cache by: `cache` (transformers >= 5.24) or `past_key_values`."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"


def _left_pad(rows: list[Sequence[int]], pad_id: int, width: int) -> tuple[Any, Any]:
    import torch

    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row):] = torch.tensor(list(row), dtype=torch.long)
            mask[i, width - len(row):] = 1
    return ids, mask


def generate_batch(model: Any, tokens: Sequence[Sequence[int]], batch: list[Segment], pad_id: int,
                   drop_every: int = 0, **generate_kwargs: Any) -> tuple[list[int], Any]:
    """Generate for the rows of one planned batch; returns (row indices, new tokens [rows, new]) in that order.
    With `drop_every` = k > 0, decoding pauses every k new tokens and rows that have ended leave the batch (their
    KV cache rows dropped, `Cache.reorder_cache`), so a batch no longer decodes every row until its longest ends."""
    import torch
    from transformers import DynamicCache

    rows = [r for seg in batch for r in seg.rows]
    device = model.device
    width = max(len(tokens[r]) for r in rows)
    prefixes = _prefixes(tokens, batch)
    name = cache_argument(model)
    if prefixes is None:  # plain left-padded batch
        ids, mask = _left_pad([tokens[r] for r in rows], pad_id, width)
        ids, mask, cache = ids.to(device), mask.to(device), None
    else:
        heads = [list(tokens[seg.rows[0]][:p]) for seg, p in zip(batch, prefixes)]
        head_ids, head_mask = _left_pad(heads, pad_id, max(len(h) for h in heads) or 1)
        owner = torch.tensor([k for k, seg in enumerate(batch) for _ in seg.rows], dtype=torch.long, device=device)
        tails = [list(tokens[r][p:]) for seg, p in zip(batch, prefixes) for r in seg.rows]
        tail_ids, tail_mask = _left_pad(tails, pad_id, max(len(t) for t in tails))
        cache = DynamicCache(config=model.config)
        head_ids, head_mask = head_ids.to(device), head_mask.to(device)
        with torch.no_grad():
            # positions as `generate` gives left-padded rows, so the cached keys line up with the suffix and decode
            model(input_ids=head_ids, attention_mask=head_mask,
                  position_ids=(head_mask.cumsum(-1) - 1).clamp(min=0), use_cache=True, **{name: cache})
        cache.reorder_cache(owner)  # every row continues from its segment's prefill
        ids = torch.cat([head_ids[owner], tail_ids.to(device)], dim=1)
        mask = torch.cat([head_mask[owner], tail_mask.to(device)], dim=1)
    return rows, _decode(model, ids, mask, cache, pad_id, drop_every, name, generate_kwargs)


def _stop_ids(model: Any, generate_kwargs: dict) -> set[int]:
    eos = generate_kwargs.get("eos_token_id", model.generation_config.eos_token_id)
    return set(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])


def _decode(model: Any, ids: Any, mask: Any, cache: Any, pad_id: int, drop_every: int, name: str,
            generate_kwargs: dict) -> Any:
    """`generate` from (ids, mask[, a KV cache of all but the prompts' last tokens]); the new tokens [rows, new],
    right-padded with `pad_id` where a row ended early. Rows that ended leave the batch every `drop_every` tokens."""
    import torch

    total = generate_kwargs.pop("max_new_tokens", None) or model.generation_config.max_new_tokens or 20
    step = drop_every if 0 < drop_every < total else total
    stop_ids = sorted(_stop_ids(model, generate_kwargs))
    stop = torch.tensor(stop_ids, dtype=torch.long, device=ids.device) if stop_ids else None
    live = torch.arange(ids.size(0), device=ids.device)  # the batch rows still decoding
    new = torch.full((ids.size(0), total), pad_id, dtype=torch.long, device=ids.device)
    made = 0
    while made < total and live.numel():
        chunk = min(step, total - made)
        extra = {name: cache} if cache is not None else {}
        out = model.generate(input_ids=ids, attention_mask=mask, pad_token_id=pad_id, max_new_tokens=chunk,
                             return_dict_in_generate=True, **extra, **generate_kwargs)
        got = out.sequences[:, ids.size(1):]
        new[live, made:made + got.size(1)] = got
        made += got.size(1)
        if got.size(1) < chunk:  # every row ended within the chunk
            break
        ended = torch.isin(got, stop).any(-1) if stop is not None else torch.zeros_like(got[:, 0], dtype=torch.bool)
        keep = (~ended).nonzero().squeeze(-1)
        cache = getattr(out, "cache", None) or out.past_key_values
        if keep.numel() < got.size(0):
            cache.reorder_cache(keep)
        live, ids = live[keep], out.sequences[keep]
        mask = torch.cat([mask[keep], torch.ones_like(got[keep])], dim=1)
    return new[:, :made]
