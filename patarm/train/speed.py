"""Speed switches of the training stages. Each is on by default only where `bench/mfu.py` measured that it pays
(docs/real-models.md has the figures); none changes what is computed, only how often and where.

- **Compact LM head** (SFT and GRPO): TRL's fused LM head projects only the positions that carry a label — the
  judgment, not the judge prompt — on Triton devices, but every position elsewhere. On a CPU, with judge prompts
  of ~300 tokens and judgments of ~40, most of the LM head's work (a 49k-word vocabulary on SmolLM2) went to
  logits that were thrown away. `compact_lm_head()` makes TRL take its compact path on CPUs too (on XLA/Neuron
  devices it keeps TRL's fixed shapes, which avoid recompilation).
- **CPU fused head** (GRPO, `cpu_lm_head`, off by default): TRL's fused LM head a token block at a time over the
  whole vocabulary on a CPU, instead of TRL's many-pass tile fallback (`patarm.train.lm_head`).
- **Shared-prefix loss** (GRPO, `shared_prefix_loss`): the G rollouts of one judge prompt are scored as one
  sequence `[prompt, rollout_1, ..., rollout_G]` with a block attention mask (each rollout sees the prompt and
  itself), so the prompt's forward and backward run once instead of G times. The log-probabilities and gradients
  are those of the G separate sequences (tests/train/test_speed.py checks both).
- **Shared-prefix rollouts** (GRPO, `shared_prefix_rollouts`): one prefill per distinct prompt; its G samples are
  decoded from copies of that KV cache (transformers' cache re-use in `generate`), not from G prefills.
- **Weights cast once per rollout batch** (GRPO, `rollout_cast_once`): under bf16/fp16 autocast, generation runs in
  one autocast region, so autocast's cast cache keeps the half-precision weights for every decoded token; otherwise
  each decode step's forward (its own autocast region) casts all weights again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from patarm.backends.prefix import cache_argument

# Attention implementations that accept a 4D mask and explicit position ids (flash-attention kernels do not).
BLOCK_MASK_ATTENTION = ("sdpa", "eager")


def compact_lm_head(enabled: bool = True) -> None:
    """Let TRL's fused LM head score only labelled positions on every device but XLA/Neuron (see module doc).
    Idempotent; `enabled=False` restores TRL's own choice."""
    import trl.trainer.utils as trl_utils
    from trl.kernels.chunked_logprob import _use_triton

    if not enabled:
        trl_utils._use_triton = _use_triton
        return

    @functools.wraps(_use_triton)
    def compact(device: torch.device) -> bool:
        return _use_triton(device) or torch.device(device).type in ("cpu", "cuda", "xpu", "mps")

    trl_utils._use_triton = compact


def attention_accepts_block_mask(model: Any) -> bool:
    config = getattr(model, "config", None)
    return getattr(config, "_attn_implementation", None) in BLOCK_MASK_ATTENTION


