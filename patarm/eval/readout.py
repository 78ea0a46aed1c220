"""A judge's decision read as a belief: the probability it puts on one of two words where it writes its verdict.

A greedy judgment writes one word per decision (` pass` / ` fail`); the model's belief behind it can rank responses
the words tie. These functions feed texts that end just before such a word back to the model and read P(first word)
renormalised over the two — one forward pass per text, batched with left padding, the two words' logits taken from
the LM head's input in fp32 (`word_logits`: a bf16 judge's own logits step by 1/8 at a trained judge's magnitudes
and would tie what its hidden state tells apart). The recipes build the texts: the GSM8K judge's `correct ::`
(`patarm.demo.gsm8k.verdict`), each IFEval constraint line's verdict (`patarm.demo.ifeval.readout`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

VERDICT_WORDS = (" pass", " fail")


def word_ids(tokenizer: Any, words: Sequence[str] = VERDICT_WORDS) -> tuple[int, int]:
    """The first token of each of the two words; they must differ to tell the words apart at one position."""
    ids = tuple(tokenizer(w, add_special_tokens=False).input_ids[0] for w in words)
    if len(ids) != 2 or ids[0] == ids[1]:
        raise ValueError(f"the tokenizer starts {tuple(words)} with the same token {ids[0]}: which of the two words a "
                         "judge writes cannot be read at one position; choose words with different first tokens")
    return ids  # type: ignore[return-value]


def word_logits(model: Any, enc: Any, ids: tuple[int, int]) -> Any:
    """The logits of the two words at each row's last position, the LM head's product taken in fp32.

    The head's input is caught by a hook and multiplied by the two words' rows in fp32; the model's own logits (the
    LM head at the last position only) check that nothing comes after the head (a softcap, a scale): a mismatch
    beyond the model's rounding is an error rather than a silent change of what is read."""
    import torch

    head, cols = model.get_output_embeddings(), list(ids)
    seen: dict[str, Any] = {}
    hook = head.register_forward_hook(lambda _m, args, _out: seen.__setitem__("x", args[0]))
    try:
        own = model(**enc, logits_to_keep=1).logits[:, -1][:, cols].float()
    finally:
        hook.remove()
    if "x" not in seen:
        raise ValueError(f"{type(model).__name__} did not call its output embeddings ({type(head).__name__}) in "
                         "forward: its word logits cannot be read from the LM head's input")
    exact = seen["x"][:, -1].float() @ head.weight[cols].float().T
    if getattr(head, "bias", None) is not None:
        exact = exact + head.bias[cols].float()
    if not torch.allclose(exact, own, rtol=1 / 64, atol=0.05):
        raise ValueError(f"the judge's logits are not its LM head's product (largest gap "
                         f"{(exact - own).abs().max().item():.3g}): this model transforms them after the head, "
                         "which word_logits does not reproduce; read its words from model(...).logits instead")
    return exact


def next_word_probabilities(model: Any, tokenizer: Any, texts: Sequence[str], words: Sequence[str] = VERDICT_WORDS,
                            batch_size: int = 16) -> list[float]:
    """P(words[0]) / (P(words[0]) + P(words[1])) as the next token after each text (the full model input: chat
    template included, no special tokens added); a text given several times is read once."""
    import torch

    ids = word_ids(tokenizer, words)
    distinct = list(dict.fromkeys(texts))
    read: list[float] = []
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # the last position of every row is the end of its text
    try:
        for start in range(0, len(distinct), batch_size):
            enc = tokenizer(distinct[start:start + batch_size], add_special_tokens=False, padding=True,
                            return_tensors="pt").to(model.device)
            with torch.inference_mode():
                read += word_logits(model, enc, ids).softmax(-1)[:, 0].tolist()
    finally:
        tokenizer.padding_side = side
    by_text = dict(zip(distinct, read))
    return [by_text[t] for t in texts]


def verdict_points(text: str, words: Sequence[str] = VERDICT_WORDS) -> list[tuple[str, int]]:
    """(the line's name, the offset just after its last `::`) for each line `name :: ... :: pass|fail` of a
    judgment (the words stripped), the first line per name."""
    verdicts = {w.strip() for w in words}
    out, seen, pos = [], set(), 0
    for line in text.splitlines(keepends=True):
        parts = [part.strip() for part in line.split("::")]
        if len(parts) >= 2 and parts[-1] in verdicts and parts[0] not in seen:
            seen.add(parts[0])
            out.append((parts[0], pos + line.rfind("::") + 2))
        pos += len(line)
    return out


def line_beliefs(model: Any, tokenizer: Any, heads: Sequence[str], texts: Sequence[str],
                 words: Sequence[str] = VERDICT_WORDS, batch_size: int = 16) -> list[dict[str, float]]:
    """For each judgment `texts[k]` written after the model input `heads[k]` (its rendered prompt), P(words[0]) at
    each of its verdict lines (`verdict_points`), read after the judgment's own text up to that line's `::`: one
    forward pass a line. {} for a judgment without such a line."""
    word_ids(tokenizer, words)  # before any work: a tokenizer that cannot tell the two words apart
    inputs = [(k, name, head + text[:cut]) for k, (head, text) in enumerate(zip(heads, texts, strict=True))
              for name, cut in verdict_points(text, words)]
    probs = next_word_probabilities(model, tokenizer, [s for _, _, s in inputs], words, batch_size)
    out: list[dict[str, float]] = [{} for _ in texts]
    for (k, name, _), p in zip(inputs, probs, strict=True):
        out[k][name] = p
    return out
