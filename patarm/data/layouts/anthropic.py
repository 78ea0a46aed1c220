"""Sets whose texts are Anthropic-style transcripts ("\\n\\nHuman: … \\n\\nAssistant: …").

* ``hh_rlhf``  Anthropic/hh-rlhf: `chosen` and `rejected` are whole transcripts that share everything but
  the last assistant turn; the shared turns become the prompt messages, the two last assistant turns the
  responses. Transcripts that differ earlier are a row error (`prompt_mismatch`).
* ``nectar``   berkeley-nest/Nectar: a transcript `prompt` ending in "\\n\\nAssistant:" and 7 `answers`
  ({answer, model, rank}, rank 1 best) ranked by GPT-4. The `pairs` option says which pairs are formed:
  ``best_worst`` (default: rank 1 against the last rank, one pair per prompt, the widest gap and so the
  least label noise, and no prompt repeated, which the dedup, caps and pair-level filters downstream
  assume), ``best_rest`` (rank 1 against each other answer), ``adjacent`` (each rank against the next) or
  ``all`` (every pair of different ranks, K(K-1)/2). With more than one pair per row, every formed pair
  (or dropped tie) counts as a row of the manifest.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from patarm.data.layouts.base import Drop, Layout, Option, Parts, RowProblem, required
from patarm.data.layouts.chat import conversation_pair, transcript


def _hh_rlhf(row: dict[str, Any], options: Mapping[str, Any]) -> Parts:
    return conversation_pair(row, transcript, "chosen", "rejected")


def _is_transcript(row: dict) -> bool:
    chosen = row.get("chosen")
    return row.get("prompt") is None and type(chosen) is str and chosen.startswith(("\n\nHuman:", "Human:"))


def _answers(row: dict) -> list[tuple[float, int, dict]]:
    """(rank, position, answer) sorted best first; problems name the answer."""
    answers = required(row, "answers")
    if not isinstance(answers, list):
        raise RowProblem("answers", "wrong_type", f"expected a list of answers, got {type(answers).__name__}")
    ranked = []
    for i, answer in enumerate(answers):
        if not isinstance(answer, dict) or not isinstance(answer.get("answer"), str):
            raise RowProblem(f"answers[{i}].answer", "missing_field", "each answer needs an 'answer' text")
        rank = answer.get("rank")
        if isinstance(rank, bool) or not isinstance(rank, (int, float)):
            raise RowProblem(f"answers[{i}].rank", "wrong_type", f"expected a numeric rank, got {rank!r}")
        ranked.append((rank, i, answer))
    if len(ranked) < 2:
        raise RowProblem("answers", "missing_field", f"{len(ranked)} answer(s); a pair needs two")
    return sorted(ranked, key=lambda item: (item[0], item[1]))


_NECTAR_PAIRS = {
    "best_worst": lambda ranked: [(ranked[0], ranked[-1])],
    "best_rest": lambda ranked: [(ranked[0], other) for other in ranked[1:]],
    "adjacent": lambda ranked: list(zip(ranked, ranked[1:])),
    "all": lambda ranked: list(itertools.combinations(ranked, 2)),
}


def _nectar(row: dict[str, Any], options: Mapping[str, Any]) -> list[Parts | Drop]:
    prompt = transcript(row.get("prompt"), "prompt", open_end=True)
    ranked = _answers(row)
    source = row.get("source")
    source = ",".join(map(str, source)) if isinstance(source, list) else source  # a list of origins in Nectar
    consumed = frozenset({"prompt", "answers", "source"})
    out: list[Parts | Drop] = []
    for better, worse in _NECTAR_PAIRS[options["pairs"]](ranked):
        if better[0] == worse[0]:
            out.append(Drop("tie", f"answers {better[1]} and {worse[1]} share rank {better[0]}"))
            continue
        meta = {"rank_chosen": better[0], "rank_rejected": worse[0], "model_chosen": better[2].get("model"),
                "model_rejected": worse[2].get("model")}
        pair_id = None
        if options["pairs"] != "best_worst" and row.get("id") not in (None, ""):
            pair_id = f"{row['id']}:{better[1]}>{worse[1]}"  # one row, several pairs: keep their ids apart
        out.append(Parts(prompt, better[2]["answer"], worse[2]["answer"], consumed, meta, pair_id,
                         source or None))
    return out


HH_RLHF = Layout(
    "hh_rlhf", "chosen, rejected (whole Human/Assistant transcripts) -> shared turns, last assistant turns",
    convert=_hh_rlhf, fits=_is_transcript, aliases=("anthropic_hh", "hh"),
    why_not=lambda row: "it has a 'prompt'" if row.get("prompt") is not None
    else "'chosen' is not a transcript starting with '\\n\\nHuman:'")
NECTAR = Layout(
    "nectar", "prompt (transcript), answers [{answer, model, rank}] -> pairs by rank (option pairs)",
    convert=_nectar, keys=frozenset({"prompt", "answers"}),
    options={"pairs": Option("best_worst", "which pairs a ranked row gives", tuple(_NECTAR_PAIRS))})
