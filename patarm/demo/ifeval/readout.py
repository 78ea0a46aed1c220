"""The IFEval judge's belief in each constraint: P(pass) at its own constraint lines, and the score it implies.

The judge writes one line per constraint of the prompt, ending `:: pass` or `:: fail` (`teacher.judgment_text`),
then a score that follows from the count. Greedy, a small judge writes the same lines for both sides of most pairs
(SmolLM2-135M after SFT on 836 rows: 156 ties on 188 dev pairs), though its belief behind each word may still
differ between them. This module reads that belief, as `patarm.demo.gsm8k.verdict` reads the GSM8K judge's:

- `verdict_points`: each constraint line of a judgment, with where its verdict word starts;
- `constraint_beliefs`: for each judgment, {constraint name: P(pass)}, renormalised over ` pass` / ` fail`, read
  after the judgment's own greedy text up to that line's last `::` (its own evidence, nothing of the teacher's;
  one forward pass per line, `patarm.eval.readout`);
- `expected_score`: the teacher's scale, 1 + 9 × share followed, with the share the mean P(pass) over the prompt's
  constraints the judgment states, unrounded — G-Eval's probability-weighted score (Liu et al., 2023) applied to
  the constraints' verdicts; what voting@k's mean of sampled scores estimates, without sampling;
- `belief_auc`: how well P(pass) separates the constraints the checkers find followed from the others (the
  Mann–Whitney AUC; 0.5 is no separation), over all lines and per instruction id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

VERDICTS = ("pass", "fail")


def verdict_points(text: str) -> list[tuple[str, int]]:
    """(constraint name, offset just after the line's last `::`) for each line `name :: ... :: pass|fail`, first
    line per name (as `judge.constraint_verdicts` reads them)."""
    out, seen, pos = [], set(), 0
    for line in text.splitlines(keepends=True):
        parts = [part.strip() for part in line.split("::")]
        if len(parts) >= 2 and parts[-1] in VERDICTS and parts[0] not in seen:
            seen.add(parts[0])
            out.append((parts[0], pos + line.rfind("::") + 2))
        pos += len(line)
    return out


def constraint_beliefs(model: Any, tokenizer: Any, prompts: Sequence[list[dict]], texts: Sequence[str],
                       batch_size: int = 16) -> list[dict[str, float]]:
    """For each judgment, P(pass) at each of its constraint lines, keyed by the line's constraint name."""
    from patarm.eval.readout import next_word_probabilities, word_ids

    word_ids(tokenizer)  # before any work: a tokenizer that cannot tell the two words apart
    inputs = []
    for k, (prompt, text) in enumerate(zip(prompts, texts, strict=True)):
        head = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        inputs += [(k, name, head + text[:cut]) for name, cut in verdict_points(text)]
    probs = next_word_probabilities(model, tokenizer, [s for _, _, s in inputs], batch_size=batch_size)
    out: list[dict[str, float]] = [{} for _ in texts]
    for (k, name, _), p in zip(inputs, probs, strict=True):
        out[k][name] = p
    return out


def _name(iid: str) -> str:
    return iid.split(":", 1)[1]


def expected_score(row: dict, beliefs: dict[str, float]) -> float | None:
    """1 + 9 × the mean P(pass) over the IFEval input `row`'s constraints that the judgment states; None when it
    states none of them."""
    stated = [beliefs[_name(iid)] for iid in row["instruction_id_list"] if _name(iid) in beliefs]
    return 1 + 9 * sum(stated) / len(stated) if stated else None


def belief_auc(responses: Sequence[tuple[dict, str]], beliefs: Sequence[dict[str, float]]) -> dict[str, Any]:
    """P(pass) against the checkers' verdicts on the same responses: the AUC over every stated constraint line
    (None when one class is empty), the lines read, and per instruction id {auc, followed, not_followed}."""
    from scipy.stats import mannwhitneyu

    from patarm.demo.ifeval.pairs import followed

    split: dict[str, tuple[list[float], list[float]]] = {}
    for (row, response), said in zip(responses, beliefs, strict=True):
        for iid, ok in zip(row["instruction_id_list"], followed(row, response)):
            if (p := said.get(_name(iid))) is not None:
                split.setdefault(iid, ([], []))[0 if ok else 1].append(p)

    def auc(pos: list[float], neg: list[float]) -> float | None:
        return float(mannwhitneyu(pos, neg).statistic) / (len(pos) * len(neg)) if pos and neg else None

    pos = [p for a, _ in split.values() for p in a]
    neg = [p for _, b in split.values() for p in b]
    return {"auc": auc(pos, neg), "lines": len(pos) + len(neg),
            "by_id": {iid: {"auc": auc(a, b), "followed": len(a), "not_followed": len(b)}
                      for iid, (a, b) in sorted(split.items())}}
