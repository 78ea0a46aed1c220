"""RewardBench v1 (allenai/reward-bench): per-subset accuracy, count-weighted sections, mean of sections.

Record: ``{"id", "subset", "score_chosen", "score_rejected"}`` (reward scores; the chosen response wins
when its score is strictly higher), or ``{"id", "subset", "decisions": [d_AB, d_BA]}`` from a pairwise
judge, where order (A, B) shows the chosen response as A and d_BA is the decision exactly as the judge
gave it for the swapped order (each slot a decision or a list of n decisions; d_BA may be omitted).
Ties follow the official rules unless a tie policy is given: a scalar tie is wrong, a generative tie
or unparseable answer counts 0.5. Metrics in percent: ``{"chat", "chat_hard", "safety", "reasoning",
"score", "subsets": {subset: accuracy}}``; sections are weighted by the official EXAMPLE_COUNTS
(``data/rewardbench.yaml``) and ``score`` is the mean of the sections present (all four on the full set).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from patarm.eval.records import (
    RecordError,
    check_tie_policy,
    data_files,
    load_hub,
    mean,
    need,
    pct,
    read_rows,
    user_prompt,
)
from patarm.eval.voting import as_list, compact
from patarm.judge.decisions import DECISIONS, vote

NAME = "rewardbench"
HUB_ID, HUB_SPLIT = "allenai/reward-bench", "filtered"
TABLES = Path(__file__).parent / "data" / "rewardbench.yaml"


@functools.cache
def tables() -> dict[str, Any]:
    """The official SUBSET_MAPPING (as `sections`) and EXAMPLE_COUNTS, read from the data file."""
    return yaml.safe_load(TABLES.read_text(encoding="utf-8"))


# RewardBench's own per-row fields (scripts/run_rm.py, run_dpo.py, run_generative.py: the columns of
# `eval-set-scores/<model>.json`): reward scores, or a generative judge's `results` (1 chosen wins, 0 loses, 0.5 tie)
OFFICIAL_SCORES = {"scores_chosen": "score_chosen", "scores_rejected": "score_rejected"}
_RESULT_DECISION = {1: "A", 0: "B", 0.5: "tie"}


def from_official(row: dict) -> dict:
    """A record from RewardBench's own field names (see OFFICIAL_SCORES); records pass unchanged."""
    if "decisions" in row or "score_chosen" in row:
        return row
    if any(k in row for k in OFFICIAL_SCORES):
        return {**{k: v for k, v in row.items() if k not in OFFICIAL_SCORES},
                **{ours: _scalar(row.get(theirs)) for theirs, ours in OFFICIAL_SCORES.items()}}
    result = row.get("results")
    if isinstance(result, (int, float)) and not isinstance(result, bool) and result in _RESULT_DECISION:
        return {**row, "decisions": [_RESULT_DECISION[result]]}
    return row


def _scalar(score: Any) -> Any:
    """A reward score; run_rm.py writes a one-element list for some custom pipelines."""
    return score[0] if isinstance(score, list) and len(score) == 1 else score


def validate(record: dict) -> None:
    """Raise RecordError unless `record` is a RewardBench record (scores or decisions)."""
    need(record, "id", (str, int))
    need(record, "subset", str)
    if "decisions" in record:
        slots = need(record, "decisions", list)
        if not 1 <= len(slots) <= 2:
            raise RecordError("decisions", f"expected [d_AB] or [d_AB, d_BA], got {len(slots)} entries")
        for slot in slots:
            for d in as_list(slot):
                if d not in (*DECISIONS, None):
                    raise RecordError("decisions", f"{d!r} is not one of {DECISIONS} or null")
        return
    for field in ("score_chosen", "score_rejected"):
        if record.get(field) is not None:
            need(record, field, (int, float))
        elif field not in record:
            raise RecordError(field, "missing; give score_chosen and score_rejected, or decisions")


def item_result(record: dict, tie_policy: str | None = None) -> float:
    """1 when the chosen response wins, 0 when it loses, a tie per the tie policy (see module doc)."""
    policy = check_tie_policy(tie_policy)
    if "decisions" in record:
        slots = record["decisions"]
        v = vote(as_list(slots[0]), as_list(slots[1]) if len(slots) > 1 else ())
        tie = 0.0 if policy == "strict" else 0.5  # official generative rule: a tie is half right
    else:
        c, r = record["score_chosen"], record["score_rejected"]
        v = 0 if c is None or r is None else (c > r) - (c < r)
        tie = 0.5 if policy == "half" else 0.0  # official scalar rule: chosen must score strictly higher
    return 1.0 if v > 0 else 0.0 if v < 0 else tie


