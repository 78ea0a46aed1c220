"""Judge benchmark items with a PaTaRM judge: pointwise or pairwise, voting@n or adaptive voting.

For each item this returns the benchmark's official record (``bench.make_record``) plus what the judge
said. Pointwise: every candidate response is scored on its own, n samples each; ``mean`` averages the
n scores, ``majority`` takes the majority of the n per-sample decisions of each comparison.
Pairwise: each comparison is judged in both presentation orders, n samples per order; the decisions
are summed as votes (JudgeBench's rule). ``adaptive`` draws one sample per round for the comparisons
still open and closes a comparison when further draws cannot change its majority outcome (or when the
chance that they do is at most 1 - confidence); the outcome is the majority of the draws taken.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from patarm.backends import CachedBackend
from patarm.eval.voting import mean_score, should_stop
from patarm.judge import Judgment, load_template, parse_judgment, render_pairwise, render_pointwise
from patarm.judge.decisions import A, B, flip, from_scores

Comparison = tuple[int, int]


@dataclass
class JudgingPlan:
    """How eval judges a benchmark: `mode` pointwise|pairwise, `num_samples` n, `voting` mean|majority|adaptive
    (the prompt and decoding options are `patarm.models.settings.JudgeOptions`, resolved before)."""

    mode: str = "pointwise"
    num_samples: int = 1
    voting: str = "mean"
    confidence: float = 1.0  # adaptive only: 1.0 stops only when the outcome can no longer change
    template: str | None = None  # judge prompt template; default "pointwise" / "pairwise" by mode
    rubric_mode: str | None = None
    seed: int | None = 0  # sample k of a prompt is drawn with seed + k


@dataclass
class Judged:
    """One judged item: the official record, the raw judge outputs and the draws per comparison."""

    record: dict
    outputs: Any
    draws: dict[str, int] = field(default_factory=dict)
    consistent: list[bool] = field(default_factory=list)  # pairwise: per (comparison, sample) pair


def _brief(j: Judgment) -> dict[str, Any]:
    return {"text": j.text, "score": j.score, "decision": j.decision, "tags_ok": j.tags_ok, "errors": j.errors}


def _ckey(c: Comparison) -> str:
    return f"{c[0]},{c[1]}"


def check_options(bench: ModuleType, items: list[dict], opts: JudgingPlan) -> None:
    """Reject combinations a benchmark cannot score, before any judging starts."""
    if opts.num_samples < 1:
        raise ValueError(f"--num-samples must be >= 1, got {opts.num_samples}")
    needs_pairs = opts.mode == "pairwise" or opts.voting == "adaptive"
    if needs_pairs and items and not bench.comparisons(items[0]):
        raise ValueError(f"{bench.NAME} is scored best-of-n from pointwise scores; use --mode pointwise "
                         "with --voting mean or majority")


def adaptive_rounds(units: list[Any], max_draws: int, draw_round: Callable[[int, list[Any]], None],
                    tally: Callable[[Any, int], tuple[int, int]], confidence: float = 1.0,
                    votes_per_draw: int = 1) -> dict[Any, int]:
    """Draw round by round for the open `units`; return each unit's number of draws when it closed.

    `draw_round(r, open_units)` fetches the r-th sample of every open unit; `tally(unit, drawn)` gives
    its (votes for, votes against) over its first `drawn` draws.
    """
    stops: dict[Any, int] = {}
    open_units = list(units)
    for r in range(max_draws):
        if not open_units:
            break
        draw_round(r, open_units)
        still_open = []
        for unit in open_units:
            votes_for, against = tally(unit, r + 1)
            if should_stop(votes_for, against, r + 1, max_draws, confidence, votes_per_draw):
                stops[unit] = r + 1
            else:
                still_open.append(unit)
        open_units = still_open
    return stops


def _count(decisions: list[str | None]) -> tuple[int, int]:
    return sum(d == A for d in decisions), sum(d == B for d in decisions)


def judge_pointwise(bench: ModuleType, items: list[dict], backend: CachedBackend, opts: JudgingPlan,
                    fit: Callable[[Any], Any] = lambda m: m) -> list[Judged]:
    """Score every candidate of every item; build records by the voting rule. `fit` shortens a rendered
    prompt to the judge's window (`patarm.judge.truncate.PromptFitter`)."""
    template = load_template(opts.template or "pointwise", rubric_mode=opts.rubric_mode)
    prompts = [
        [fit(render_pointwise(it["prompt"], c, template, domain=it.get("judge_domain"))) for c in it["candidates"]]
        for it in items
    ]
    js: list[list[list[Judgment]]] = [[[] for _ in p] for p in prompts]
    n = opts.num_samples

    def fetch(requests: list[tuple[int, int, int]]) -> None:  # (item, candidate, sample index)
        texts = backend.draw([(prompts[i][c], k) for i, c, k in requests], seed=opts.seed)
        for (i, c, _), text in zip(requests, texts):
            js[i][c].append(parse_judgment(text, template))

    def scores(i: int, c: int, drawn: int) -> list[float | None]:
        return [j.score for j in js[i][c][:drawn]]

    stops: dict[tuple[int, Comparison], int] = {}
    if opts.voting == "adaptive":
        def draw_round(r: int, open_units: list[tuple[int, Comparison]]) -> None:
            need = sorted({(i, c) for i, (x, y) in open_units for c in (x, y) if len(js[i][c]) == r})
            fetch([(i, c, r) for i, c in need])

        def tally(unit: tuple[int, Comparison], drawn: int) -> tuple[int, int]:
            i, (x, y) = unit
            return _count([from_scores(a, b) for a, b in zip(scores(i, x, drawn), scores(i, y, drawn))])

        units = [(i, c) for i, it in enumerate(items) for c in bench.comparisons(it)]
        stops = adaptive_rounds(units, n, draw_round, tally, opts.confidence)
    else:
        fetch([(i, c, k) for i, p in enumerate(prompts) for c in range(len(p)) for k in range(n)])

    out = []
    for i, item in enumerate(items):
        per_candidate = [scores(i, c, n) for c in range(len(item["candidates"]))]
        if opts.voting == "mean":
            record = bench.make_record(item, scores=[mean_score(s) for s in per_candidate])
        elif bench.comparisons(item):
            decisions = {}
            for x, y in bench.comparisons(item):
                d = stops.get((i, (x, y)), n)
                decisions[(x, y)] = (
                    [from_scores(a, b) for a, b in zip(per_candidate[x][:d], per_candidate[y][:d])],
                    [],
                )
            record = bench.make_record(item, decisions=decisions)
        else:
            record = bench.make_record(item, scores=win_counts(per_candidate))
        draws = {_ckey(c): d for (k, c), d in stops.items() if k == i}
        out.append(Judged(record, [[_brief(j) for j in cj] for cj in js[i]], draws))
    return out


