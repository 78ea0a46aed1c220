"""Best-of-N selection with a skill, scored against every single candidate source and Oracle@N.

A pool is a jsonl file, one item per line, in either layout:

- generic: ``{"prompt", "candidates": [{"source", "response", "is_correct"}], "reference"?}``
- GSM8K example_model_solutions: ``{"question", "ground_truth", <source>: {"solution", "is_correct"}, ...}``

For each item a SkillSession runs the skill's verifiers in scope (those whose sample-specific
resources are missing report an error and add no evidence), optionally adds a judge model's score
as evidence, and the skill's aggregation rules pick the index (ties → the lowest index).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patarm.config import RunArguments, check_positive
from patarm.io import DataError, iter_jsonl
from patarm.judge.judgment import EvidenceItem
from patarm.models.settings import JudgeOptions, judge_field
from patarm.skills.package import Skill
from patarm.skills.session import SkillSession, mount


@dataclass
class BonArguments(RunArguments):
    """Best-of-N selection with a reward-evaluation skill."""

    pool: str = field(default="", metadata={"path": "input", "help":
                      "jsonl pool (generic or GSM8K example_model_solutions layout)"})
    skill: str = field(default="reward-judge", metadata={"help": "skill folder or name in the shipped bank"})
    model: str | None = field(default=None, metadata={"path": "input", "help":
                              "a judge model adding judge-score evidence (any model spec)"})
    domain: str = field(default="math", metadata={"help": "the items' domain (routes the skill's resources)"})
    reference: str = field(default="both", metadata={"help": "evaluate without the reference, with it mounted, or both",
                                                     "choices": ["both", "none", "mounted"]})
    verifiers: list[str] | None = field(default=None, metadata={"help": "verifier ids (default: all in scope)"})
    source_prior: bool = field(default=False, metadata={"help":
                               "mount a cross-fitted calibration table of source accuracies (other folds' labels)"})
    limit: int | None = field(default=None, metadata={"help": "only the first N items"})
    max_new_tokens: int | None = judge_field("max_new_tokens")

    def __post_init__(self) -> None:
        check_positive(self, "limit")
        JudgeOptions.of(self)


@dataclass
class PoolItem:
    """One best-of-N item: candidates with their sources and correctness flags."""

    prompt: str
    candidates: list[str]
    sources: list[str]
    correct: list[bool]
    reference: str | None = None


def _from_row(row: dict[str, Any]) -> PoolItem:
    if "candidates" in row:
        cands = row["candidates"]
        return PoolItem(row.get("prompt", row.get("question", "")),
                        [c.get("response", c.get("solution", "")) for c in cands],
                        [str(c.get("source", i)) for i, c in enumerate(cands)],
                        [bool(c.get("is_correct")) for c in cands], row.get("reference"))
    sources = [k for k, v in row.items() if isinstance(v, dict) and "solution" in v]
    if not sources:
        raise ValueError("a pool row needs 'candidates' or per-source {solution, is_correct} fields")
    return PoolItem(row.get("question", row.get("prompt", "")), [row[s]["solution"] for s in sources], sources,
                    [bool(row[s].get("is_correct")) for s in sources], row.get("ground_truth", row.get("reference")))


def load_pool(path: str | Path, limit: int | None = None) -> list[PoolItem]:
    """Pool items from a jsonl file (at most `limit`); errors name the file and line."""
    items = []
    for index, row in iter_jsonl(path):
        if isinstance(row, DataError):
            raise row
        try:
            items.append(_from_row(row))
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise ValueError(f"{path}, line {index + 1}: {err}") from None
        if limit is not None and len(items) >= limit:
            break
    return items


JudgeFn = Callable[[SkillSession], None]  # adds judge-model evidence to a session


def cross_fitted_priors(items: Sequence[PoolItem], folds: int = 2) -> list[dict[str, float]]:
    """Per item, each source's accuracy on the items of the *other* folds (item i is in fold i % folds):
    a calibration table that never uses the judged item's own labels."""
    tables = []
    for f in range(folds):
        held = [it for i, it in enumerate(items) if i % folds != f]
        tables.append(
            {s: sum(it.correct[k] for it in held) / max(1, len(held)) for k, s in enumerate(items[0].sources)}
        )
    return [tables[i % folds] for i in range(len(items))]


