"""Tiny, randomly initialised Qwen3 judges built entirely offline.

Tests and ``make quickstart`` cannot download weights, so they build a small byte-level BPE tokenizer from the
task text (trained locally with ``tokenizers``) and a random-init :class:`~transformers.Qwen3ForCausalLM` sized to
it. The tokenizer uses the real Qwen3 special tokens and TRL's bundled Qwen3 chat template, so TRL's SFTTrainer
``assistant_only_loss=True`` works (TRL recognises the template and swaps in its training variant with
``{% generation %}`` markers).

Notes for transformers 5:

* ``padding_side`` must be passed to the tokenizer constructor; set afterwards it is not saved.
* ``apply_chat_template(tokenize=True)`` returns a ``BatchEncoding`` unless ``return_dict=False``.
* A reloaded tokenizer is a ``TokenizersBackend`` (``PreTrainedTokenizerFast`` is an alias of it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from importlib import resources
from pathlib import Path

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

__all__ = [
    "DEFAULT_SPECIAL_TAGS",
    "QWEN3_SPECIAL_TOKENS",
    "build_tokenizer",
    "build_tiny_qwen3",
    "build_tiny_judge",
    "load_judge",
    "qwen3_chat_template",
]

DEFAULT_SPECIAL_TAGS = [
    "<think>", "</think>",
    "<rubric>", "</rubric>",
    "<eval>", "</eval>",
    "<score>", "</score>",
    "<decision>", "</decision>",
    "<response>", "</response>",
    "<response_a>", "</response_a>",
    "<response_b>", "</response_b>",
]  # fmt: skip

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
# Order fixes their ids: 0, 1, 2 (before the 256 byte-level symbols).
QWEN3_SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]


def qwen3_chat_template() -> str:
    """The text of TRL's bundled Qwen3 chat template (``trl/chat_templates/qwen3.jinja``)."""
    try:
        return (resources.files("trl") / "chat_templates" / "qwen3.jinja").read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError, TypeError):  # pragma: no cover - unusual installs
        import trl

        return (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text(encoding="utf-8")


def _chat_markup_samples(texts: Sequence[str]) -> list[str]:
    """Texts wrapped the way the Qwen3 template renders them, so BPE learns the markup around the content."""
    samples = [
        f"{IM_START}system\nYou are a careful judge.{IM_END}\n",
        f"{IM_START}user\nHello{IM_END}\n{IM_START}assistant\n<think>\n\n</think>\n\nHi{IM_END}\n",
        f"{IM_START}assistant\n<think>\nreasoning\n</think>\n\nanswer{IM_END}\n",
    ]
    for i, text in enumerate(texts[:256]):  # a bounded sample keeps training fast on big corpora
        samples.append(f"{IM_START}user\n{text}{IM_END}\n{IM_START}assistant\n<think>\n\n</think>\n\n")
        if i % 2 == 0:
            samples.append(f"<think>\n{text}\n</think>\n\n{text}{IM_END}\n")
    return samples


def _training_pieces(texts: Sequence[str], protected: Sequence[str]) -> Iterator[str]:
    """Corpus for BPE: texts plus chat markup, split on special/added tokens so those never feed merges."""
    splitter = re.compile("|".join(re.escape(t) for t in sorted(set(protected), key=len, reverse=True)))
    for text in list(texts) + _chat_markup_samples(texts):
        for piece in splitter.split(text):
            if piece:
                yield piece


def build_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 1024,
    extra_tokens: Sequence[str] = DEFAULT_SPECIAL_TAGS,
    padding_side: str = "left",
    split_capitals: bool = False,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` and wrap it as a Qwen3-style fast tokenizer.

    ``vocab_size`` is the size of the trained BPE vocabulary including the three Qwen3 special tokens and the 256
    byte symbols; ``extra_tokens`` are added on top as non-special added tokens (one token each, kept on decode),
    so ``len(tokenizer) == vocab_size + len(extra_tokens)`` when the corpus is large enough to fill the vocabulary.

    ``split_capitals`` makes every capital letter a token of its own (with the space before it, if any: `` B``
    ``rightly``, `` S`` ``L`` ``O`` ``W``), never merged into a word piece: whether a text has a capital, or a word
    in lower case among capitals, is then a property of 52 frequent tokens rather than of many rare capitalised
    BPE pieces. Decoding is unchanged (lossless).
    """
    texts = [t for t in texts if isinstance(t, str)]
    extra_tokens = [t for t in dict.fromkeys(extra_tokens) if t not in QWEN3_SPECIAL_TOKENS]
    min_size = len(QWEN3_SPECIAL_TOKENS) + 256
    if vocab_size < min_size:
        raise ValueError(f"vocab_size must be at least {min_size} (3 special tokens + 256 bytes), got {vocab_size}")

    tok = Tokenizer(models.BPE())  # no unk token: the byte-level alphabet covers any text
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    if split_capitals:
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(" ?[A-Z]"), behavior="isolated"),
                                                     tok.pre_tokenizer])
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(QWEN3_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Reproducible: word counts are summed, the alphabet is sorted and merge ties are broken by pair ids, so the
    # result does not depend on Rust's per-map hash seeds or on thread scheduling (checked across processes).
    tok.train_from_iterator(_training_pieces(texts, QWEN3_SPECIAL_TOKENS + extra_tokens), trainer=trainer)

    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN3_SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in extra_tokens])

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        bos_token=None,
        unk_token=None,
        padding_side=padding_side,
        clean_up_tokenization_spaces=False,
        model_max_length=131072,
        chat_template=qwen3_chat_template(),
        split_special_tokens=False,
    )


def _generation_config(tokenizer) -> GenerationConfig:
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    eot = tokenizer.convert_tokens_to_ids(ENDOFTEXT)
    return GenerationConfig(bos_token_id=eot, eos_token_id=[im_end, eot], pad_token_id=tokenizer.pad_token_id)


def build_tiny_qwen3(
    tokenizer,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 2048,
    tie_word_embeddings: bool = True,
    seed: int = 0,
) -> Qwen3ForCausalLM:
    """A randomly initialised float32 ``Qwen3ForCausalLM`` sized to ``tokenizer`` (same seed, same weights)."""
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be divisible by num_kv_heads ({num_kv_heads})")
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size if intermediate_size is not None else 3 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=hidden_size // num_heads,
        max_position_embeddings=max_position_embeddings,
        max_window_layers=num_layers,
        tie_word_embeddings=tie_word_embeddings,
        bos_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.pad_token_id,
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = _generation_config(tokenizer)
    model.eval()
    return model


def build_tiny_judge(
    texts: Iterable[str],
    out_dir: str | os.PathLike | None = None,
    *,
    vocab_size: int = 1024,
    seed: int = 0,
    split_capitals: bool = False,
    **model_kwargs,
):
    """Build a tokenizer trained on ``texts`` (``split_capitals``: see :func:`build_tokenizer`) and a tiny Qwen3 for
    it; save both to ``out_dir`` if given."""
    tokenizer = build_tokenizer(list(texts), vocab_size=vocab_size, split_capitals=split_capitals)
    model = build_tiny_qwen3(tokenizer, seed=seed, **model_kwargs)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    return model, tokenizer


def load_judge(path: str | os.PathLike):
    """Load a judge saved by :func:`build_tiny_judge` (or any local causal-LM folder); no network."""
    path = str(path)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    model.eval()
    return model, tokenizer
