"""Tiny offline Qwen3 judges: determinism, save/load round trip, tokenizer, chat template, assistant masks."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from patarm.models.tiny import (
    DEFAULT_SPECIAL_TAGS,
    build_tiny_judge,
    build_tiny_qwen3,
    build_tokenizer,
    load_judge,
    qwen3_chat_template,
)

WORDS = (
    "the response follows instruction rubric score judge better worse because lowercase uppercase words "
    "count ends with starts letter constraint satisfied violated evidence answer question"
).split()

UNICODE_SAMPLES = [
    "héllo wörld — naïve façade",
    "日本語のテキスト and 中文 mixed with English",
    "emoji 🤖🧑‍⚖️ and math ∑ √2 ≈ 1.414, Ω",
    "e\u0301 (not NFC) and zero\u200bwidth and tab\tnew\nline  double  space",
    "  leading spaces, trailing spaces   ",
    "<score>7</score> inline <thinking> not a tag </think2>",
    "Кириллица, ελληνικά, עברית, العربية",
]


def _corpus(n: int = 120, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 24)))
        texts.append(f"<rubric>{words}</rubric>\n<eval>{words}.</eval>\n<score>{rng.randint(1, 10)}</score>")
    return texts


TEXTS = _corpus()
PROMPT = [{"role": "user", "content": "Judge the <response>the answer is lowercase</response> now."}]


@pytest.fixture(scope="module")
def judge():
    return build_tiny_judge(TEXTS, seed=0)


@pytest.fixture(scope="module")
def tokenizer(judge):
    return judge[1]


def _trl_template_dir() -> Path:
    import trl

    return Path(trl.__file__).parent / "chat_templates"


# ----------------------------------------------------------------------------------------------------- determinism


def test_same_seed_same_weights_and_tokenizer(tokenizer):
    tok2 = build_tokenizer(TEXTS)
    assert tok2.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()
    assert tok2.get_vocab() == tokenizer.get_vocab()

    a = build_tiny_qwen3(tokenizer, seed=0).state_dict()
    b = build_tiny_qwen3(tok2, seed=0).state_dict()
    c = build_tiny_qwen3(tokenizer, seed=1).state_dict()
    assert a.keys() == b.keys() == c.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["model.embed_tokens.weight"], c["model.embed_tokens.weight"])
    assert any(not torch.equal(a[k], c[k]) for k in a if "layers.0.self_attn.q_proj" in k)


def test_model_config_and_type(judge):
    from transformers import Qwen3ForCausalLM

    model, tok = judge
    assert isinstance(model, Qwen3ForCausalLM)
    cfg = model.config
    assert cfg.vocab_size == len(tok)
    assert cfg.head_dim == cfg.hidden_size // cfg.num_attention_heads == 16
    assert cfg.intermediate_size == 3 * cfg.hidden_size
    assert cfg.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>") == tok.eos_token_id
    assert cfg.pad_token_id == tok.convert_tokens_to_ids("<|endoftext|>") == tok.pad_token_id
    assert cfg.bos_token_id == tok.convert_tokens_to_ids("<|endoftext|>")
    eos = model.generation_config.eos_token_id
    assert tok.convert_tokens_to_ids("<|im_end|>") in (eos if isinstance(eos, list) else [eos])
    assert model.generation_config.pad_token_id == tok.pad_token_id
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight  # tied


def test_parameter_count_scales_with_hidden_size(tokenizer):
    def n_params(m):
        return sum(p.numel() for p in m.parameters())

    counts = {h: n_params(build_tiny_qwen3(tokenizer, hidden_size=h, num_heads=4, num_kv_heads=2)) for h in (32, 64)}
    assert counts[32] < counts[64]
    # Exact count for tied embeddings: embedding + per layer (q, k, v, o, q/k norms, 3 MLP mats, 2 RMSNorms)
    # + final norm
    v, n_layers, heads, kv = len(tokenizer), 2, 4, 2
    for h, got in counts.items():
        hd, inter = h // heads, 3 * h
        layer = h * heads * hd + 2 * h * kv * hd + heads * hd * h + 2 * hd + 3 * h * inter + 2 * h
        assert got == v * h + n_layers * layer + h
    untied = n_params(build_tiny_qwen3(tokenizer, tie_word_embeddings=False))
    assert untied == counts[64] + len(tokenizer) * 64


# ------------------------------------------------------------------------------------------------------ tokenizer


def test_tags_are_single_tokens(tokenizer):
    for tag in DEFAULT_SPECIAL_TAGS + ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]:
        ids = tokenizer.encode(tag, add_special_tokens=False)
        assert len(ids) == 1, (tag, tokenizer.convert_ids_to_tokens(ids))
        assert tokenizer.convert_ids_to_tokens(ids) == [tag]
    ids = tokenizer.encode("x<score>7</score>y", add_special_tokens=False)
    assert tokenizer.convert_tokens_to_ids("<score>") in ids and tokenizer.convert_tokens_to_ids("</score>") in ids
    # tags are ordinary added tokens: kept when special tokens are skipped
    assert tokenizer.decode(ids, skip_special_tokens=True) == "x<score>7</score>y"
    assert set(DEFAULT_SPECIAL_TAGS).isdisjoint(tokenizer.all_special_tokens)


def test_unicode_lossless_byte_level(tokenizer):
    assert tokenizer.unk_token is None
    for text in UNICODE_SAMPLES:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.decode(ids) == text
    assert tokenizer.padding_side == "left"
    lengths = [len(tokenizer.encode(t, add_special_tokens=False)) for t in UNICODE_SAMPLES[:2]]
    batch = tokenizer(UNICODE_SAMPLES[:2], padding=True, add_special_tokens=False)
    short = lengths.index(min(lengths))
    assert lengths[0] != lengths[1] and batch["input_ids"][short][0] == tokenizer.pad_token_id
    assert len(tokenizer) <= 1024 + len(DEFAULT_SPECIAL_TAGS)


def test_vocab_size_and_padding_side_arguments():
    tok = build_tokenizer(_corpus(300, seed=1), vocab_size=300, extra_tokens=["<x>"], padding_side="right")
    assert len(tok) == 300 + 1
    assert tok.padding_side == "right"
    assert len(tok.encode("<x>", add_special_tokens=False)) == 1
    with pytest.raises(ValueError):
        build_tokenizer(TEXTS, vocab_size=100)


# ---------------------------------------------------------------------------------------------------- chat template


def test_chat_template_is_trls_qwen3(tokenizer):
    expected = (_trl_template_dir() / "qwen3.jinja").read_text(encoding="utf-8")
    assert qwen3_chat_template() == expected
    assert tokenizer.chat_template == expected

    text = tokenizer.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    assert text == f"<|im_start|>user\n{PROMPT[0]['content']}<|im_end|>\n<|im_start|>assistant\n"
    no_think = tokenizer.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert no_think == text + "<think>\n\n</think>\n\n"
    # transformers 5: tokenize=True gives a BatchEncoding unless return_dict=False
    ids = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_dict=False)
    assert ids == tokenizer.encode(text, add_special_tokens=False)
    enc = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True)
    assert enc["input_ids"] == ids


def test_trl_training_template_assistant_mask(tokenizer):
    from trl.chat_template_utils import (
        get_training_chat_template,
        has_generation_markers,
        is_chat_template_stop_token_trained,
    )

    # What SFTTrainer(assistant_only_loss=True) does: the base template has no markers, TRL swaps in its variant.
    assert not has_generation_markers(tokenizer.chat_template)
    training = get_training_chat_template(tokenizer)
    assert training == (_trl_template_dir() / "qwen3_training.jinja").read_text(encoding="utf-8")
    assert has_generation_markers(training)
    assert is_chat_template_stop_token_trained(tokenizer, chat_template=training)

    answers = ["<rubric>lowercase</rubric><eval>all words lowercase</eval><score>9</score>", "<score>2</score>"]
    conversation = [
        {"role": "system", "content": "You are a judge."},
        PROMPT[0],
        {"role": "assistant", "content": answers[0]},
        {"role": "user", "content": "And <response>SHOUTING</response>?"},
        {"role": "assistant", "content": answers[1]},
    ]
    out = tokenizer.apply_chat_template(
        conversation, return_assistant_tokens_mask=True, return_dict=True, chat_template=training
    )
    ids, mask = out["input_ids"], out["assistant_masks"]
    assert len(ids) == len(mask)

    # Expected: exactly the tokens of each assistant turn after "<|im_start|>assistant\n", up to "<|im_end|>\n".
    expected = []
    for i, msg in enumerate(conversation):
        if msg["role"] != "assistant":
            continue
        prefix = tokenizer.apply_chat_template(
            conversation[:i], tokenize=False, add_generation_prompt=True, chat_template=training
        )
        upto = tokenizer.apply_chat_template(conversation[: i + 1], tokenize=False, chat_template=training)
        start = len(tokenizer.encode(prefix, add_special_tokens=False))
        end = len(tokenizer.encode(upto, add_special_tokens=False))
        expected += [0] * (start - len(expected)) + [1] * (end - start)
        assert tokenizer.decode(ids[start:end]) == f"<think>\n\n</think>\n\n{msg['content']}<|im_end|>\n"
    expected += [0] * (len(ids) - len(expected))
    assert mask == expected
    assert ids == tokenizer.encode(
        tokenizer.apply_chat_template(conversation, tokenize=False, chat_template=training), add_special_tokens=False
    )


# ---------------------------------------------------------------------------------------------------- round trip


def test_save_load_round_trip(tmp_path, judge):
    from transformers import Qwen3ForCausalLM

    model, tok = build_tiny_judge(TEXTS, tmp_path / "judge", seed=3)
    for name in (
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ):
        assert (tmp_path / "judge" / name).exists(), name
    model2, tok2 = load_judge(tmp_path / "judge")
    assert isinstance(model2, Qwen3ForCausalLM)
    assert model2.dtype == torch.float32

    # tokenizer
    assert tok2.get_vocab() == tok.get_vocab() and len(tok2) == len(tok)
    assert tok2.chat_template == tok.chat_template == qwen3_chat_template()
    assert tok2.padding_side == "left"
    assert (tok2.eos_token, tok2.pad_token, tok2.bos_token) == ("<|im_end|>", "<|endoftext|>", None)
    for tag in DEFAULT_SPECIAL_TAGS:
        assert len(tok2.encode(tag, add_special_tokens=False)) == 1
    prompt_text = tok.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    for text in UNICODE_SAMPLES + TEXTS[:5] + [prompt_text]:
        assert tok2.encode(text, add_special_tokens=False) == tok.encode(text, add_special_tokens=False)
        assert tok2.decode(tok2.encode(text, add_special_tokens=False)) == text
    assert tok2.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True) == prompt_text

    # model: same logits on a left-padded batch
    batch = tok([prompt_text, "short <score>"], return_tensors="pt", padding=True, add_special_tokens=False)
    assert batch["attention_mask"][1, 0] == 0  # left padding
    with torch.no_grad():
        l1 = model(**batch).logits
        l2 = model2(**batch).logits
    torch.testing.assert_close(l1, l2, rtol=0, atol=0)
    assert model2.generation_config.eos_token_id == model.generation_config.eos_token_id
    assert model2.generation_config.pad_token_id == tok.pad_token_id

    # greedy generation: identical tokens before and after reload
    gen = dict(max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id)
    with torch.no_grad():
        g1 = model.generate(**batch, **gen)
        g2 = model2.generate(**batch, **gen)
    assert torch.equal(g1, g2)
    assert g1.shape[1] > batch["input_ids"].shape[1]

    # a different seed than the shared fixture gives different weights
    assert not torch.equal(model.model.embed_tokens.weight, judge[0].model.embed_tokens.weight)


# ---------------------------------------------------------------------------------------------------- case marker


def test_split_capitals_makes_every_capital_its_own_token(tmp_path):
    texts = TEXTS + [t.upper() for t in TEXTS[:40]] + [t.capitalize() for t in TEXTS[40:80]]
    split, plain = build_tokenizer(texts, split_capitals=True), build_tokenizer(texts)
    for text in ["a boat wanders Brightly", "THE RESPONSE SCORE", "Judge: Ok", *UNICODE_SAMPLES]:
        ids = split(text, add_special_tokens=False)["input_ids"]
        assert split.decode(ids) == text  # lossless
        pieces = [split.decode([i]) for i in ids]
        capitals = [c for c in text if c.isascii() and c.isupper()]
        assert [p.strip() for p in pieces if any(c.isascii() and c.isupper() for c in p)] == capitals
    assert "RESPONSE" in [plain.decode([i]).strip() for i in plain("THE RESPONSE")["input_ids"]]  # merged without it
    split.save_pretrained(tmp_path)
    from transformers import AutoTokenizer

    again = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    assert again("Brightly THE")["input_ids"] == split("Brightly THE")["input_ids"]
    test_trl_training_template_assistant_mask(split)  # TRL's assistant-only mask holds