def select(skill: Skill, item: PoolItem, domain: str, with_reference: bool = False,
           verifiers: Sequence[str] | None = None, judge: JudgeFn | None = None,
           rules_id: str | None = None, prior: dict[str, float] | None = None) -> tuple[int | None, SkillSession]:
    """The selected candidate index for one item and the session (trace, evidence) behind it.

    `prior` mounts a calibration table {source: held-out accuracy} for the source-prior verifier.
    """
    mounted = []
    if with_reference and item.reference is not None:
        mounted.append(mount("reference-answer", "reference", item.reference, "the reference solution"))
    if prior is not None:
        mounted.append(mount("calibration-source-prior", "calibration", prior, "held-out source accuracies"))
    sample = {"prompt": item.prompt, "candidates": item.candidates, "sources": item.sources, "domain": domain}
    session = SkillSession(skill, sample, mounted)
    for summary in session.list_resources():
        if summary["type"] == "verifier" and (verifiers is None or summary["id"] in verifiers):
            session.run_resource(summary["id"])
    if judge is not None:
        judge(session)
    index, _ = session.best_of_n(session.rules(rules_id))
    return index, session


def evaluate_pool(skill: Skill, items: Sequence[PoolItem], domain: str = "math", with_reference: bool = False,
                  verifiers: Sequence[str] | None = None, judge: JudgeFn | None = None,
                  source_prior: bool = False) -> dict[str, Any]:
    """Selection accuracy (percent) vs every single source and Oracle@N."""
    if not items:
        raise ValueError("empty pool")
    sources = items[0].sources
    priors = cross_fitted_priors(items) if source_prior else [None] * len(items)
    picked = 0
    for item, prior in zip(items, priors):
        index, _ = select(skill, item, domain, with_reference, verifiers, judge, prior=prior)
        picked += index is not None and item.correct[index]
    n = len(items)
    pct = lambda x: round(100.0 * x / n, 2)  # noqa: E731
    single = {s: pct(sum(it.correct[k] for it in items)) for k, s in enumerate(sources)}
    return {"items": n, "n_candidates": len(sources), "skill_selection": pct(picked),
            "single_source": single, "best_single": max(single.values()),
            "oracle": pct(sum(any(it.correct) for it in items)), "with_reference": with_reference,
            "verifiers": list(verifiers) if verifiers is not None else "all in scope",
            "source_prior": source_prior, "judge_model": judge is not None}


def model_judge(backend: Any, skill: Skill, domain: str) -> JudgeFn:
    """A JudgeFn that asks a judge model (any backend with `generate(messages_list)`) for a pointwise
    score of every candidate through the skill's static routing; the score becomes `judge-score`."""
    from patarm.judge.parse import parse_judgment
    from patarm.judge.templates import load_template
    from patarm.skills.router import parse_evidence, static_prompt

    template = load_template("pointwise-compact", rubric_mode="primary")  # <eval> + <score>

    def judge(session: SkillSession) -> None:
        cands = session.sample["candidates"]
        prompts = [static_prompt(skill, session.sample["prompt"], c, domain, list(session.mounted.values()),
                                 run_verifiers=False) for c in cands]
        outputs = backend.generate(prompts)
        for i, texts in enumerate(outputs):
            parsed = parse_judgment(texts[0], template)
            if parsed.score is not None:
                session.add_evidence(i, EvidenceItem("judge-score", "judge model score", parsed.score))
            for item in parse_evidence(parsed.evaluation):
                session.add_evidence(i, EvidenceItem(f"judge-{item.criterion}", item.observation, item.assessment))

    return judge


def run_bon(args: BonArguments) -> dict[str, Any]:
    """`patarm skill bon`: selection accuracy without the reference and/or with it mounted."""
    from patarm.skills.package import find_skill

    if not args.pool:
        raise ValueError("give --pool: a jsonl pool of items with candidates")
    skill = find_skill(args.skill)
    items = load_pool(args.pool, args.limit)
    if not items:
        raise ValueError(f"{args.pool}: the pool is empty")
    judge = None
    if args.model:
        from patarm.backends import GenerationOptions, make_backend
        from patarm.models.settings import resolve_judge_options

        values, _ = resolve_judge_options(args.model, JudgeOptions.of(args), "pointwise")
        options = GenerationOptions(max_new_tokens=values["max_new_tokens"], temperature=values["temperature"],
                                    enable_thinking=values["enable_thinking"],
                                    max_prompt_tokens=values["max_prompt_tokens"])
        backend = make_backend(args.model, options, name="bon judge")
        judge = model_judge(backend, skill, args.domain)
    modes = {"both": (False, True), "none": (False,), "mounted": (True,)}[args.reference]
    return {("with_reference" if with_ref else "without_reference"):
            evaluate_pool(skill, items, args.domain, with_ref, args.verifiers, judge, args.source_prior)
            for with_ref in modes}