def prompt_groups(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[list[int]]:
    """Rows with the same (left-padded) prompt, as lists of row indices in first-seen order. The rows of a group
    need not be adjacent: TRL shuffles a generation batch's rows before it computes the loss."""
    if input_ids.size(0) == 0:
        return []
    _, inverse = torch.unique(torch.cat([input_ids, attention_mask.to(input_ids.dtype)], dim=1), dim=0,
                              return_inverse=True)
    groups: dict[int, list[int]] = {}
    for row, key in enumerate(inverse.tolist()):
        groups.setdefault(key, []).append(row)
    return list(groups.values())


def _pack_group(prompt: torch.Tensor, completions: torch.Tensor, completion_mask: torch.Tensor):
    """One group as a packed row: the prompt less its last token, then per rollout [last prompt token, rollout].
    Returns ids, position ids, shifted labels (-100 where nothing is scored) and each token's block (-1: prompt)."""
    n, lc = completions.shape
    lp = prompt.numel()
    head = prompt[:-1]
    blocks = torch.cat([prompt[-1:].expand(n, 1), completions], dim=1)  # (n, lc + 1)
    ids = torch.cat([head, blocks.reshape(-1)])
    pos = torch.cat([torch.arange(lp - 1), torch.arange(lp - 1, lp + lc).repeat(n)]).to(prompt.device)
    scored = completions.masked_fill(completion_mask == 0, -100)
    labels = torch.cat([torch.full((lp - 1,), -100, device=prompt.device),
                        torch.cat([scored, torch.full((n, 1), -100, device=prompt.device)], dim=1).reshape(-1)])
    block = torch.cat([torch.full((lp - 1,), -1), torch.arange(n).repeat_interleave(lc + 1)]).to(prompt.device)
    return ids, pos, labels, block


def shared_prefix_logps(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
                        compute_entropy: bool = False, max_rows: int | None = None,
                        autocast: Callable[[], Any] | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (and entropies) of the last `logits_to_keep` tokens of each row, as TRL's GRPO computes
    them, with each run of rows sharing a prompt scored in one packed sequence (see module doc). `model` has
    TRL's fused LM head (`fused_lm_head=True`). `max_rows` bounds the rollouts packed per forward."""
    import contextlib

    lc = logits_to_keep
    prompts, prompt_mask = input_ids[:, :-lc], attention_mask[:, :-lc]
    completions, completion_mask = input_ids[:, -lc:], attention_mask[:, -lc:]
    groups = prompt_groups(prompts, prompt_mask)
    chunks, current, rows = [], [], 0
    for g in groups:  # chunks of whole groups, at most max_rows rollouts each (a group larger than that alone)
        if current and max_rows and rows + len(g) > max_rows:
            chunks.append(current)
            current, rows = [], 0
        current.append(g)
        rows += len(g)
    chunks.append(current)
    out_logps, out_ent = [None] * input_ids.size(0), [None] * input_ids.size(0)
    for chunk in chunks:
        packed = [_pack_group(prompts[g[0]][prompt_mask[g[0]].bool()], completions[g], completion_mask[g])
                  for g in chunk]
        length = max(p[0].numel() for p in packed)
        b = len(packed)
        ids = input_ids.new_zeros(b, length)
        pos = input_ids.new_zeros(b, length)
        labels = input_ids.new_full((b, length), -100)
        mask = torch.eye(length, dtype=torch.bool, device=input_ids.device).repeat(b, 1, 1, 1)  # padding sees itself
        causal = torch.ones(length, length, dtype=torch.bool, device=input_ids.device).tril()
        for i, (x, p, y, block) in enumerate(packed):
            k = x.numel()
            ids[i, :k], pos[i, :k], labels[i, :k] = x, p, y
            visible = (block[:, None] == block[None, :]) | (block[None, :] == -1)
            mask[i, 0, :k, :k] = causal[:k, :k] & visible
        with autocast() if autocast else contextlib.nullcontext():
            out = model(input_ids=ids, attention_mask=mask, position_ids=pos, shift_labels=labels, fused_lm_head=True)
        for i, g in enumerate(chunk):
            head = packed[i][0].numel() - len(g) * (lc + 1)
            for j, r in enumerate(g):
                start = head + j * (lc + 1)
                out_logps[r] = out.log_probs[i, start:start + lc]
                if compute_entropy:
                    out_ent[r] = out.entropy[i, start:start + lc]
    logps = torch.stack(out_logps)
    entropies = torch.stack(out_ent) if compute_entropy else None
    return logps, entropies


def shared_prefix_generate(generate: Callable[..., Any], model: Any, input_ids: torch.Tensor | None = None,
                           attention_mask: torch.Tensor | None = None, **kwargs: Any) -> Any:
    """`generate` with one prefill per distinct prompt: identical (left-padded) rows are prefilled once (all but
    the last prompt token), the cache is copied to every row with that prompt, and `generate` continues from it.
    Falls back to plain `generate` when no two rows share a prompt or a cache is already given."""
    from transformers import DynamicCache

    if input_ids is None or attention_mask is None or input_ids.size(1) < 2 or "cache" in kwargs \
            or "past_key_values" in kwargs:
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    groups = prompt_groups(input_ids, attention_mask)
    if len(groups) == input_ids.size(0):
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    first = torch.tensor([g[0] for g in groups], device=input_ids.device)
    head_mask = attention_mask[first, :-1]
    cache, name = DynamicCache(config=model.config), cache_argument(model)
    with torch.no_grad():
        # the position ids `generate` gives left-padded rows, so the cached keys line up with the decoded ones
        model(input_ids=input_ids[first, :-1], attention_mask=head_mask,
              position_ids=(head_mask.long().cumsum(-1) - 1).clamp(min=0), use_cache=True, **{name: cache})
    owner = torch.empty(input_ids.size(0), dtype=torch.long, device=input_ids.device)
    for i, g in enumerate(groups):
        owner[g] = i
    cache.reorder_cache(owner)  # row r continues from its group's prefill
    return generate(input_ids=input_ids, attention_mask=attention_mask, **{name: cache}, **kwargs)


