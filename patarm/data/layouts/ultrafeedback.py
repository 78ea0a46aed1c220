"""UltraFeedback, raw and binarized.

* ``ultrafeedback``            openbmb/UltraFeedback: `instruction` and 4 rated `completions` ({model,
  response, overall_score, fine-grained_score, annotations}). As HuggingFaceH4/ultrafeedback_binarized was
  built: the best-scored completion is chosen and a seeded pick among the others rejected. A pick that
  scores as high as the chosen one is a tie (dropped as `tie` unless `keep_ties`); a row with fewer than
  two scored completions is dropped as `too_few_responses`. Options: `score` (overall_score, as the
  binarized set; fine-grained_score; or mean_rating, the mean of the annotations' ratings), `seed`.
  The pick depends on the seed and the instruction only, so it does not change with row order or `limit`.
* ``ultrafeedback_binarized``  HuggingFaceH4/ultrafeedback_binarized (and sets with its columns): `prompt`,
  `chosen`, `rejected` (conversations repeating the prompt, or texts), `score_chosen`, `score_rejected`; read
  as the explicit-prompt layouts are, scores kept as metadata, ties dropped unless `keep_ties`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

from patarm.data.layouts.base import Drop, Layout, Option, Parts, RowProblem, number, required, text, user_prompt
from patarm.data.layouts.trl import explicit_parts


def _mean_rating(completion: dict) -> float | None:
    """The mean of the numeric aspect ratings in `annotations` ({aspect: {"Rating": "4", ...}}; "N/A" skipped)."""
    annotations = completion.get("annotations")
    if isinstance(annotations, dict):
        annotations = list(annotations.values())
    if not isinstance(annotations, list):
        return None
    ratings = []
    for aspect in annotations:
        try:
            ratings.append(float(aspect.get("Rating")))
        except (AttributeError, TypeError, ValueError):
            continue
    ratings = [r for r in ratings if math.isfinite(r)]
    return sum(ratings) / len(ratings) if ratings else None


def _score(completion: Any, how: str) -> float | None:
    if not isinstance(completion, dict) or not isinstance(completion.get("response"), str):
        return None
    if how == "mean_rating":
        return _mean_rating(completion)
    value = completion.get(how)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def _ultrafeedback(row: dict[str, Any], options: Mapping[str, Any]) -> Parts | Drop:
    instruction = text(row, "instruction")
    completions = required(row, "completions")
    if not isinstance(completions, list):
        raise RowProblem("completions", "wrong_type", f"expected a list, got {type(completions).__name__}")
    scored = [(s, c) for c in completions if (s := _score(c, options["score"])) is not None]
    if len(scored) < 2:
        return Drop("too_few_responses",
                    f"only {len(scored)} of {len(completions)} completions have a numeric '{options['score']}'")
    best = max(range(len(scored)), key=lambda i: scored[i][0])  # the first of equal bests, as max() in H4's script
    rest = [item for i, item in enumerate(scored) if i != best]
    rejected = random.Random(f"{options['seed']}\0{instruction}").choice(rest)
    chosen = scored[best]
    if rejected[0] == chosen[0] and not options["keep_ties"]:
        return Drop("tie", f"the picked completion scores as high as the best ({chosen[0]:g})")
    meta = {"score_chosen": chosen[0], "score_rejected": rejected[0], "model_chosen": chosen[1].get("model"),
            "model_rejected": rejected[1].get("model"), "score": options["score"]}
    consumed = frozenset({"instruction", "completions", "models", "correct_answers", "incorrect_answers"})
    return Parts(user_prompt(instruction), chosen[1]["response"], rejected[1]["response"], consumed,
                 {k: v for k, v in meta.items() if v is not None})


def _binarized(row: dict[str, Any], options: Mapping[str, Any]) -> Parts | Drop:
    """The explicit-prompt conversion (responses may repeat the prompt, as here) plus the two scores."""
    score_chosen, score_rejected = number(row, "score_chosen"), number(row, "score_rejected")
    if score_chosen == score_rejected and not options["keep_ties"]:
        return Drop("tie", f"score_chosen and score_rejected are both {score_chosen:g}")
    parts = explicit_parts(row)
    return parts._replace(consumed=parts.consumed | {"messages", "score_chosen", "score_rejected"},
                          metadata={"score_chosen": score_chosen, "score_rejected": score_rejected})


_KEEP_TIES = Option(False, "keep pairs whose two responses score the same")
ULTRAFEEDBACK = Layout(
    "ultrafeedback", "instruction, completions [{response, overall_score, annotations}] -> best vs seeded pick",
    convert=_ultrafeedback, keys=frozenset({"instruction", "completions"}),
    options={"score": Option("overall_score", "which score ranks the completions",
                             ("overall_score", "fine-grained_score", "mean_rating")),
             "seed": Option(42, "seed of the pick among the other completions"), "keep_ties": _KEEP_TIES})
ULTRAFEEDBACK_BINARIZED = Layout(
    "ultrafeedback_binarized", "prompt, chosen, rejected (conversations or texts), score_chosen, score_rejected",
    convert=_binarized, keys=frozenset({"prompt", "chosen", "rejected", "score_chosen", "score_rejected"}),
    options={"keep_ties": _KEEP_TIES})