def win_counts(per_candidate: list[list[float | None]]) -> list[float]:
    """Majority voting for best-of-n: in how many samples each candidate has the top valid score."""
    wins = [0.0] * len(per_candidate)
    for sample in zip(*per_candidate):
        valid = [s for s in sample if s is not None]
        if valid:
            for c, s in enumerate(sample):
                wins[c] += s == max(valid)
    return wins


def judge_pairwise(bench: ModuleType, items: list[dict], backend: CachedBackend, opts: JudgingPlan,
                   fit: Callable[[Any], Any] = lambda m: m) -> list[Judged]:
    """Judge every comparison of every item in both presentation orders; votes decide."""
    template = load_template(opts.template or "pairwise", rubric_mode=opts.rubric_mode)
    units = [(i, c) for i, it in enumerate(items) for c in bench.comparisons(it)]
    prompts = {}
    for i, (x, y) in units:
        it, cand = items[i], items[i]["candidates"]
        dom = it.get("judge_domain")
        prompts[(i, (x, y))] = (fit(render_pairwise(it["prompt"], cand[x], cand[y], template, domain=dom)),
                                fit(render_pairwise(it["prompt"], cand[y], cand[x], template, domain=dom)))
    js: dict[Any, tuple[list[Judgment], list[Judgment]]] = {u: ([], []) for u in units}
    n = opts.num_samples

    def draw_round(r: int, open_units: list) -> None:
        requests = [(prompts[u][o], r) for u in open_units for o in (0, 1)]
        texts = backend.draw(requests, seed=opts.seed)
        for k, u in enumerate(open_units):
            for o in (0, 1):
                js[u][o].append(parse_judgment(texts[2 * k + o], template))

    def decisions(u: Any, drawn: int) -> tuple[list, list]:
        return ([j.decision for j in js[u][0][:drawn]],
                [j.decision for j in js[u][1][:drawn]])

    def tally(u: Any, drawn: int) -> tuple[int, int]:
        ab, ba = decisions(u, drawn)
        return _count(ab + [flip(d) for d in ba])

    stops: dict[Any, int] = {}
    if opts.voting == "adaptive":
        stops = adaptive_rounds(units, n, draw_round, tally, opts.confidence, votes_per_draw=2)
    else:
        for r in range(n):  # one call per round keeps the batches full: every unit is open
            draw_round(r, units)
    out = []
    for i, item in enumerate(items):
        mine = [u for u in units if u[0] == i]
        decided = {u[1]: decisions(u, stops.get(u, n)) for u in mine}
        consistent = [a is not None and flip(b) == a for u in mine for a, b in zip(*decisions(u, n))]
        outputs = {_ckey(u[1]): {"ab": [_brief(j) for j in js[u][0]], "ba": [_brief(j) for j in js[u][1]]}
                   for u in mine}
        draws = {_ckey(u[1]): stops[u] for u in mine if u in stops}
        out.append(Judged(bench.make_record(item, decisions=decided), outputs, draws, consistent))
    return out
