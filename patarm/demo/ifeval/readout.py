"""The IFEval judge's belief in each constraint: P(pass) at its own constraint lines, and the score it implies.

The judge writes one line per constraint of the prompt, ending `:: pass` or `:: fail` (`teacher.judgment_text`),
then a score that follows from the count. Greedy, a small judge writes the same lines for both sides of most pairs
(SmolLM2-135M after SFT on 836 rows: 156 ties on 188 dev pairs), though its belief behind each word may still
differ between them. This module reads that belief, as `patarm.demo.gsm8k.verdict` reads the GSM8K judge's:

- `verdict_points` (`patarm.eval.readout`): each constraint line of a judgment, with where its verdict word starts;
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

from patarm.eval.readout import line_beliefs, verdict_points

__all__ = ["belief_auc", "constraint_beliefs", "expected_score", "verdict_points"]

def constraint_beliefs(model: Any, tokenizer: Any, prompts: Sequence[list[dict]], texts: Sequence[str],
                       batch_size: int = 16) -> list[dict[str, float]]:
    """For each judgment, P(pass) at each of its constraint lines, keyed by the line's constraint name."""
    heads = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    return line_beliefs(model, tokenizer, heads, texts, batch_size=batch_size)


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
