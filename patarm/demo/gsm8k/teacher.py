"""The verifier teacher: judgments written from math-verify against the reference answer, run as the skill's own
`reference-match` verifier (`patarm.skills.verifiers.reference_match`) on a session with the reference mounted.

Its `<eval>` states the evidence before the verdict — the response's final answer, then the reference answer
(or "not mounted" in the arm that does not disclose it), then `correct :: pass|fail` — and `<score>` follows
from the verdict (9 / 2). The teacher always knows the reference; the judge of the undisclosed arm is taught
the same verdicts without it. A backend (`kind: patarm.demo.gsm8k.teacher:VerifierTeacher`): it reads the pair
and side of each prompt from `metadata`, as `patarm.prep.corpus` passes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from patarm.backends.base import BackendError, OnResult
from patarm.data import PreferencePair
from patarm.data.schema import Messages

PASS_SCORE, FAIL_SCORE = 9, 2
MAX_ANSWER_CHARS = 40  # a final answer shown in the evidence is cut here (the pool's are numbers)
NOT_MOUNTED = "not mounted"


def shown_answer(text: str) -> str:
    """A final answer as the evidence shows it: one line, at most MAX_ANSWER_CHARS characters."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_ANSWER_CHARS else line[:MAX_ANSWER_CHARS - 1] + "…"


def judgment_text(answer: str, reference: str | None, correct: bool) -> str:
    """The teacher's judgment: evidence lines (`criterion :: value`), the verdict, then the score."""
    return (
        f"<eval>\nfinal answer :: {shown_answer(answer) or 'none'}\n"
        f"reference answer :: {NOT_MOUNTED if reference is None else shown_answer(reference)}\n"
        f"correct :: {'pass' if correct else 'fail'}\n</eval>\n<score>{PASS_SCORE if correct else FAIL_SCORE}</score>"
    )


def verify(question: str, response: str, reference: str) -> tuple[str, bool]:
    """(the response's final answer, whether it equals the reference) from the skill's reference-match verifier."""
    from patarm.demo.gsm8k.prompts import REFERENCE_ID, load_judge_skill
    from patarm.skills.session import SkillSession, mount
    from patarm.verify.mathans import final_answer

    session = SkillSession(load_judge_skill(), {"prompt": question, "candidates": [response], "domain": "math"},
                           [mount(REFERENCE_ID, "reference", reference, "the reference final answer")])
    observation = session.run_resource("reference-match")
    if "error" in observation:
        raise BackendError(f"VerifierTeacher: the reference-match verifier failed: {observation['error']}")
    return final_answer(response), observation["evidence"][0]["assessment"] == "pass"


class VerifierTeacher:
    """Pointwise judgments of GSM8K solutions from the verifier; deterministic, so never cached."""

    model_id = "verifier-teacher(math-verify reference-match)"

    def sampling(self) -> dict[str, Any]:
        return {"pass_score": PASS_SCORE, "fail_score": FAIL_SCORE}

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None, on_result: OnResult | None = None) -> list[list[str]]:
        if metadata is None or len(metadata) != len(prompts):
            raise BackendError("VerifierTeacher needs metadata: one {'pair', 'side'} per prompt (patarm.prep.corpus "
                               "passes it)")
        out = []
        for i, meta in enumerate(metadata):
            pair, side = meta.get("pair"), meta.get("side")
            if isinstance(pair, dict):
                pair = PreferencePair.from_dict(pair)
            if not isinstance(pair, PreferencePair) or side not in ("chosen", "rejected") \
                    or "reference" not in pair.metadata:
                raise BackendError(f"VerifierTeacher: metadata[{i}] needs a GSM8K pair (with metadata['reference']) "
                                   "and a side; build pairs with patarm.demo.gsm8k.data.make_pairs")
            answer, correct = verify(pair.question, getattr(pair, side), str(pair.metadata["reference"]))
            shown = str(pair.metadata["reference"]) if pair.metadata.get("disclose") else None
            out.append([judgment_text(answer, shown, correct)] * num_samples)
        return out
