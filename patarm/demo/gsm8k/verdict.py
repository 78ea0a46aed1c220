"""The judge's verdict in probability: how sure the judge is of `correct :: pass`, read at its own evidence.

A greedy judgment writes one verdict word; the model's belief behind it can be informative even when the word is
not. The SFT judge of the reference arm (192 rows, docs/gsm8k-skill.md) writes `correct :: fail` for almost every
candidate, yet its P(pass) at that position is higher for the correct solution of a pair far more often than not:
the comparison of the two answers is learned, the threshold is not. This module reads that belief:

- `verdict_probabilities`: for each judgment, the text up to and including its own `correct ::` (the judge's own
  greedy evidence, nothing of the teacher's) is fed back to the judge after its prompt, and P(" pass") is taken
  against P(" fail") (renormalised over the two words) — one forward pass per judgment, batched, the two words'
  logits taken in fp32 (`verdict_logits`: a bf16 judge's own logits would tie candidates);
- `expected_score`: the graded scale's score (`evidence.score_of`) of the judgment's stated facts with the verdict
  marginalised: p · score(pass) + (1 − p) · score(fail). It is the value that voting@k's mean of sampled scores
  estimates when only the verdict varies between samples (the paper's §5.4), without sampling; the probability-
  weighted score is G-Eval's (Liu et al., 2023) normalisation applied to the verdict, the one decision of the scale.

Only judgments that state a mounted reference have a pass/fail verdict; others get None (the arms without the
reference write `correct :: unknown`, which is not a decision).

`verdict_summary` holds the verdict against the truth rather than against the judge's own evidence: how often the
greedy word is `pass`, how often it is right, and whether P(pass) separates correct from incorrect candidates
across problems (its AUC: 0.5 is no separation, whatever the threshold) — what tells a judge that has not learned
the comparison from one that has learned it with the wrong threshold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from patarm.demo.gsm8k.consistency import _STEPS, stated
from patarm.demo.gsm8k.evidence import FIELDS, NOT_MOUNTED, Evidence, score_of
from patarm.eval import readout

MARK = "correct ::"
WORDS = readout.VERDICT_WORDS


def _prefix(text: str) -> str | None:
    head, sep, _ = text.partition(MARK)
    return head + sep if sep else None


def word_ids(tokenizer: Any) -> tuple[int, int]:
    """The first token of " pass" and of " fail"; they must differ to tell the verdicts apart."""
    return readout.word_ids(tokenizer, WORDS)


verdict_logits = readout.word_logits  # the two words' logits in fp32 at each row's last position


def verdict_probabilities(model: Any, tokenizer: Any, prompts: Sequence[list[dict]], texts: Sequence[str],
                          batch_size: int = 16) -> list[float | None]:
    """P(pass) / (P(pass) + P(fail)) at each judgment's own `correct ::` (None when it states none)."""
    word_ids(tokenizer)  # before any work: a tokenizer that cannot tell the two words apart
    inputs = [(k, tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) + head)
              for k, (p, t) in enumerate(zip(prompts, texts, strict=True)) if (head := _prefix(t)) is not None]
    out: list[float | None] = [None] * len(texts)
    probs = readout.next_word_probabilities(model, tokenizer, [s for _, s in inputs], WORDS, batch_size)
    for (k, _), p in zip(inputs, probs, strict=True):
        out[k] = p
    return out


def expected_score(text: str, p_pass: float | None) -> float | None:
    """p · score(pass) + (1 − p) · score(fail) of the judgment's stated facts (its own `follows` and steps), or
    None without a probability, a mounted reference, or a fact the scale needs."""
    from patarm.judge import parse_judgment

    if p_pass is None:
        return None
    lines = stated(parse_judgment(text, "pointwise-compact").evaluation)
    steps = _STEPS.match(lines.get("wrong steps", ""))
    if any(k not in lines for k in FIELDS if k != "correct") or not steps or lines["follows"] not in (
            "yes", "no", "no step") or lines["reference answer"] == NOT_MOUNTED:
        return None
    final, last, unused = lines["final answer"], lines["last step"], lines["unused numbers"]

    def score(correct: bool) -> int:
        return score_of(Evidence("" if final == "none" else final, lines["reference answer"], correct,
                                 int(steps.group(2)), int(steps.group(1)), None if last == "none" else last,
                                 None if lines["follows"] == "no step" else lines["follows"] == "yes",
                                 () if unused == "none" else tuple(unused.split(", "))))

    return p_pass * score(True) + (1 - p_pass) * score(False)


def verdict_summary(records: Sequence[dict]) -> dict[str, Any] | None:
    """The judge's pass/fail verdicts against the candidates' correctness: `verdicts` (judgments that state one),
    `said_pass` (their share saying pass), `accuracy` (share where the word matches the truth), `correct_share` (the
    truth's share of correct, the accuracy of always saying pass) and, where the records carry `p_pass`, `p_pass_auc`
    (the Mann–Whitney AUC of P(pass), correct against incorrect candidates of all problems; None when one class is
    empty) with `p_pass_median` ({"correct": …, "incorrect": …}: where the judge's belief sits — a judge whose
    P(pass) stays near 0.5 for both classes flips its greedy word on small shifts). None when no judgment states a
    verdict."""
    from statistics import median

    from scipy.stats import mannwhitneyu

    from patarm.judge import parse_judgment

    words, truth, probs = [], [], []
    for r in records:
        for k, (text, right) in enumerate(zip(r["texts"], r["correct"], strict=True)):
            word = stated(parse_judgment(text, "pointwise-compact").evaluation).get("correct")
            if word in ("pass", "fail"):
                words.append(word == "pass")
                truth.append(bool(right))
                probs.append(r["p_pass"][k] if "p_pass" in r else None)
    if not words:
        return None
    n = len(words)
    out: dict[str, Any] = {"verdicts": n, "said_pass": sum(words) / n,
                           "accuracy": sum(w == t for w, t in zip(words, truth)) / n, "correct_share": sum(truth) / n}
    if any(p is not None for p in probs):
        pos = [p for p, t in zip(probs, truth) if p is not None and t]
        neg = [p for p, t in zip(probs, truth) if p is not None and not t]
        out["p_pass_auc"] = float(mannwhitneyu(pos, neg).statistic) / (len(pos) * len(neg)) if pos and neg else None
        out["p_pass_median"] = {"correct": median(pos) if pos else None, "incorrect": median(neg) if neg else None}
    return out


def expected_records(model_dir: str, records: list[dict], make_prompts: Callable[[Any], Sequence[list[dict]]],
                     dtype: str | None = None, batch_size: int = 16, device: str = "cpu") -> list[dict]:
    """Evaluation records with `scores` replaced by the expected scores and `p_pass` added; `make_prompts(tokenizer)`
    gives the judge prompts of the records' candidates in order (as they were judged), on the judging `device`."""
    from patarm.demo.gsm8k.evaluate import placement
    from patarm.models import load_causal_lm

    model, tokenizer = load_causal_lm(model_dir, dtype=dtype, **placement(device))
    model.eval()
    texts = [t for r in records for t in r["texts"]]
    probs = verdict_probabilities(model, tokenizer, make_prompts(tokenizer), texts, batch_size)
    out, k = [], 0
    for r in records:
        n = len(r["texts"])
        p = probs[k:k + n]
        scores = [expected_score(t, q) for t, q in zip(r["texts"], p, strict=True)]
        out.append({**r, "scores": scores, "valid": [s is not None for s in scores], "p_pass": p})
        k += n
    return out
