"""LLaMA-Factory's preference layouts.

* ``sharegpt``  ``{"conversations": [{"from", "value"}], "chosen": {...}, "rejected": {...}, "system"?}``
* ``messages``  v1: ``{"chosen_messages": [...], "rejected_messages": [...]}`` (full conversations)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from patarm.data.layouts.base import Layout, Parts, RowProblem
from patarm.data.layouts.chat import conversation_pair, messages, reply


def _sharegpt(row: dict[str, Any], options: Mapping[str, Any]) -> Parts:
    """`conversations` is the prompt, `chosen`/`rejected` one gpt turn each."""
    prompt = messages(row.get("conversations"), "conversations")
    system = row.get("system")
    # As in LLaMA-Factory, a leading system turn in the conversation wins over the `system` column.
    if system is not None and not (prompt and prompt[0]["role"] == "system"):
        if not isinstance(system, str):
            raise RowProblem("system", "wrong_type", f"expected a string, got {type(system).__name__}")
        if system.strip():
            prompt.insert(0, {"role": "system", "content": system})
    return Parts(prompt, reply(row.get("chosen"), "chosen"), reply(row.get("rejected"), "rejected"),
                 frozenset({"conversations", "system", "chosen", "rejected"}))


def _messages(row: dict[str, Any], options: Mapping[str, Any]) -> Parts:
    return conversation_pair(row, messages, "chosen_messages", "rejected_messages")


SHAREGPT = Layout(
    "sharegpt", "conversations (from/value turns), chosen, rejected (one gpt turn each), system?",
    convert=_sharegpt, keys=frozenset({"conversations"}))
MESSAGES = Layout(
    "messages", "chosen_messages, rejected_messages (full conversations) -> shared prefix and final turns",
    convert=_messages, keys=frozenset({"chosen_messages"}), aliases=("chosen_messages",))