def subset_accuracy(records: Sequence[dict], tie_policy: str | None = None) -> dict[str, float]:
    """Accuracy (0-1) of each subset present."""
    results: dict[str, list[float]] = {}
    for record in records:
        results.setdefault(record["subset"], []).append(item_result(record, tie_policy))
    return {subset: mean(values) for subset, values in results.items()}


def sections(accuracy: dict[str, float]) -> dict[str, float]:
    """Count-weighted section scores (0-1) over the subsets present, as `calculate_scores_per_section`."""
    counts, out = tables()["example_counts"], {}
    for name, subsets in tables()["sections"].items():
        present = [s for s in subsets if s in accuracy]
        if present:
            out[name] = sum(accuracy[s] * counts[s] for s in present) / sum(counts[s] for s in present)
    return out


def score(records: Sequence[dict], tie_policy: str | None = None) -> dict[str, Any]:
    """Sections and headline score in percent, plus per-subset accuracy under `subsets`."""
    accuracy = subset_accuracy(records, tie_policy)
    metrics: dict[str, Any] = {name: pct(v) for name, v in sections(accuracy).items()}
    if metrics:
        metrics["score"] = mean(list(metrics.values()))
    metrics["subsets"] = {s: pct(v) for s, v in sorted(accuracy.items())}
    return metrics


def headline(metrics: dict[str, Any]) -> float | None:
    return metrics.get("score")


# ---- items ----

def _judge_domain(subset: str) -> str:
    if subset == "math-prm":
        return "math"
    for name, subsets in tables()["sections"].items():
        if subset in subsets:
            return tables()["judge_domains"][name]
    return "chat"


def to_item(row: dict, path: Path | None = None) -> dict:
    """A RewardBench row ({id, prompt, chosen, rejected, subset}) as an item: chosen, then rejected."""
    for field in ("id", "prompt", "chosen", "rejected", "subset"):
        if field not in row:
            raise ValueError(f"{path or HUB_ID}: row {row.get('id')!r} has no '{field}' field")
    return {"id": row["id"], "subset": row["subset"], "prompt": user_prompt(row["prompt"]),
            "candidates": [row["chosen"], row["rejected"]], "judge_domain": _judge_domain(row["subset"])}


def load(path: str | Path | None = None) -> list[dict]:
    """RewardBench items from a local .json/.jsonl file or folder, or the hub's `filtered` split."""
    if path is None:
        return [to_item(row) for row in load_hub(HUB_ID, HUB_SPLIT)]
    return [to_item(row, f) for f in data_files(path) for row in read_rows(f)]


def comparisons(item: dict) -> list[tuple[int, int]]:
    return [(0, 1)]


def make_record(item: dict, scores: Sequence[float | None] | None = None,
                decisions: dict[tuple[int, int], tuple[list, list]] | None = None) -> dict:
    """The official scalar record from two scores, or a decisions record (chosen shown as A first)."""
    record = {"id": item["id"], "subset": item["subset"]}
    if decisions is None:
        record["score_chosen"], record["score_rejected"] = scores[0], scores[1]
    else:
        in_order, swapped = decisions[(0, 1)]
        record["decisions"] = [compact(in_order), compact(swapped)] if swapped else [compact(in_order)]
    return record


# ----------------------------------------------------------------------------- reporting (patarm.eval.report)


def report_bars(metrics: dict[str, Any]) -> dict[str, float]:
    """Per-subset accuracies, for the report's bar chart."""
    return dict(metrics.get("subsets", {}))


def report_scores(records: Sequence[dict]) -> tuple[list, list]:
    """(scores given to chosen responses, scores given to rejected ones) of pointwise records."""
    good = [r["score_chosen"] for r in records if "score_chosen" in r]
    bad = [r["score_rejected"] for r in records if "score_rejected" in r]
    return good, bad


# ----------------------------------------------------------------------------- analysis (patarm.eval.analysis)


def stratum(record: dict) -> str:
    return record["subset"]


def preferred_pairs(record: dict) -> list[tuple[int, int]]:
    """(better, worse) candidate indices: the chosen response (0) over the rejected one (1)."""
    return [(0, 1)]
