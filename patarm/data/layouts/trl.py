"""TRL's preference layouts, and our own canonical pairs.jsonl.

* ``standard``        ``{"prompt": str, "chosen": str, "rejected": str}``
* ``conversational``  ``{"prompt": [msgs], "chosen": [msgs], "rejected": [msgs]}``
* ``canonical``       our pairs.jsonl: ``{"id", "prompt": [msgs], "chosen": str, "rejected": str, ...}``
* ``implicit_prompt`` ``{"chosen": [full conversation], "rejected": [full conversation]}`` (Skywork-Reward-
  Preference): the shared prefix is the prompt, the final assistant turns the responses.

A response may also repeat the prompt before its reply (UltraFeedback-binarized does); that is accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from patarm.data.layouts.base import Layout, Parts, RowProblem, user_prompt
from patarm.data.layouts.chat import conversation_pair, messages, reply

_EXPLICIT_KEYS = frozenset({"prompt", "chosen", "rejected"})


def explicit_kind(row: dict[str, Any]) -> str:
    """Which of the three explicit-prompt layouts a row with a `prompt` is in (by the values' types)."""
    if isinstance(row.get("prompt"), str):
        return "standard"
    return "canonical" if isinstance(row.get("chosen"), str) else "conversational"


def _explicit(kind: str):
    def convert(row: dict[str, Any], options: Mapping[str, Any]) -> Parts:
        value = row.get("prompt")
        if value is None:
            raise RowProblem("prompt", "missing_field", "the row has no 'prompt'")
        label = explicit_kind(row)
        if label != kind:  # only reachable when the caller named the layout
            field = "prompt" if (kind == "standard") != (label == "standard") else "chosen"
            raise RowProblem(field, "wrong_type", f"layout {kind!r} was requested but the row looks like {label!r}")
        prompt = user_prompt(value) if isinstance(value, str) else messages(value, "prompt")
        return Parts(prompt, reply(row.get("chosen"), "chosen", prompt),
                     reply(row.get("rejected"), "rejected", prompt), _EXPLICIT_KEYS)
    return convert


def explicit_parts(row: dict[str, Any]) -> Parts:
    """A row with an explicit `prompt` in whichever of the three explicit layouts its types say."""
    return _CONVERTERS[explicit_kind(row)](row, {})


def _implicit(row: dict[str, Any], options: Mapping[str, Any]) -> Parts:
    return conversation_pair(row, messages, "chosen", "rejected")


def _no_prompt(row: dict) -> str:
    value = row.get("prompt")
    return "no 'prompt'" if value is None else f"the values' types make it {explicit_kind(row)!r}"


_CONVERTERS = {kind: _explicit(kind) for kind in ("standard", "conversational", "canonical")}


# Type tests for auto-detection; they run on every row of a file, so each is one expression.
STANDARD = Layout(
    "standard", "prompt (text), chosen, rejected (texts) -> a one-turn prompt and the two texts",
    convert=_CONVERTERS["standard"], fits=lambda row: type(row.get("prompt")) is str, why_not=_no_prompt)
CONVERSATIONAL = Layout(
    "conversational", "prompt, chosen, rejected (message lists) -> the prompt messages and the two replies",
    convert=_CONVERTERS["conversational"],
    fits=lambda row: row.get("prompt") is not None and not isinstance(row["prompt"], str)
    and not isinstance(row.get("chosen"), str), why_not=_no_prompt)
CANONICAL = Layout(
    "canonical", "id, prompt (messages), chosen, rejected (texts), domain, source, metadata: our pairs.jsonl",
    convert=_CONVERTERS["canonical"],
    fits=lambda row: row.get("prompt") is not None and not isinstance(row["prompt"], str)
    and isinstance(row.get("chosen"), str), why_not=_no_prompt)
IMPLICIT_PROMPT = Layout(
    "implicit_prompt", "chosen, rejected (full conversations) -> their shared prefix and final assistant turns",
    convert=_implicit, aliases=("skywork", "implicit"),
    fits=lambda row: row.get("prompt") is None and isinstance(row.get("chosen"), list),
    why_not=lambda row: "it has a 'prompt'" if row.get("prompt") is not None else "'chosen' is not a list of messages")
