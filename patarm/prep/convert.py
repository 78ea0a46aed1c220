"""Raw-row converters for sets that are not already pairwise, and column renaming.

* ``helpsteer3``          nvidia/HelpSteer3 preference: `context` (messages), `response1`, `response2`,
  `overall_preference` in -3..3 (negative: response1 is better; 0: a tie, dropped as `tie`).
* ``helpsteer2_preference`` nvidia/HelpSteer2 preference file: `prompt`, `response_1`, `response_2`,
  `preference_strength` in -3..3 (same sign convention).
* ``helpsteer2_ratings``  nvidia/HelpSteer2 ratings: one row per response with `helpfulness`; rows that
  share a prompt form a group, whose most and least helpful responses become a pair (equal
  helpfulness: `tie`). Here an input row of the manifest is a prompt group.

A converter turns raw rows into rows `patarm.data.load_pairs` understands, and yields `Drop` for
records it cannot turn into a pair, so the manifest still accounts for them.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Iterator, NamedTuple


class Drop(NamedTuple):
    """A raw record that yields no pair: the manifest reason and a message naming the record."""

    reason: str
    message: str


Converted = Iterator[dict | Drop]

# HelpSteer2 writes earlier turns of a multi-turn prompt inline, separated by these markers.
_HS2_TURN = re.compile(r"\n?<extra_id_1>(User|Assistant)\n")


def helpsteer2_messages(prompt: str) -> list[dict[str, str]]:
    """A HelpSteer2 prompt string as chat messages (the first segment is the user's first turn)."""
    parts = _HS2_TURN.split(prompt)
    messages = [{"role": "user", "content": parts[0]}]
    for speaker, text in zip(parts[1::2], parts[2::2]):
        messages.append({"role": "user" if speaker == "User" else "assistant", "content": text})
    return messages


def _ordered(first: Any, second: Any, preference: Any, index: int, field: str) -> tuple | Drop:
    """(chosen, rejected) from a -3..3 preference where negative favours `first`."""
    if not isinstance(preference, (int, float)) or isinstance(preference, bool):
        return Drop("wrong_type", f"row {index}: '{field}' is {preference!r}, expected a number in -3..3")
    if preference == 0:
        return Drop("tie", f"row {index}: {field} is 0 (the responses are judged equal)")
    return (first, second) if preference < 0 else (second, first)


def _with_extras(row: dict, out: dict, consumed: tuple[str, ...]) -> dict:
    """`out` plus the row's other fields; load_pairs keeps the small ones as metadata."""
    return {**{k: v for k, v in row.items() if k not in consumed}, **out}


def helpsteer3(rows: Iterable[tuple[int, Any]]) -> Converted:
    consumed = ("context", "response1", "response2", "overall_preference", "individual_preference")
    for index, row in rows:
        if not isinstance(row, dict):
            yield row  # load_pairs reports it (not_an_object, or the file's bad_json error)
            continue
        order = _ordered(row.get("response1"), row.get("response2"), row.get("overall_preference"), index,
                         "overall_preference")
        if isinstance(order, Drop):
            yield order
            continue
        out = {"prompt": row.get("context"), "chosen": order[0], "rejected": order[1]}
        if row.get("domain"):
            out["domain"] = row["domain"]  # HelpSteer3's own domain: general / stem / code / multilingual
        yield _with_extras(row, out, consumed + ("domain",))


def helpsteer2_preference(rows: Iterable[tuple[int, Any]]) -> Converted:
    consumed = ("prompt", "response_1", "response_2", "preference_strength", "preference_statement",
                "preference_elaboration")
    for index, row in rows:
        if not isinstance(row, dict):
            yield row
            continue
        if not isinstance(row.get("prompt"), str):
            yield Drop("missing_field", f"row {index}: expected a string 'prompt'")
            continue
        order = _ordered(row.get("response_1"), row.get("response_2"), row.get("preference_strength"), index,
                         "preference_strength")
        if isinstance(order, Drop):
            yield order
            continue
        out = {"prompt": helpsteer2_messages(row["prompt"]), "chosen": order[0], "rejected": order[1]}
        yield _with_extras(row, out, consumed)


def helpsteer2_ratings(rows: Iterable[tuple[int, Any]]) -> Converted:
    """Consecutive rows with the same prompt form a group (the released files keep them adjacent)."""
    group: list[dict] = []
    start = 0
    for index, row in rows:
        if not isinstance(row, dict):
            yield row
            continue
        if not isinstance(row.get("prompt"), str):
            yield Drop("missing_field", f"row {index}: expected a string 'prompt'")
            continue
        if group and row["prompt"] != group[0]["prompt"]:
            yield _rated_pair(group, start)
            group = []
        if not group:
            start = index
        group.append(row)
    if group:
        yield _rated_pair(group, start)


def _rated_pair(group: list[dict], index: int) -> dict | Drop:
    rated = [r for r in group if isinstance(r.get("helpfulness"), (int, float))]
    if len(rated) < 2:
        return Drop("missing_field", f"rows from {index}: fewer than two rated responses for this prompt")
    best = max(rated, key=lambda r: r["helpfulness"])
    worst = min(rated, key=lambda r: r["helpfulness"])
    if best["helpfulness"] == worst["helpfulness"]:
        return Drop("tie", f"rows from {index}: all responses have helpfulness {best['helpfulness']}")
    return {"prompt": helpsteer2_messages(best["prompt"]), "chosen": best["response"], "rejected": worst["response"],
            "metadata": {"helpfulness_chosen": best["helpfulness"], "helpfulness_rejected": worst["helpfulness"]}}


CONVERTERS: dict[str, Callable[[Iterable[tuple[int, Any]]], Converted]] = {
    "helpsteer3": helpsteer3,
    "helpsteer2_preference": helpsteer2_preference,
    "helpsteer2_ratings": helpsteer2_ratings,
}


def rename_columns(rows: Iterable[tuple[int, Any]], columns: dict[str, str]) -> Converted:
    """Rows with canonical field names: `columns` maps canonical name -> the source's column name
    (e.g. {"prompt": "input", "chosen": "accepted"}); the source's own column is removed."""
    for _, row in rows:
        if isinstance(row, dict):
            row = dict(row)
            for target, column in columns.items():
                if column in row:
                    row[target] = row.pop(column)
        yield row
