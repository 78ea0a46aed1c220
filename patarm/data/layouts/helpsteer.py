"""NVIDIA's HelpSteer sets.

* ``helpsteer3``            nvidia/HelpSteer3 preference: `context` (messages), `response1`, `response2`,
  `overall_preference` in -3..3 (negative: response1 is better; 0: a tie, dropped as `tie`).
* ``helpsteer2_preference`` nvidia/HelpSteer2 preference file: `prompt`, `response_1`, `response_2`,
  `preference_strength` in -3..3 (same sign convention).
* ``helpsteer2_ratings``    nvidia/HelpSteer2 ratings: one row per response with `helpfulness`; consecutive rows
  that share a prompt form a group whose most and least helpful responses become a pair (equal helpfulness:
  `tie`). Here a row of the manifest is a prompt group.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from patarm.data.layouts.base import Drop, Layout, Parts, RowProblem, Rows, Stream, number, text
from patarm.data.layouts.chat import messages
from patarm.data.schema import Message

# HelpSteer2 writes earlier turns of a multi-turn prompt inline, separated by these markers.
_HS2_TURN = re.compile(r"\n?<extra_id_1>(User|Assistant)\n")


def helpsteer2_messages(prompt: str) -> list[Message]:
    """A HelpSteer2 prompt string as chat messages (the first segment is the user's first turn)."""
    parts = _HS2_TURN.split(prompt)
    msgs = [{"role": "user", "content": parts[0]}]
    for speaker, content in zip(parts[1::2], parts[2::2]):
        msgs.append({"role": "user" if speaker == "User" else "assistant", "content": content})
    return msgs


def _ordered(row: dict, first: str, second: str, field: str) -> tuple[str, str, float] | Drop:
    """(chosen, rejected, strength) from a -3..3 preference where negative favours `first`."""
    preference = number(row, field)
    if preference == 0:
        return Drop("tie", f"'{field}' is 0 (the responses are judged equal)")
    a, b = text(row, first), text(row, second)
    return (a, b, -preference) if preference < 0 else (b, a, preference)


def _helpsteer3(row: dict[str, Any], options: Mapping[str, Any]) -> Parts | Drop:
    order = _ordered(row, "response1", "response2", "overall_preference")
    if isinstance(order, Drop):
        return order
    # HelpSteer3's own `domain` (general / stem / code / multilingual) stays the pair's domain.
    return Parts(messages(row.get("context"), "context"), order[0], order[1],
                 frozenset({"context", "response1", "response2", "overall_preference", "individual_preference"}),
                 {"preference_strength": order[2]})


def _helpsteer2_preference(row: dict[str, Any], options: Mapping[str, Any]) -> Parts | Drop:
    prompt = helpsteer2_messages(text(row, "prompt"))
    order = _ordered(row, "response_1", "response_2", "preference_strength")
    if isinstance(order, Drop):
        return order
    return Parts(prompt, order[0], order[1],
                 frozenset({"prompt", "response_1", "response_2", "preference_strength", "preference_statement",
                            "preference_elaboration"}),
                 {"preference_strength": order[2]})


def _helpsteer2_ratings(rows: Rows, options: Mapping[str, Any]) -> Stream:
    """Consecutive rows with the same prompt form a group (the released files keep them adjacent)."""
    group: list[dict] = []
    start = 0
    for index, row in rows:
        if not isinstance(row, dict):
            yield index, row, row  # the loader reports it (not_an_object, or the reader's error)
            continue
        if not isinstance(row.get("prompt"), str):
            yield index, row, RowProblem("prompt", "missing_field", "expected a string 'prompt'")
            continue
        if group and row["prompt"] != group[0]["prompt"]:
            yield start, group[0], _rated_pair(group)
            group = []
        if not group:
            start = index
        group.append(row)
    if group:
        yield start, group[0], _rated_pair(group)


def _rated_pair(group: list[dict]) -> Parts | Drop | RowProblem:
    rated = [r for r in group if isinstance(r.get("helpfulness"), (int, float)) and isinstance(r.get("response"), str)]
    if len(rated) < 2:
        return RowProblem("helpfulness", "missing_field",
                          f"fewer than two rated responses for this prompt (group of {len(group)} rows)")
    best = max(rated, key=lambda r: r["helpfulness"])
    worst = min(rated, key=lambda r: r["helpfulness"])
    if best["helpfulness"] == worst["helpfulness"]:
        return Drop("tie", f"all {len(rated)} responses have helpfulness {best['helpfulness']}")
    consumed = frozenset(best)  # the group's per-response ratings describe one response each: not metadata
    return Parts(helpsteer2_messages(best["prompt"]), best["response"], worst["response"], consumed,
                 {"helpfulness_chosen": best["helpfulness"], "helpfulness_rejected": worst["helpfulness"]})


HELPSTEER3 = Layout(
    "helpsteer3", "context (messages), response1, response2, overall_preference -3..3 (<0: response1 better)",
    convert=_helpsteer3, keys=frozenset({"context", "response1", "response2", "overall_preference"}))
HELPSTEER2_PREFERENCE = Layout(
    "helpsteer2_preference", "prompt, response_1, response_2, preference_strength -3..3 (<0: response_1 better)",
    convert=_helpsteer2_preference, keys=frozenset({"prompt", "response_1", "response_2", "preference_strength"}))
HELPSTEER2_RATINGS = Layout(
    "helpsteer2_ratings", "prompt, response, helpfulness (one row per response) -> most vs least helpful",
    stream=_helpsteer2_ratings, keys=frozenset({"prompt", "response", "helpfulness"}))
