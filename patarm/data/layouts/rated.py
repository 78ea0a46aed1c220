"""Sets with one prompt, two answers and a label saying which is preferred.

* ``shp``            stanfordnlp/SHP: `history` (the post), `human_ref_A`, `human_ref_B`, `labels` (1: A is
  preferred, 0: B). The score ratio (preferred / other upvotes) is kept as metadata; option
  `min_score_ratio` drops pairs below it (counted as `low_score_ratio`; the SHP authors suggest 2).
* ``pku_saferlhf``   PKU-Alignment/PKU-SafeRLHF (v0 and v1 columns): `prompt`, `response_0`, `response_1`,
  `better_response_id` and `safer_response_id`; option `axis` (better | safer) says which label is used.
* ``chatbot_arena``  lmsys/chatbot_arena_conversations: `conversation_a`, `conversation_b` (messages) and
  `winner` (model_a | model_b | tie | tie (bothbad)); ties are dropped as `tie`, both-bad as `both_bad`.
  Multi-turn battles were judged as whole conversations that part after the first reply: option
  `multi_turn` drops them (`multi_turn`, default) or keeps the first turn (`first_turn`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from patarm.data.layouts.base import Drop, Layout, Option, Parts, RowProblem, number, required, text, user_prompt
from patarm.data.layouts.chat import messages, shared_prompt


def _shp(row: dict[str, Any], options: Mapping[str, Any]) -> Parts | Drop:
    label = required(row, "labels")
    if label not in (0, 1) or isinstance(label, bool):
        raise RowProblem("labels", "wrong_type", f"expected 1 (A preferred) or 0 (B preferred), got {label!r}")
    a, b = text(row, "human_ref_A"), text(row, "human_ref_B")
    first, second = ("A", "B") if label == 1 else ("B", "A")
    meta: dict[str, Any] = {"score_chosen": row.get(f"score_{first}"), "score_rejected": row.get(f"score_{second}")}
    ratio = row.get("score_ratio")
    if ratio is not None:
        meta["score_ratio"] = number(row, "score_ratio")
        if ratio < options["min_score_ratio"]:
            return Drop("low_score_ratio", f"score_ratio {ratio:g} < min_score_ratio {options['min_score_ratio']:g}")
    if isinstance(row.get("domain"), str):  # SHP's domain is "<subreddit>_<split>", not a PaTaRM domain
        meta["subreddit"] = row["domain"].rsplit("_", 1)[0]
    consumed = frozenset({"history", "human_ref_A", "human_ref_B", "labels", "score_A", "score_B", "score_ratio",
                          "domain", "c_root_id_A", "c_root_id_B", "created_at_utc_A", "created_at_utc_B"})
    return Parts(user_prompt(text(row, "history")), a if label == 1 else b, b if label == 1 else a, consumed, meta)


_PKU_SIDES = ("response_{}", "is_response_{}_safe", "response_{}_severity_level", "response_{}_harm_category",
              "response_{}_source", "response_{}_sha256")


def _pku(row: dict[str, Any], options: Mapping[str, Any]) -> Parts:
    key = f"{options['axis']}_response_id"
    winner = required(row, key)
    if winner not in (0, 1) or isinstance(winner, bool):
        raise RowProblem(key, "wrong_type", f"expected 0 or 1, got {winner!r}")
    loser = 1 - winner
    meta: dict[str, Any] = {"axis": options["axis"]}
    for side, k in (("chosen", winner), ("rejected", loser)):
        meta[f"{side}_safe"] = row.get(f"is_response_{k}_safe")
        meta[f"{side}_severity_level"] = row.get(f"response_{k}_severity_level")
        harms = row.get(f"response_{k}_harm_category")
        if isinstance(harms, dict):
            meta[f"{side}_harm_categories"] = sorted(name for name, hit in harms.items() if hit)
        meta[f"{side}_model"] = row.get(f"response_{k}_source")
    other = "safer" if options["axis"] == "better" else "better"
    if row.get(f"{other}_response_id") in (0, 1):
        meta[f"{other}_agrees"] = row[f"{other}_response_id"] == winner
    consumed = frozenset({"prompt", "better_response_id", "safer_response_id"}
                         | {f.format(k) for f in _PKU_SIDES for k in (0, 1)})
    return Parts(user_prompt(text(row, "prompt")), text(row, f"response_{winner}"), text(row, f"response_{loser}"),
                 consumed, {k: v for k, v in meta.items() if v is not None})


_ARENA_DROPS = {"tie": ("tie", "the battle is a tie"), "tie (bothbad)": ("both_bad", "both answers were judged bad")}


def _first_turn(msgs: list[dict], field: str) -> list[dict]:
    """The conversation up to and including its first assistant reply."""
    for i, msg in enumerate(msgs):
        if msg["role"] == "assistant":
            return msgs[: i + 1]
    raise RowProblem(field, "missing_field", "the conversation has no assistant reply")


def _arena(row: dict[str, Any], options: Mapping[str, Any]) -> Parts | Drop:
    winner = text(row, "winner")
    if winner in _ARENA_DROPS:
        return Drop(*_ARENA_DROPS[winner])
    if winner not in ("model_a", "model_b"):
        raise RowProblem("winner", "wrong_type", f"expected model_a, model_b, tie or tie (bothbad), got {winner!r}")
    a, b = messages(row.get("conversation_a"), "conversation_a"), messages(row.get("conversation_b"), "conversation_b")
    if sum(m["role"] == "assistant" for m in a) > 1 or sum(m["role"] == "assistant" for m in b) > 1:
        if options["multi_turn"] == "drop":
            return Drop("multi_turn", "a multi-turn battle (judged on whole conversations that part after the "
                        "first reply); layout option multi_turn='first_turn' keeps its first turn")
        a, b = _first_turn(a, "conversation_a"), _first_turn(b, "conversation_b")
    win, lose = ("a", "b") if winner == "model_a" else ("b", "a")
    sides = {"a": a, "b": b}
    prompt, chosen, rejected = shared_prompt(sides[win], sides[lose], f"conversation_{win}", f"conversation_{lose}")
    meta = {"model_chosen": row.get(f"model_{win}"), "model_rejected": row.get(f"model_{lose}")}
    consumed = frozenset({"conversation_a", "conversation_b", "winner", "model_a", "model_b", "openai_moderation",
                          "toxic_chat_tag"})
    return Parts(prompt, chosen, rejected, consumed, {k: v for k, v in meta.items() if v is not None})


SHP = Layout(
    "shp", "history, human_ref_A, human_ref_B, labels (1: A preferred) -> post, preferred and other comment",
    convert=_shp, keys=frozenset({"history", "human_ref_A", "human_ref_B", "labels"}),
    options={"min_score_ratio": Option(0.0, "drop pairs whose score_ratio is below this (SHP suggests 2)")})
PKU_SAFERLHF = Layout(
    "pku_saferlhf", "prompt, response_0, response_1, better_response_id / safer_response_id (option axis)",
    convert=_pku, keys=frozenset({"prompt", "response_0", "response_1"}), aliases=("pku",),
    options={"axis": Option("better", "which label orders the pair", ("better", "safer"))})
CHATBOT_ARENA = Layout(
    "chatbot_arena", "conversation_a, conversation_b (messages), winner -> shared turns, winner's and loser's reply",
    convert=_arena, keys=frozenset({"conversation_a", "conversation_b", "winner"}), aliases=("arena",),
    options={"multi_turn": Option("drop", "multi-turn battles: drop them or keep their first turn",
                                  ("drop", "first_turn"))})
