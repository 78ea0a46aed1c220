"""A rule-backed teacher for the bundled synthetic instruction-following task (`patarm.demo.synthetic`):
the backend `kind: rule` of prep configs, standing in for a large teacher model on a CPU.

It reads the pair behind each prompt from `metadata[i]` — {"pair", "side"} for pointwise prompts,
{"pair", "swapped"} for pairwise ones, {"task": "classify", "pair"} for domain labels — and writes
judge text from the deterministic verifier. `error_rate` makes a seeded share of its verdicts wrong,
so the rejection-sampling step sees pairs of every difficulty on a CPU.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from patarm.backends.base import BackendError, OnResult
from patarm.data import PreferencePair
from patarm.data.schema import Messages
from patarm.demo.synthetic import check, constraint_of, teacher_judgment


def _pair(meta: dict[str, Any], index: int) -> PreferencePair:
    pair = meta.get("pair") if isinstance(meta, dict) else None
    if isinstance(pair, dict):
        pair = PreferencePair.from_dict(pair)
    if not isinstance(pair, PreferencePair):
        raise BackendError(f"RuleTeacher: metadata[{index}] has no 'pair'; it only judges prompts built by "
                           "patarm.prep steps, which pass {'pair': ..., 'side': ...} per prompt")
    if "constraint" not in pair.metadata:
        raise BackendError(f"RuleTeacher: pair {pair.id} has no metadata['constraint']; the rule teacher only "
                           "knows the synthetic task (patarm.demo.synthetic); use a model teacher for other data")
    return pair


def pair_sides(metadata: Sequence[dict] | None, n: int, name: str, key: str, what: str,
               build: str) -> list[tuple[PreferencePair, str]]:
    """(pair, side) per prompt from the metadata `patarm.prep.corpus` passes to a teacher backend; each pair must
    carry `metadata[key]`. Errors name the teacher, the prompt index, what is missing and how to build such pairs."""
    if metadata is None or len(metadata) != n:
        raise BackendError(f"{name} needs metadata: one {{'pair', 'side'}} per prompt (patarm.prep.corpus passes it)")
    out = []
    for i, meta in enumerate(metadata):
        pair, side = meta.get("pair"), meta.get("side")
        if isinstance(pair, dict):
            pair = PreferencePair.from_dict(pair)
        if not isinstance(pair, PreferencePair) or side not in ("chosen", "rejected") or key not in pair.metadata:
            raise BackendError(f"{name}: metadata[{i}] needs {what} (with metadata[{key!r}]) and a side; build pairs "
                               f"with {build}")
        out.append((pair, side))
    return out


class RuleTeacher:
    """Judgments from `patarm.synthetic.check`; wrong with probability `error_rate` per sample."""

    def __init__(self, error_rate: float = 0.0, seed: int = 0, rubric_mode: str = "adaptive"):
        if not 0.0 <= error_rate <= 1.0:
            raise ValueError(f"error_rate must be in [0, 1], got {error_rate}")
        self.error_rate, self.seed, self.rubric_mode = error_rate, seed, rubric_mode
        self.model_id = f"rule(error_rate={error_rate}, seed={seed})"

    def sampling(self) -> dict[str, Any]:
        return {"error_rate": self.error_rate, "seed": self.seed, "rubric_mode": self.rubric_mode}

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None, on_result: OnResult | None = None) -> list[list[str]]:
        if metadata is None or len(metadata) != len(prompts):
            raise BackendError("RuleTeacher needs metadata (one dict per prompt with the pair it is about)")
        out = []
        for i, meta in enumerate(metadata):
            pair = _pair(meta, i)
            texts = []
            for s in range(num_samples):
                # One RNG per (pair, role, sample): the same call always gets the same answer.
                role = meta.get("side", meta.get("task", f"swapped={meta.get('swapped')}"))
                rng = random.Random(f"{self.seed}:{seed}:{pair.id}:{role}:{s}")
                wrong = rng.random() < self.error_rate
                texts.append(self._one(pair, meta, rng, wrong))
            out.append(texts)
        return out

    def _one(self, pair: PreferencePair, meta: dict[str, Any], rng: random.Random, wrong: bool) -> str:
        if meta.get("task") == "classify":
            return f"<domain>{pair.domain or 'instruction-following'}</domain>"
        constraint = constraint_of(pair)
        if "side" in meta:
            side = meta["side"]
            if wrong:  # judge as if it were the other response: the verdict (and score) flips
                side = "rejected" if side == "chosen" else "chosen"
            return teacher_judgment(constraint, getattr(pair, side), rubric_mode=self.rubric_mode, rng=rng)
        a, b = (pair.rejected, pair.chosen) if meta.get("swapped") else (pair.chosen, pair.rejected)
        ev_a, ev_b = check(constraint, a), check(constraint, b)
        decision = "A" if ev_a.passed else "B"
        if wrong:
            decision = "B" if decision == "A" else "A"
        rubric = f"<rubric>\n1. {ev_a.criterion}\n</rubric>\n" if self.rubric_mode != "primary" else ""
        return (f"{rubric}<eval>\nResponse A: {ev_a.observation}. Response B: {ev_b.observation}.\n</eval>\n"
                f"<decision>{decision}</decision>")
