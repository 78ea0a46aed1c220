"""Evidence–verdict consistency: does a judgment's verdict and score follow from the evidence it states itself?

A judgment is checked against its own `<eval>` lines (`criterion :: value`), never against the truth:

- `correct` agrees with the stated answers: `pass` exactly when the stated final answer equals the stated
  reference answer (math-verify); `unknown` when the reference is "not mounted" (graded scale; the binary scale
  writes pass/fail without a reference, which cannot be checked and is counted consistent);
- graded scale only: `follows` agrees with the stated last step and final answer, and an `issues` line (where the
  teacher states one: `teacher_issues_line`) with the issues the lines above it state; an `agreement` line (`k of
  n`, the evidence arm with `evidence_agreement`) must be readable, k between 1 and n, and enters the score;
- the score is the scale's score of the stated evidence (`evidence.score_of`; binary: 9 for pass, 2 for fail).

Statuses: `consistent`, `inconsistent` (a stated conclusion contradicts stated evidence), `incomplete` (no score,
or a line the scale needs is missing or unreadable). The rate is consistent / all judgments.

    python -m patarm.demo.gsm8k.consistency runs/gsm8k-skill/reference/eval/*.jsonl   # per stage
    python -m patarm.demo.gsm8k.consistency --each runs/gsm8k-skill/reference/eval/grpo.jsonl   # each one that is not
    python -m patarm.demo.gsm8k.consistency --kinds runs/gsm8k-skill/evidence/eval/*.jsonl   # how many of each kind
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable
from typing import Any

from patarm.demo.gsm8k.evidence import AGREEMENT, FIELDS, ISSUES, NOT_MOUNTED, Evidence, score_of

_LINE = re.compile(r"^\s*(?:[-*]\s*)?([^:\n]+?)\s*::\s*(.*?)\s*$")
_STEPS = re.compile(r"^(\d+) of (\d+)$")
_QUOTED = re.compile(r"'[^']*'")
BINARY_FIELDS = ("final answer", "reference answer", "correct")


def stated(evaluation: str | None) -> dict[str, str]:
    """The `criterion :: value` lines of an `<eval>` (the first of each criterion)."""
    out: dict[str, str] = {}
    for line in (evaluation or "").splitlines():
        m = _LINE.match(line)
        if m and m.group(1).lower() not in out:
            out[m.group(1).lower()] = m.group(2)
    return out


def _equal(a: str, b: str) -> bool:
    from patarm.verify.mathans import answers_equal

    return bool(a) and bool(b) and a != "none" and b != "none" and answers_equal(a, b)


def _check_graded(lines: dict[str, str], score: float) -> tuple[str, str]:
    steps, follows, verdict = _STEPS.match(lines["wrong steps"]), lines["follows"], lines["correct"]
    if not steps or follows not in ("yes", "no", "no step") or verdict not in ("pass", "fail", "unknown"):
        return "incomplete", "unreadable wrong steps / follows / correct"
    final, reference, last = (lines[k] for k in ("final answer", "reference answer", "last step"))
    mounted = reference != NOT_MOUNTED
    if not mounted and verdict != "unknown":
        return "inconsistent", f"correct :: {verdict} without a reference"
    if mounted and verdict != ("pass" if _equal(final, reference) else "fail"):
        return "inconsistent", f"correct :: {verdict} but final answer {final!r} vs reference {reference!r}"
    if (follows == "no step") != (last == "none") or (last != "none" and (follows == "yes") != _equal(last, final)):
        return "inconsistent", f"follows :: {follows} but last step {last!r}, final answer {final!r}"
    unused = lines["unused numbers"]
    agree = _agreement(lines)
    if agree is False:
        return "incomplete", f"unreadable agreement {lines[AGREEMENT]!r}"
    e = Evidence("" if final == "none" else final, reference if mounted else None,
                 None if not mounted else verdict == "pass", int(steps.group(2)), int(steps.group(1)),
                 None if last == "none" else last, None if follows == "no step" else follows == "yes",
                 () if unused == "none" else tuple(unused.split(", ")), agree)
    if ISSUES in lines and lines[ISSUES] != str(e.issues):
        return "inconsistent", f"issues :: {lines[ISSUES]} but the stated evidence has {e.issues}"
    if score != score_of(e):
        return "inconsistent", f"score {score:g} but the stated evidence gives {score_of(e)}"
    return "consistent", ""


def _agreement(lines: dict[str, str]) -> tuple[int, int] | None | bool:
    """The stated `agreement :: k of n` as (k, n); None when not stated, False when unreadable (k outside 1..n)."""
    if AGREEMENT not in lines:
        return None
    m = _STEPS.match(lines[AGREEMENT])
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        return False
    return int(m.group(1)), int(m.group(2))


def _check_binary(lines: dict[str, str], score: float) -> tuple[str, str]:
    from patarm.demo.gsm8k.teacher import FAIL_SCORE, PASS_SCORE

    verdict, reference = lines["correct"], lines["reference answer"]
    if verdict not in ("pass", "fail"):
        return "incomplete", "unreadable correct"
    if reference != NOT_MOUNTED and verdict != ("pass" if _equal(lines["final answer"], reference) else "fail"):
        return (
            "inconsistent",
            f"correct :: {verdict} but final answer {lines['final answer']!r} vs reference {reference!r}",
        )
    if score != (PASS_SCORE if verdict == "pass" else FAIL_SCORE):
        return "inconsistent", f"score {score:g} but correct :: {verdict}"
    return "consistent", ""


def check(text: Any, scale: str = "auto") -> tuple[str, str]:
    """(status, reason) of one judgment (its text, or a parsed `Judgment`); `scale` graded | binary | auto (graded
    when it states wrong steps)."""
    from patarm.judge import Judgment, parse_judgment

    judgment = text if isinstance(text, Judgment) else parse_judgment(text, "pointwise-compact")
    lines = stated(judgment.evaluation)
    if scale == "auto":
        scale = "graded" if "wrong steps" in lines else "binary"
    need = FIELDS if scale == "graded" else BINARY_FIELDS
    missing = [k for k in need if k not in lines]
    if judgment.score is None or missing:
        return "incomplete", "no score" if judgment.score is None else f"missing {', '.join(missing)}"
    return (_check_graded if scale == "graded" else _check_binary)(lines, judgment.score)


def readout(text: str) -> float | None:
    """Skill-RM's deterministic readout: the graded scale applied to the facts a judgment states (its final answer,
    reference answer, wrong steps, last step, unused numbers and agreement where stated), with its own conclusions
    (`correct`, `follows`, the score) recomputed from them; None when a fact the scale needs is missing or
    unreadable."""
    from patarm.judge import parse_judgment

    lines = stated(parse_judgment(text, "pointwise-compact").evaluation)
    if any(k not in lines for k in FIELDS if k not in ("correct", "follows")):
        return None
    steps = _STEPS.match(lines["wrong steps"])
    if not steps:
        return None
    final, reference, last = (lines[k] for k in ("final answer", "reference answer", "last step"))
    mounted = reference != NOT_MOUNTED
    unused = lines["unused numbers"]
    final = "" if final == "none" else final
    agree = _agreement(lines)
    if agree is False:
        return None
    e = Evidence(final, reference if mounted else None, _equal(final, reference) if mounted else None,
                 int(steps.group(2)), int(steps.group(1)), None if last == "none" else last,
                 None if last == "none" else _equal(last, final), () if unused == "none" else tuple(unused.split(", ")),
                 agree)
    return float(score_of(e))


def readout_records(records: Iterable[dict]) -> list[dict]:
    """Evaluation records with every candidate's score replaced by the readout of its judgment text (valid when
    the judgment states the facts the scale needs)."""
    out = []
    for r in records:
        scores = [readout(t) for t in r["texts"]]
        out.append({**r, "scores": scores, "valid": [s is not None for s in scores]})
    return out


def summarize(texts: Iterable[str], scale: str = "auto") -> dict:
    """Counts per status, the consistent rate (of all judgments) and up to 3 example reasons per status."""
    counts: Counter = Counter()
    examples: dict[str, list[str]] = {}
    for text in texts:
        status, reason = check(text, scale)
        counts[status] += 1
        if reason and len(examples.setdefault(status, [])) < 3:
            examples[status].append(reason)
    n = sum(counts.values())
    return {"judgments": n, "consistent_rate": counts["consistent"] / n if n else 0.0, **{k: counts[k] for k in
            ("consistent", "inconsistent", "incomplete")}, "examples": examples}


def kinds(texts: Iterable[str], scale: str = "auto") -> Counter:
    """The judgments that are not consistent by kind: the reason with the numbers the judgment quotes masked
    (`follows :: yes but last step …, final answer …`); a score and the one its evidence gives stay (they say
    which rule was broken: `score 8 but the stated evidence gives 10`)."""
    out: Counter = Counter()
    for text in texts:
        status, reason = check(text, scale)
        if status != "consistent":
            out[f"{status}: {_QUOTED.sub('…', reason)}"] += 1
    return out


def evidence_reward(completions: list, **kwargs) -> list[float]:
    """A GRPO reward beside PAR (`extra_rewards: ["patarm.demo.gsm8k.consistency:evidence_reward"]`): 0 for a
    judgment whose verdict, `follows` and score follow from the facts it states itself (`check`), −1 for one that
    contradicts them or leaves a field out. It reads no label: the skill's own aggregation rule held against the
    judgment, as the format penalty holds its tags — a field stated twice counts as contradicting itself."""
    from patarm.judge import parse_judgment
    from patarm.rewards import completion_text

    out = []
    for completion in completions:
        judgment = parse_judgment(completion_text(completion), "pointwise-compact")  # parsed once, read twice
        out.append(0.0 if check(judgment)[0] == "consistent" and not _doubled(judgment.evaluation) else -1.0)
    return out


def _doubled(evaluation: str | None) -> bool:
    """Whether a `criterion :: value` line of an `<eval>` names a criterion a second time."""
    names = [m.group(1).lower() for line in (evaluation or "").splitlines() if (m := _LINE.match(line))]
    return len(names) != len(set(names))


def main(argv: list[str]) -> int:
    """Per file of evaluation records (`eval/<stage>.jsonl`, a `texts` list per problem) or of SFT rows; `--each`
    also prints every judgment that is not consistent: its problem (or row), candidate, status and reason."""
    import argparse

    from patarm.io import read_jsonl

    ap = argparse.ArgumentParser(prog="python -m patarm.demo.gsm8k.consistency",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="eval/<stage>.jsonl records or SFT rows (JSONL)")
    ap.add_argument("--each", action="store_true", help="print every inconsistent or incomplete judgment")
    ap.add_argument("--kinds", action="store_true", help="count the judgments that are not consistent by kind "
                    "(the reason, the numbers it quotes masked), most frequent first")
    args = ap.parse_args(argv)
    if not args.files:
        print(__doc__.strip().splitlines()[-1].strip())
        return 2
    for path in args.files:
        try:
            rows = read_jsonl(path)
        except (OSError, ValueError) as e:  # one line and exit 2, as argparse reports a bad argument
            ap.error(f"{path}: {e}; give eval/<stage>.jsonl records or SFT rows (JSONL)")
        items = [(r.get("problem", f"row {i}"), j, t) for i, r in enumerate(rows, 1)
                 for j, t in enumerate(r.get("texts") or [])]
        if not items:   # SFT rows: the assistant message
            items = [(r.get("pair_id", f"row {i}"), r.get("side", 0), m["content"]) for i, r in enumerate(rows, 1)
                     for m in (r.get("messages") or [])[-1:]]
        s = summarize(t for _, _, t in items)
        print(f"{path}: {s['consistent']}/{s['judgments']} consistent ({s['consistent_rate']:.3f}), "
              f"{s['inconsistent']} inconsistent, {s['incomplete']} incomplete; e.g. {s['examples']}")
        if args.kinds:
            for kind, count in kinds(t for _, _, t in items).most_common():
                print(f"  {count:5d}  {kind}")
        if args.each:
            for where, which, text in items:
                status, reason = check(text)
                if status != "consistent":
                    print(f"  {where} [{which}] {status}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

