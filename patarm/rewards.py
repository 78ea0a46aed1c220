"""PaTaRM's rewards (§3.1): the Preference-Aware Reward (PAR), margin functions f(δ), the format
penalty, and adapters in TRL's reward-function signature.

PAR, for the n judge rollouts of a pair's chosen response (scores s_i^c) and of its rejected
response (scores s_j^r), with s̄ the mean over a side's *valid* scores:

    R(y_i^c) = 1[s_i^c > s̄^r] · f(s_i^c − s̄^r)        R(y_j^r) = 1[s_j^r < s̄^c] · f(s̄^c − s_j^r)

>>> par_rewards([8, 5, None], [4, 6])  # s̄^c = 6.5, s̄^r = 5
([1.4, 0.0, 0.0], [1.4, 1.2])
>>> format_penalty("<rubric>1. x</rubric><eval>ok</eval><score>7</score>")
0.0
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from patarm.config import import_object
from patarm.judge import JudgeTemplate, Judgment, load_template, mean_score, parse_judgment

MarginFn = Callable[[float], float]
Score = float | None


def graded_margin(delta: float, low: float = 1.2, high: float = 1.4, threshold: float = 2.0) -> float:
    """The paper's graded Δ: `low` for 0 < δ <= threshold, `high` for δ > threshold, 0 otherwise."""
    if delta <= 0:
        return 0.0
    return low if delta <= threshold else high


def constant_margin(delta: float, value: float = 1.3) -> float:
    """The paper's constant α: `value` for any δ > 0."""
    return value if delta > 0 else 0.0


MARGIN_FUNCTIONS: dict[str, Callable[..., float]] = {"graded": graded_margin, "constant": constant_margin}


def get_margin_fn(spec: str | dict | MarginFn = "graded") -> MarginFn:
    """Resolve f(δ): "graded", "constant", {"name": "graded", "low": .., "high": .., "threshold": ..},
    a callable, or a dotted path to one ("package.module:function" or "package.module.function")."""
    if callable(spec):
        return spec
    params: dict[str, Any] = {}
    if isinstance(spec, dict):
        params = {k: v for k, v in spec.items() if k != "name"}
        spec = spec.get("name", "graded")
    if spec in MARGIN_FUNCTIONS:
        base = MARGIN_FUNCTIONS[spec]
        return (lambda d: base(d, **params)) if params else base
    fn = import_object(spec, "margin function", f"; or one of {sorted(MARGIN_FUNCTIONS)}")
    return (lambda d: fn(d, **params)) if params else fn


def par_rewards(chosen_scores: Sequence[Score], rejected_scores: Sequence[Score],
                margin: str | dict | MarginFn = "graded") -> tuple[list[float], list[float]]:
    """PAR rewards for one pair's chosen and rejected rollouts (see the module docstring).

    A rollout whose own score is None earns 0; when either side has no valid score at all, the pair
    carries no preference signal and every rollout earns 0.
    """
    f = get_margin_fn(margin)
    mean_c, mean_r = mean_score(chosen_scores), mean_score(rejected_scores)
    if mean_c is None or mean_r is None:
        return [0.0] * len(chosen_scores), [0.0] * len(rejected_scores)
    chosen = [float(f(s - mean_r)) if s is not None and s > mean_r else 0.0 for s in chosen_scores]
    rejected = [float(f(mean_c - s)) if s is not None and s < mean_c else 0.0 for s in rejected_scores]
    return chosen, rejected


def label_rewards(chosen_scores: Sequence[Score], rejected_scores: Sequence[Score],
                  threshold: float) -> tuple[list[float], list[float]]:
    """The pointwise label reward PAR is ablated against (the absolute signal the paper argues against): each
    rollout alone earns +1 when its verdict matches the pair's label — a chosen rollout scored above
    `threshold`, a rejected one at or below it — and −1 otherwise (a missing score is a wrong verdict).

    >>> label_rewards([8, 5, None], [4, 6], threshold=5.5)
    ([1.0, -1.0, -1.0], [1.0, -1.0])
    """
    chosen = [1.0 if s is not None and s > threshold else -1.0 for s in chosen_scores]
    rejected = [1.0 if s is not None and s <= threshold else -1.0 for s in rejected_scores]
    return chosen, rejected


REWARD_KINDS = ("par", "label")


def format_penalty(text_or_judgment: str | Judgment, template: JudgeTemplate | str | None = None) -> float:
    """−1.0 if the score is invalid; otherwise −0.5 if the tags are wrong; otherwise 0 (paper §3.1)."""
    judgment = (
        text_or_judgment if isinstance(text_or_judgment, Judgment) else parse_judgment(text_or_judgment, template)
    )
    if judgment.score is None:
        return -1.0
    return -0.5 if not judgment.tags_ok else 0.0


class IncompletePairError(RuntimeError):
    """A reward call received one side of a pair without the other: PAR cannot be computed."""


