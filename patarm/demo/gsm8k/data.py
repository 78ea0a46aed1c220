"""The GSM8K best-of-4 pool as problems, a seeded split by problem, and the preference pairs built from it.

`example_model_solutions.jsonl` holds, per GSM8K test problem, four models' solutions with `is_correct` flags;
`test.jsonl` the reference solutions (ending in `#### <answer>`). A problem's id is its line number in the pool
(`gsm8k-0042`), so a split is a set of ids and no problem can be on both sides. The `is_correct` flags are the
labels every metric is computed against; the teacher re-derives correctness with math-verify (`teacher.py`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from patarm.data import Manifest, PreferencePair
from patarm.io import DataError, iter_jsonl

# the evidence arm's answer agreement (GSM8KArguments.agreement): None / False off; "facts" (or True) the
# verifier's evidence; "rule" also the score rule it enters, stated in the prompt
Agreement = str | bool | None

POOL_FILE = "example_model_solutions.jsonl"
REFERENCE_FILE = "test.jsonl"


@dataclass
class Problem:
    """One GSM8K problem with its candidate solutions (in the pool's source order) and reference answer."""

    id: str
    question: str
    answer: str  # the reference final answer, from test.jsonl
    sources: list[str]
    solutions: list[str]
    correct: list[bool]  # the pool's is_correct flags

    @property
    def mixed(self) -> bool:
        """Whether the problem has both a correct and an incorrect solution (so it yields pairs)."""
        return any(self.correct) and not all(self.correct)


def _rows(path: Path) -> list[tuple[int, dict]]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: give --data_dir, the folder holding {POOL_FILE} and "
                                f"{REFERENCE_FILE} (GSM8K test solutions of four models, and the reference answers)")
    rows = []
    for index, row in iter_jsonl(path):
        if isinstance(row, DataError):
            raise row
        rows.append((index, row))
    return rows


def load_problems(data_dir: str | Path) -> tuple[list[Problem], Manifest]:
    """Every pool problem with its reference answer (matched to test.jsonl by question text). Errors name the
    file, line and field; the manifest counts problems whose pool `ground_truth` answer differs from test.jsonl's."""
    from patarm.verify.mathans import answers_equal, final_answer

    data_dir = Path(data_dir)
    references = {}
    for index, row in _rows(data_dir / REFERENCE_FILE):
        if not isinstance(row.get("question"), str) or not isinstance(row.get("answer"), str):
            raise DataError(str(data_dir / REFERENCE_FILE), index, "answer", "missing_field",
                            "a reference row needs 'question' and 'answer' text")
        references[row["question"]] = final_answer(row["answer"])
    manifest, problems = Manifest(), []
    for index, row in _rows(data_dir / POOL_FILE):
        manifest.rows_in += 1
        sources = [k for k, v in row.items() if isinstance(v, dict) and "solution" in v]
        if not sources or not isinstance(row.get("question"), str):
            raise DataError(str(data_dir / POOL_FILE), index, "question", "missing_field",
                            "a pool row needs 'question' and per-source {solution, is_correct} objects")
        if row["question"] not in references:
            manifest.drop("no_reference", f"line {index + 1}: question not in {REFERENCE_FILE}")
            continue
        answer = references[row["question"]]
        if isinstance(row.get("ground_truth"), str) and not answers_equal(answer, final_answer(row["ground_truth"])):
            manifest.extra["ground_truth_disagrees"] = manifest.extra.get("ground_truth_disagrees", 0) + 1
        problems.append(Problem(f"gsm8k-{index:04d}", row["question"], answer, sources,
                                [str(row[s]["solution"]) for s in sources],
                                [bool(row[s].get("is_correct")) for s in sources]))
        manifest.rows_out += 1
    return problems, manifest


