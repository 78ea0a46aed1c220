"""The graded verifier teacher's evidence and score scale: what can be checked about one GSM8K solution, and the
score that follows from it.

Evidence (each line of the `<eval>`, in this order, then the score):

    final answer :: 26                the text after the response's last "A:"
    reference answer :: 18            or "not mounted" when the arm does not disclose it
    correct :: fail                   the final answer against the reference: pass | fail | unknown (not mounted)
    wrong steps :: 0 of 2             the `<<a op b=c>>` calculator steps re-computed: wrong ones of those checkable
    last step :: 26                   the last calculator step's stated result, or "none"
    follows :: yes                    the final answer equals the last step's result: yes | no | no step
    unused numbers :: none            numbers of the question the solution never mentions (up to 3), or "none"
    agreement :: 2 of 4               (the `evidence` arm with `evidence_agreement` only) how many of the problem's
                                      candidates, this one included, give an equivalent final answer
    issues :: 0                       (with `issues_line` only) the count of issues the lines above state

The verdict comes right after the two answers it compares (it came last until 2026-12-02): with it there, the
SFT judge's P(pass) at the verdict separated the correct from the incorrect solution of a held-out pair 0.935 of the
time in a seed-0 probe, against 0.557 with the verdict four lines further on; the recipe over seeds 0-2 gives
0.793 ± 0.088 (docs/gsm8k-skill.md, "The verdict in probability").

Scale (1-10). An *issue* is one of: a wrong calculator step, a final answer that does not follow the last step,
an unused number of the question — so 0-3 issues.

    reference mounted, correct :: pass    10 − issues      (7-10)
    reference mounted, correct :: fail     4 − issues      (1-4)
    not mounted (correct :: unknown)       7 − 3 × issues  (7, 4, 1)
    not mounted, agreement k of n stated   2 + 2 × k − issues, within 1-10  (k = 1..4 of 4: 4, 6, 8, 10 − issues)
    no final answer                        1

The agreement line is the skill's `answer-agreement` verifier (self-consistency across the candidates of a
problem), disclosed in the `evidence` arm's prompt beside the arithmetic check: with it the rule picks 50.67 % of
the held-out problems best-of-4 (seed 0) and 49.76 % of the whole pool — above the training-free skill (50.08 /
48.27) and majority vote (49.75 / 48.16), where the arithmetic check alone gives 40.92 / 41.79
(`bench/gsm8k_teacher.py`).

With `issues_line` (the recipe's `teacher_issues_line`, the default since 2026-12-06) the teacher also states the
count of issues as a last `<eval>` line, so the score is a lookup from a stated number rather than a sum the judge
must do while writing the score: the seed-0 SFT judge's commonest slip was a `follows :: no` it stated and did not
subtract.

With the reference, every correct solution outranks every incorrect one (≥ 7 vs ≤ 4: a chosen/rejected margin
δ ≥ 3 > 2, PAR's graded f(δ) pays its higher value), and the issues order the solutions within each side, so the
top score is rarely shared. Without it the score is the evidence-only rule (the `evidence` and `no-reference`
arms' teacher); its steps of 3 let the paper's SFT filter (δ > 2) keep the pairs the evidence separates. The
score is a function of the stated lines alone (`score_of`), so a judgment can be checked against itself
(`patarm.demo.gsm8k.consistency`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from patarm.skills.verifiers import calculator_steps, unused_numbers

MAX_ANSWER_CHARS = 40  # a final answer shown in the evidence is cut here (the pool's are numbers)
NOT_MOUNTED = "not mounted"
FIELDS = ("final answer", "reference answer", "correct", "wrong steps", "last step", "follows", "unused numbers")
ISSUES = "issues"  # the optional last line (`issues_line`): the count of issues stated above it
AGREEMENT = "agreement"  # the optional line of the evidence arm with the answer-agreement resource: "k of n"


_PLAIN_NUMBER = re.compile(r"^\$?(-?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d*))?$")


def canonical_number(text: str) -> str:
    """A plain number in one canonical spelling, anything else unchanged: thousands commas and a leading `$`
    dropped, trailing decimal zeros and point dropped (`$5,600.00` → `5600`, `75.00` → `75`, `-0.0` → `0`,
    `0.50` → `0.5`). The graded teacher with `teacher_numbers: canonical` states answers and steps this way, so
    that `follows` and `correct` are string equalities a small judge can copy instead of numeric ones (`5600` vs
    `5,600`)."""
    m = _PLAIN_NUMBER.match(text.strip())
    if not m:
        return text
    sign, whole, frac = m.group(1), m.group(2).replace(",", "").lstrip("0") or "0", (m.group(3) or "").rstrip("0")
    out = whole + ("." + frac if frac else "")
    return out if out == "0" or not sign else "-" + out


def shown_answer(text: str, canonical: bool = False) -> str:
    """A final answer as the evidence shows it: one line, at most MAX_ANSWER_CHARS characters (a plain number in
    its canonical spelling with `canonical`)."""
    line = " ".join(text.split())
    line = canonical_number(line) if canonical else line
    return line if len(line) <= MAX_ANSWER_CHARS else line[:MAX_ANSWER_CHARS - 1] + "…"


@dataclass(frozen=True)
class Evidence:
    """What the graded teacher checked about one solution (all as the judgment states it)."""

    final: str                  # shown final answer, "" when there is none
    reference: str | None       # shown reference answer; None: not mounted
    correct: bool | None        # final answer == reference (math-verify); None: not mounted
    steps: int                  # calculator steps that could be checked
    wrong: int                  # of them, wrong
    last: str | None            # the last step's stated result; None: no step
    follows: bool | None        # final answer == last step's result; None: no step
    unused: tuple[str, ...]     # numbers of the question never mentioned (at most 3 shown)
    agree: tuple[int, int] | None = None  # (k, n): k of the n candidates give this final answer; None: not disclosed

    @property
    def issues(self) -> int:
        return (self.wrong > 0) + (self.follows is False) + bool(self.unused)


def score_of(e: Evidence) -> int:
    """The graded scale (module docstring) applied to stated evidence."""
    if not e.final:
        return 1
    if e.correct is None:
        if e.agree is not None:
            return max(1, min(10, 2 + 2 * e.agree[0] - e.issues))
        return max(1, 7 - 3 * e.issues)
    return 10 - e.issues if e.correct else max(1, 4 - e.issues)


def among(response: str, peers: list[str]) -> tuple[list[str], int]:
    """The candidates `response` is judged among and its index there: the problem's `peers`; a response that is not
    one of them takes the place of the peer it was made from (a near miss: the same text before its last `A:` line),
    so both sides of a near-miss pair are judged among as many candidates (else it is added at the end)."""
    from patarm.demo.gsm8k.data import ANSWER_MARKER

    if response in peers:
        return list(peers), peers.index(response)
    body = response.rpartition(ANSWER_MARKER)[0]
    source = next((k for k, p in enumerate(peers) if body and p.rpartition(ANSWER_MARKER)[0] == body), None)
    if source is None:
        return [*peers, response], len(peers)
    return [*peers[:source], response, *peers[source + 1:]], source


def agreement(response: str, peers: list[str]) -> tuple[int, int]:
    """(k, n): how many of the n candidates `response` is judged among (`among`), itself included, give its final
    answer (the skill's `answer-agreement`)."""
    from patarm.skills.verifiers import shared_counts

    candidates, index = among(response, peers)
    return shared_counts(candidates)[index], len(candidates)


def gather(question: str, response: str, reference: str | None, correct: bool | None = None,
           canonical: bool = False, peers: list[str] | None = None) -> Evidence:
    """The evidence of one solution; `correct` (math-verify against the reference) is computed here unless given,
    and is None when `reference` is None (not mounted). `canonical`: the answers and the last step are stated in
    their canonical spelling (`canonical_number`); the checks are the same either way. `peers`: the problem's
    candidates, for the agreement line (`agreement`)."""
    from patarm.verify.mathans import answers_equal, final_answer

    final = shown_answer(final_answer(response), canonical)
    checked, wrong, last = calculator_steps(response)
    if reference is not None and correct is None:
        correct = answers_equal(reference, final_answer(response))
    last = shown_answer(last, canonical) if last else None
    follows = None if last is None else bool(final) and answers_equal(last, final)
    return Evidence(final, None if reference is None else shown_answer(reference, canonical),
                    None if reference is None else bool(correct), checked, len(wrong), last, follows,
                    tuple(unused_numbers(question, response)[:3]),
                    None if peers is None else agreement(response, peers))


def verdict_word(correct: bool | None) -> str:
    return "unknown" if correct is None else ("pass" if correct else "fail")


def eval_lines(e: Evidence, issues_line: bool = False) -> list[str]:
    """The `<eval>` lines: the two answers, the verdict on them, then the steps' evidence (`FIELDS`' order), then
    the agreement when disclosed, then with `issues_line` the count of issues."""
    follows = "no step" if e.follows is None else ("yes" if e.follows else "no")
    lines = [f"final answer :: {e.final or 'none'}",
             f"reference answer :: {NOT_MOUNTED if e.reference is None else e.reference}",
             f"correct :: {verdict_word(e.correct)}", f"wrong steps :: {e.wrong} of {e.steps}",
             f"last step :: {e.last or 'none'}", f"follows :: {follows}",
             f"unused numbers :: {', '.join(e.unused) or 'none'}"]
    if e.agree is not None:
        lines.append(f"{AGREEMENT} :: {e.agree[0]} of {e.agree[1]}")
    return lines + ([f"{ISSUES} :: {e.issues}"] if issues_line else [])


def rubric_lines(question: str, reference: str | None, canonical: bool = False) -> list[str]:
    """Sample-specific criteria for the adaptive rubric mode: written from the question (and the reference when
    mounted, in its canonical spelling with `canonical`) before the response is assessed."""
    given = unused_numbers(question, "")  # every number of the question
    lines = [f"1. use every number given: {', '.join(given[:6]) or 'none'}", "2. every calculator step is right",
             "3. the final answer is the last step's result"]
    if reference is not None:
        lines.append(f"4. the final answer equals {shown_answer(reference, canonical)}")
    return lines


def judgment_text(e: Evidence, rubric: list[str] | None = None, issues_line: bool = False) -> str:
    """The graded teacher's judgment: (`<rubric>` in the adaptive mode,) the `<eval>` lines, `<score>`."""
    head = "" if rubric is None else "<rubric>\n" + "\n".join(rubric) + "\n</rubric>\n"
    return head + "<eval>\n" + "\n".join(eval_lines(e, issues_line)) + f"\n</eval>\n<score>{score_of(e)}</score>"
