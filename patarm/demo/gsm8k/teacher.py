"""The recipe's verifier teachers: judgments written from checks a program can make, run as the skill's own
verifiers (`reference-match`: math-verify against the reference, `patarm.skills.verifiers`) on a session with
the reference mounted. Each `<eval>` states the evidence before the verdict, and `<score>` follows from it.

- `graded` (the recipe default, `GradedTeacher`): the final answer against the reference, every `<<a op b=c>>`
  calculator step re-computed, whether the final answer follows from the last step and which numbers of the
  question go unused; the 1-10 scale of `patarm.demo.gsm8k.evidence`. Without the reference (the `no-reference`
  and `evidence` arms) the score is the evidence-only rule and the verdict `unknown`: the judge is never taught a
  verdict it could not derive from what it states.
- `binary` (`VerifierTeacher`, the first recipe's): the response's final answer, the reference answer (or "not
  mounted"), `correct :: pass|fail`, then 9 / 2. The teacher always knows the reference; the judge of the
  undisclosed arm is taught the same verdicts without it.

Both are backends (`kind: patarm.demo.gsm8k.teacher:GradedTeacher`): they read the pair and side of each prompt
from `metadata`, as `patarm.prep.corpus` passes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from patarm.backends.base import BackendError, OnResult
from patarm.data import PreferencePair
from patarm.data.schema import Messages
from patarm.demo.gsm8k.evidence import NOT_MOUNTED, gather, rubric_lines, shown_answer
from patarm.demo.gsm8k.evidence import judgment_text as graded_text

PASS_SCORE, FAIL_SCORE = 9, 2  # the binary teacher's scores


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


def _pair_side(metadata: Sequence[dict] | None, n: int, name: str) -> list[tuple[PreferencePair, str]]:
    """(pair, side) per prompt from the metadata `patarm.prep.corpus` passes; errors name what is missing."""
    from patarm.demo.teacher import pair_sides

    return pair_sides(metadata, n, name, "reference", "a GSM8K pair", "patarm.demo.gsm8k.data.make_pairs")


class VerifierTeacher:
    """Binary pointwise judgments (9 / 2) of GSM8K solutions from the verifier; deterministic, so never cached."""

    model_id = "verifier-teacher(math-verify reference-match)"

    def sampling(self) -> dict[str, Any]:
        return {"pass_score": PASS_SCORE, "fail_score": FAIL_SCORE}

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None, on_result: OnResult | None = None) -> list[list[str]]:
        out = []
        for pair, side in _pair_side(metadata, len(prompts), "VerifierTeacher"):
            answer, correct = verify(pair.question, getattr(pair, side), str(pair.metadata["reference"]))
            shown = str(pair.metadata["reference"]) if pair.metadata.get("disclose") else None
            out.append([judgment_text(answer, shown, correct)] * num_samples)
        return out


NUMBERS = ("as-written", "canonical")  # how the graded teacher spells the numbers it states


class GradedTeacher:
    """Graded pointwise judgments (1-10) of GSM8K solutions from checkable evidence (`evidence.py`); with
    `rubric_mode="adaptive"` a sample-specific `<rubric>` comes first; with `numbers="canonical"` the answers and
    the last step are stated in one spelling (`evidence.canonical_number`: `5,600` and `5600.00` as `5600`); with
    `issues_line` the count of issues is stated before the score. Deterministic, so never cached."""

    model_id = "graded-verifier-teacher(math-verify reference-match, calculator steps)"

    def __init__(self, rubric_mode: str = "primary", numbers: str = "as-written", issues_line: bool = False):
        if rubric_mode not in ("primary", "adaptive"):
            raise ValueError(f"GradedTeacher: rubric_mode must be primary or adaptive, got {rubric_mode!r}")
        if numbers not in NUMBERS:
            raise ValueError(f"GradedTeacher: numbers must be one of {list(NUMBERS)}, got {numbers!r}")
        self.rubric_mode, self.numbers, self.issues_line = rubric_mode, numbers, bool(issues_line)

    def sampling(self) -> dict[str, Any]:
        return {"scale": "graded 1-10 (patarm.demo.gsm8k.evidence)", "rubric_mode": self.rubric_mode,
                "numbers": self.numbers, "issues_line": self.issues_line}

    def judge(self, question: str, response: str, reference: str, disclose: bool,
              peers: list[str] | None = None) -> str:
        """One judgment; the reference decides correctness only when disclosed (else the evidence-only rule, with
        the agreement across `peers`, the problem's candidates, when given)."""
        shown, canonical = reference if disclose else None, self.numbers == "canonical"
        correct = verify(question, response, reference)[1] if disclose else None
        rubric = rubric_lines(question, shown, canonical) if self.rubric_mode == "adaptive" else None
        return graded_text(gather(question, response, shown, correct, canonical, peers), rubric, self.issues_line)

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None, on_result: OnResult | None = None) -> list[list[str]]:
        return [[self.judge(pair.question, getattr(pair, side), str(pair.metadata["reference"]),
                            bool(pair.metadata.get("disclose")),
                            pair.metadata.get("peers") if pair.metadata.get("evidence") else None)] * num_samples
                for pair, side in _pair_side(metadata, len(prompts), "GradedTeacher")]


TEACHERS = {"graded": GradedTeacher, "binary": VerifierTeacher}
SKILL_OF = {"graded": "gsm8k-judge-graded", "binary": "gsm8k-judge"}  # the compact skill describing its output


def make_teacher(name: str, rubric_mode: str = "primary", numbers: str = "as-written",
                 issues_line: bool = False) -> Any:
    """The teacher named in the recipe config (`teacher:`, `rubric_mode:`, `teacher_numbers:`,
    `teacher_issues_line:`)."""
    if name not in TEACHERS:
        raise ValueError(f"teacher must be one of {sorted(TEACHERS)}, got {name!r}")
    if name == "binary" and rubric_mode != "primary":
        raise ValueError("the binary teacher writes no <rubric>: use rubric_mode primary, or teacher graded")
    if name == "binary" and numbers != "as-written":
        raise ValueError("the binary teacher states numbers as written: use teacher_numbers as-written, or teacher "
                         "graded")
    if name == "binary" and issues_line:
        raise ValueError("the binary teacher counts no issues: use teacher_issues_line false, or teacher graded")
    return GradedTeacher(rubric_mode, numbers, issues_line) if name == "graded" else VerifierTeacher()