def split_problems(problems: Sequence[Problem], heldout: int, seed: int) -> tuple[list[Problem], list[Problem]]:
    """(train, held-out): a seeded shuffle of the ids; its first `heldout` problems are held out (in the pool's
    order), the rest train in the shuffled order, so any slice of them is a random sample."""
    if not 0 < heldout < len(problems):
        raise ValueError(f"heldout_problems must be between 1 and {len(problems) - 1}, got {heldout}")
    by_id = {p.id: p for p in problems}
    ids = sorted(by_id)
    random.Random(seed).shuffle(ids)
    return [by_id[i] for i in ids[heldout:]], [by_id[i] for i in sorted(ids[:heldout])]


def make_pairs(problems: Sequence[Problem], per_problem: int, seed: int, disclose: bool,
               skill: str, evidence: bool = False, agreement: Agreement = None) -> list[PreferencePair]:
    """(correct, incorrect) solution pairs of the mixed problems: up to `per_problem` per problem, drawn by a
    seeded shuffle of all such combinations. Each pair carries what the prompt builder and the teacher need:
    the reference answer, whether the arm discloses it, whether it discloses the arithmetic-check evidence,
    the skill, the two sources, and with `agreement` the problem's candidates (`peers`)."""
    rng = random.Random(seed)
    pairs = []
    for p in problems:
        combos = [
            (c, i) for c in range(len(p.sources)) if p.correct[c] for i in range(len(p.sources)) if not p.correct[i]
        ]
        rng.shuffle(combos)
        for c, i in combos[:per_problem]:
            pairs.append(_pair(p, c, p.solutions[i], p.sources[i], disclose, skill, evidence, agreement))
    return pairs


ANSWER_MARKER = "A:"  # the pool's solutions end in `A: <answer>`
NEAR_MISS_KINDS = ("drop-digit", "add-digit", "add-decimal", "sign")


def near_miss(answer: str, rng: random.Random) -> tuple[str, str] | None:
    """(kind, wrong answer) for a plain-number `answer`, None for anything else: a wrong answer that a judge reading
    numbers by their start or their digits takes for the right one — the slips of the trained GSM8K judge
    (`pass` beside `24` against the reference `2`; `follows :: yes` beside a last step `2.1818…` and the answer
    `2`, `312500` and `31250`, `-13` and `13`). Kinds: `drop-digit` (2400 → 240), `add-digit` (2 → 27),
    `add-decimal` (2 → 2.5), `sign` (13 → -13); one is drawn from those that apply."""
    from patarm.demo.gsm8k.evidence import canonical_number

    a = canonical_number(answer.strip())
    if not re.fullmatch(r"-?\d+(\.\d+)?", a):
        return None
    options = [("add-digit", a + str(rng.randint(1, 9)))] if a.lstrip("-") != "0" else []
    if len(a.lstrip("-").replace(".", "")) >= 2:
        options.append(("drop-digit", a[:-1].rstrip(".")))
    if "." not in a:
        options.append(("add-decimal", f"{a}.{rng.randint(1, 9)}"))
    if a != "0":
        options.append(("sign", a[1:] if a.startswith("-") else "-" + a))
    return rng.choice(options)


def near_miss_pairs(problems: Sequence[Problem], count: int, seed: int, disclose: bool, skill: str,
                    evidence: bool = False, agreement: Agreement = None) -> tuple[list[PreferencePair], Manifest]:
    """Up to `count` synthetic pairs, one per problem in order: a correct solution (seeded pick) against the same
    solution with its final answer replaced by a near miss (`near_miss`) — wrong, and no longer the last step's
    result. A judge that compares numbers by their start scores both alike and loses PAR on them, so rejection
    sampling keeps the pairs it gets wrong. The manifest counts the problems skipped (no `A:` line, an answer that
    is not a plain number, a near miss equal to the reference)."""
    from patarm.verify.mathans import answers_equal

    rng, pairs, manifest = random.Random(seed), [], Manifest()
    for p in problems:
        if len(pairs) >= count:
            break
        manifest.rows_in += 1
        c = rng.choice([k for k in range(len(p.sources)) if p.correct[k]])
        solution = p.solutions[c]
        at = solution.rfind(ANSWER_MARKER)
        if at < 0:
            manifest.drop("no_answer_line", f"{p.id}:{p.sources[c]}: no {ANSWER_MARKER!r} line")
            continue
        miss = near_miss(solution[at + len(ANSWER_MARKER):], rng)
        if miss is None:
            manifest.drop("not_a_plain_number", f"{p.id}:{p.sources[c]}: final answer not a plain number")
            continue
        if answers_equal(p.answer, miss[1]):
            manifest.drop("equals_reference", f"{p.id}:{p.sources[c]}: near miss {miss[1]} equals the reference")
            continue
        pairs.append(_pair(p, c, f"{solution[:at]}{ANSWER_MARKER} {miss[1]}", f"{p.sources[c]}~{miss[0]}", disclose,
                           skill, evidence, agreement, near_miss=miss[0]))
        manifest.rows_out += 1
    manifest.extra["kinds"] = {k: sum(q.metadata["near_miss"] == k for q in pairs) for k in NEAR_MISS_KINDS}
    return pairs, manifest


