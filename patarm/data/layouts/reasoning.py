"""The paper's math and code preference sets (PaTaRM Appendix C).

* ``math_step_dpo``          xinlai/Math-Step-DPO-10K: `prompt`, `initial_reason_steps`, `chosen`, `rejected`,
  `full_chosen`, `full_rejected`, `answer`. A judge rates whole solutions, so the responses are
  `full_chosen` / `full_rejected` (the initial steps and the step continuation); the gold `answer` is kept
  as metadata (a verifier can use it).
* ``code_preference_pairs``  Vezora/Code-Preference-Pairs: `input`, `accepted`, `rejected`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from patarm.data.layouts.base import Layout, Parts, text, user_prompt


def _math_step_dpo(row: dict[str, Any], options: Mapping[str, Any]) -> Parts:
    meta = {"answer": row["answer"]} if isinstance(row.get("answer"), str) else None
    return Parts(user_prompt(text(row, "prompt")), text(row, "full_chosen"), text(row, "full_rejected"),
                 frozenset({"prompt", "initial_reason_steps", "chosen", "rejected", "full_chosen", "full_rejected",
                            "answer"}), meta)


def _code_preference(row: dict[str, Any], options: Mapping[str, Any]) -> Parts:
    return Parts(user_prompt(text(row, "input")), text(row, "accepted"), text(row, "rejected"),
                 frozenset({"input", "accepted", "rejected"}))


MATH_STEP_DPO = Layout(
    "math_step_dpo", "prompt, initial_reason_steps, chosen, rejected, full_chosen, full_rejected, answer -> "
    "prompt, full_chosen, full_rejected", convert=_math_step_dpo,
    keys=frozenset({"prompt", "initial_reason_steps", "full_chosen", "full_rejected"}), aliases=("step_dpo",))
CODE_PREFERENCE_PAIRS = Layout(
    "code_preference_pairs", "input, accepted, rejected -> prompt, chosen, rejected",
    convert=_code_preference, keys=frozenset({"input", "accepted", "rejected"}), aliases=("code_preference",))
