"""Prefix-shared generation (`patarm.backends.prefix`): the plan covers every row once and saves the shared
prefill, and the texts equal plain batched generation's."""

import random

import pytest

from patarm.backends import GenerationOptions
from patarm.backends.hf import HFBackend
from patarm.backends.prefix import generate_batch, plan_batches, plan_segments

SYSTEM = "you judge responses to questions carefully and give a score from one to ten at the end"


def test_the_plan_covers_every_row_once_and_shares_what_rows_share():
    rng = random.Random(0)
    system = list(range(1, 41))
    tokens = []
    for q in range(5):  # 5 questions × 4 candidates, and 2 rows repeated (samples of one prompt)
        question = [100 + q] * 20
        tokens += [system + question + [rng.randrange(200, 300) for _ in range(rng.randrange(5, 30))]
                   for _ in range(4)]
    tokens += [tokens[0], tokens[0], [7, 8]]
    segments = plan_segments(tokens, max_rows=8)
    assert sorted(r for s in segments for r in s.rows) == list(range(len(tokens)))
    for s in segments:
        assert all(s.prefix < len(tokens[r]) for r in s.rows)
        assert all(tokens[r][:s.prefix] == tokens[s.rows[0]][:s.prefix] for r in s.rows)
        assert len(s.rows) <= 8
    saved = sum((len(s.rows) - 1) * s.prefix for s in segments)
    assert saved >= 5 * 3 * 60  # at least each question's candidates share system + question
    batches = plan_batches(tokens, batch_size=6)
    assert all(sum(len(s.rows) for s in b) <= 6 for b in batches)
    assert sorted(r for b in batches for s in b for r in s.rows) == list(range(len(tokens)))
    plain = plan_batches(tokens, batch_size=6, share=False)
    assert all(s.prefix == 0 and len(s.rows) == 1 for b in plain for s in b)


@pytest.fixture(scope="module")
def tiny():
    import torch

    from patarm.models.tiny import build_tiny_judge

    texts = [f"{SYSTEM} question {q} answer {a} <score>{a}</score>" for q in range(20) for a in range(10)]
    model, tokenizer = build_tiny_judge(texts, vocab_size=400, hidden_size=64, num_layers=2, num_heads=4,
                                        num_kv_heads=2, intermediate_size=128)
    torch.manual_seed(0)
    with torch.no_grad():  # weights wide enough that the next token depends on every position of the context
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3)
    return model, tokenizer


def _prompts():
    rng = random.Random(1)
    words = ["apples", "seven", "trains", "the", "answer", "is", "because", "twelve", "minus", "plus"]
    prompts = []
    for q in range(4):
        question = f"{SYSTEM}. question {q}: " + " ".join(rng.choice(words) for _ in range(12))
        for _ in range(3):
            response = " ".join(rng.choice(words) for _ in range(rng.randrange(2, 15)))
            prompts.append([{"role": "user", "content": f"{question}\nresponse: {response}"}])
    prompts.append([{"role": "user", "content": "short"}])  # shares nothing but the template
    return prompts


@pytest.mark.parametrize("batch_size", [4, 16])
def test_shared_prefix_texts_equal_plain_batched_generation(tiny, batch_size):
    model, tokenizer = tiny
    prompts = _prompts()
    texts = {}
    for share in (False, True):
        options = GenerationOptions(max_new_tokens=8, batch_size=batch_size, share_prefixes=share)
        texts[share] = HFBackend(model.eval(), tokenizer, options, model_id="tiny").generate(prompts, num_samples=2)
    assert texts[True] == texts[False]
    assert all(len(row) == 2 and row[0] == row[1] for row in texts[True])  # greedy: both samples alike
    assert len({row[0] for row in texts[True]}) > len(prompts) // 2  # the texts depend on the prompt
    tokens = tokenizer([HFBackend(model, tokenizer).render(p) for p in prompts], add_special_tokens=False)
    segments = plan_segments(tokens["input_ids"] * 2, max_rows=batch_size)
    assert sum((len(s.rows) - 1) * s.prefix for s in segments) > 0  # the shared path did run


@pytest.mark.parametrize("share", [False, True])
def test_rows_that_ended_leave_the_batch_and_the_texts_stay(tiny, share):
    import collections

    import torch

    model, tokenizer = tiny
    backend = HFBackend(model.eval(), tokenizer, model_id="tiny")
    tokens = tokenizer([backend.render(p) for p in _prompts()], add_special_tokens=False)["input_ids"]
    (batch,) = plan_batches(tokens, batch_size=16, share=share)
    pad = tokenizer.pad_token_id

    def run(drop_every, eos):
        with torch.no_grad():
            rows, new = generate_batch(model, tokens, batch, pad, drop_every=drop_every, max_new_tokens=10,
                                       do_sample=False, eos_token_id=eos)
        return {r: [t for t in row if t != pad] for r, row in zip(rows, new.tolist())}

    free = run(0, [])  # no stop token: every row runs to the limit
    counts = collections.Counter(t for row in free.values() for t in row[1:6])
    eos = next(t for t, _ in counts.most_common() if t != pad)  # a token some rows reach early, some never
    plain = run(0, [eos])
    ended = {r for r, row in plain.items() if len(row) < 10}
    assert 0 < len(ended) < len(plain) and min(len(row) for row in plain.values()) <= 6
    assert run(2, [eos]) == plain  # dropped every 2 tokens: the same tokens for every row
    assert run(3, [eos]) == plain


def test_the_cpu_decode_attention_equals_transformers_sdpa():
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from patarm.models.attention import _cpu_decode_sdpa

    module = torch.nn.Module()
    module.num_key_value_groups, module.is_causal = 3, True
    torch.manual_seed(0)
    query, key, value = torch.randn(4, 6, 1, 16), torch.randn(4, 2, 40, 16), torch.randn(4, 2, 40, 16)
    ours, _ = _cpu_decode_sdpa(module, query, key, value, None, scaling=0.25)
    theirs, _ = sdpa_attention_forward(module, query, key, value, None, scaling=0.25)
    assert ours.shape == theirs.shape
    torch.testing.assert_close(ours, theirs)
    longer = torch.randn(4, 6, 5, 16)  # prefill / training: passed through as is
    torch.testing.assert_close(_cpu_decode_sdpa(module, longer, key, value, None, scaling=0.25)[0],
                               sdpa_attention_forward(module, longer, key, value, None, scaling=0.25)[0])