def unanimous_pairs(problems: Sequence[Problem], count: int, seed: int, skill: str,
                    agreement: Agreement = None) -> tuple[list[PreferencePair], Manifest]:
    """Up to `count` problems, in order, whose candidates all give one final answer (`agreement` n of n: every
    candidate correct, or all the same wrong answer), each as two of its candidates in a pair's places for the
    teacher of the evidence arm. Not preferences (both sides give the same answer): the SFT corpus takes one side's
    judgment, the only `agreement :: n of n` it sees — a (correct, incorrect) pair never has one, as its two sides
    give different answers. The manifest counts the problems passed over (`not_unanimous`)."""
    from patarm.skills.verifiers import shared_counts

    rng, pairs, manifest = random.Random(seed), [], Manifest()
    for p in problems:
        if len(pairs) >= count:
            break
        manifest.rows_in += 1
        if len(p.solutions) < 2 or min(shared_counts(p.solutions)) != len(p.solutions):
            manifest.drop("not_unanimous", f"{p.id}: its candidates give more than one final answer")
            continue
        c, d = rng.sample(range(len(p.solutions)), 2)
        pairs.append(_pair(p, c, p.solutions[d], f"{p.sources[d]}=", False, skill, True, agreement,
                           unanimous=f"{len(p.solutions)} of {len(p.solutions)}"))
        manifest.rows_out += 1
    return pairs, manifest


def _pair(p: Problem, c: int, rejected: str, rejected_source: str, disclose: bool, skill: str, evidence: bool,
          agreement: Agreement = None, **extra: str) -> PreferencePair:
    """Problem `p`'s solution `c` against `rejected`, with what the prompt builder and the teacher need (the
    problem's candidates as `peers` for the evidence arm's agreement line: a near miss in its source's place; with
    agreement `rule` also `score_rule`, the prompt states the score rule)."""
    if evidence and agreement:
        extra = {**extra, "peers": list(p.solutions), **({"score_rule": True} if agreement == "rule" else {})}
    return PreferencePair(
        id=f"{p.id}:{p.sources[c]}>{rejected_source}",
        prompt=[{"role": "user", "content": p.question}],
        chosen=p.solutions[c],
        rejected=rejected,
        domain="math",
        source="gsm8k",
        metadata={"problem": p.id, "reference": p.answer, "disclose": disclose, "evidence": evidence, "skill": skill,
                  "chosen_source": p.sources[c], "rejected_source": rejected_source, **extra},
    )


def take(problems: Sequence[Problem], count: int, start: int = 0, mixed_only: bool = True) -> list[Problem]:
    """`count` problems from position `start` of `problems` (only mixed ones when `mixed_only`): disjoint
    slices of the train problems feed the SFT corpus and the RL pool."""
    chosen = [p for p in problems if p.mixed or not mixed_only]
    if start + count > len(chosen):
        raise ValueError(
            f"asked for problems {start}..{start + count} but the train split has only {len(chosen)} "
            f"{'mixed ' if mixed_only else ''}problems: lower sft_problems / rl_problems or heldout_problems"
        )
    return chosen[start:start + count]