def group_pairs(pair_ids: Sequence[Any], sides: Sequence[str]) -> dict[Any, tuple[list[int], list[int]]]:
    """Positions of each pair's chosen and rejected rollouts; raises if any pair is incomplete."""
    groups: dict[Any, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for i, (pid, side) in enumerate(zip(pair_ids, sides, strict=True)):
        if side not in ("chosen", "rejected"):
            raise ValueError(f"row {i}: column 'side' must be 'chosen' or 'rejected', got {side!r}")
        groups[pid][side == "rejected"].append(i)
    for pid, (c, r) in groups.items():
        if not c or not r or len(c) != len(r):
            raise IncompletePairError(
                f"pair {pid!r} is incomplete in this reward call ({len(c)} chosen and {len(r)} rejected "
                "rollouts): both sides of a pair must meet in the same call. Use patarm's pair-preserving "
                "sampler (PaTaRMGRPOTrainer) and make per_device_train_batch_size × steps_per_generation a "
                "multiple of 2 × num_generations."
            )
    return dict(groups)


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or a conversational list of messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


class PairRewards:
    """TRL reward functions for PaTaRM: `par` (PAR, or with `kind="label"` the pointwise label reward of the
    ablation) and `format` (format penalty), logged separately.

    Both read the dataset columns `pair_id` and `side` that TRL passes as keyword arguments. The
    completions of one call are parsed once and shared by the two functions.
    """

    def __init__(self, template: JudgeTemplate | str | None = None, margin: str | dict | MarginFn = "graded",
                 audit_dir: str | None = None, kind: str = "par", label_threshold: float | None = None):
        self.template = load_template(template or "pointwise")
        self.margin_fn = get_margin_fn(margin)
        if kind not in REWARD_KINDS:
            raise ValueError(f"reward must be one of {list(REWARD_KINDS)}, got {kind!r}")
        # `label` (ablation): +1/−1 per rollout against the pair's label, the verdict read at the scale's midpoint
        self.kind = kind
        self.label_threshold = sum(self.template.score_range) / 2 if label_threshold is None else label_threshold
        self._last: tuple[Any, list[Judgment]] | None = None
        self.recent_scores: list[float] = []  # valid scores since the last log, for score histograms
        # PATARM_PAIR_AUDIT=DIR: every process appends the pairs of each reward call to DIR/rank-<r>.jsonl
        self.audit_dir = audit_dir or os.environ.get("PATARM_PAIR_AUDIT")

    def _audit(self, groups: dict, n: int) -> None:
        rank = int(os.environ.get("RANK", "0"))
        os.makedirs(self.audit_dir, exist_ok=True)
        with open(os.path.join(self.audit_dir, f"rank-{rank}.jsonl"), "a", encoding="utf-8") as fh:
            fh.write(
                json.dumps(
                    {"rank": rank, "rollouts": n, "pairs": {str(k): [len(c), len(r)] for k, (c, r) in groups.items()}}
                )
                + "\n"
            )

    def judgments(self, completions: list[Any]) -> list[Judgment]:
        if self._last is None or self._last[0] is not completions:
            self._last = (completions, [parse_judgment(completion_text(c), self.template) for c in completions])
        return self._last[1]

    def par(self, completions: list[Any], pair_id: list[Any], side: list[str], **kwargs: Any) -> list[float]:
        judgments = self.judgments(completions)
        rewards = [0.0] * len(completions)
        satisfied, margins = 0, []
        groups = group_pairs(pair_id, side)
        if self.audit_dir:
            self._audit(groups, len(completions))
        for c_idx, r_idx in groups.values():
            c_scores = [judgments[i].score for i in c_idx]
            r_scores = [judgments[i].score for i in r_idx]
            c_rew, r_rew = (par_rewards(c_scores, r_scores, self.margin_fn) if self.kind == "par"
                            else label_rewards(c_scores, r_scores, self.label_threshold))
            for i, value in zip(c_idx + r_idx, c_rew + r_rew):
                rewards[i] = value
            satisfied += sum(v > 0 for v in c_rew + r_rew)
            mean_c, mean_r = mean_score(c_scores), mean_score(r_scores)
            if mean_c is not None and mean_r is not None:
                margins.append(mean_c - mean_r)
        self.recent_scores.extend(j.score for j in judgments if j.score is not None)
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            log_metric("par/pair_accuracy", satisfied / max(len(completions), 1))
            if margins:  # no pair with valid scores on both sides → no margin to report this call
                log_metric("par/margin", sum(margins) / len(margins))
            # each side's mean score apart: a judge drifting up (or down) on both sides shows here, not in the margin
            for name in ("chosen", "rejected"):
                scores = [j.score for j, s in zip(judgments, side) if s == name and j.score is not None]
                if scores:
                    log_metric(f"par/{name}_score", sum(scores) / len(scores))
            log_metric("format/invalid_score_rate", sum(j.score is None for j in judgments) / max(len(judgments), 1))
            log_metric("format/bad_tags_rate", sum(not j.tags_ok for j in judgments) / max(len(judgments), 1))
        log_extra = kwargs.get("log_extra")
        if log_extra is not None:
            log_extra("score", [j.score for j in judgments])
            log_extra("side", list(side))
        return rewards

    def format(self, completions: list[Any], **kwargs: Any) -> list[float]:
        return [format_penalty(j) for j in self.judgments(completions)]

    def reward_funcs(self) -> list[Callable[..., list[float]]]:
        """The two reward functions, named `par` and `format` in TRL's logs."""
        par = lambda completions, pair_id, side, **kw: self.par(completions, pair_id, side, **kw)  # noqa: E731
        fmt = lambda completions, **kw: self.format(completions, **kw)  # noqa: E731
        par.__name__, fmt.__name__ = "par", "format"
        return [par, fmt]
