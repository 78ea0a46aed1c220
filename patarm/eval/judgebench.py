"""JudgeBench (ScalerLab/JudgeBench): pair accuracy with both presentation orders, as ``compute_final_metrics``.

Record: ``{"pair_id", "source", "label": "A>B"|"B>A", "decisions": [d_AB, d_BA]}`` where the label is
JudgeBench's own spelling and d_BA is the decision exactly as the judge gave it for the swapped order (B
shown first); each slot is a decision ("A", "B", "tie", null — `patarm.judge.decisions`) or a list of n
decisions (voting@n); one slot means a single game.
Each decision (d_BA flipped back) counts +1 if it equals the label, -1 if it is the opposite, 0 for a
tie or a missing decision; a pair is correct when the sum is > 0. Metrics in percent:
``{"overall", "knowledge", "reasoning", "math", "coding"}`` over the categories present, by source
prefix; with several response-model files, also ``by_response_model``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from patarm.eval.records import RecordError, data_files, load_hub, mean, need, pct, read_rows, user_prompt
from patarm.eval.voting import as_list, compact
from patarm.judge.decisions import DECISIONS, A, from_scores, vote

NAME = "judgebench"
HUB_ID = "ScalerLab/JudgeBench"
# Source prefix → category; mmlu-pro comes first, so mmlu-pro-math is knowledge, as in the paper. The prefixes
# are those ScalerLab/JudgeBench run_judge.py @ d8740a811eb8c64a37eb22a1f3c80ff194ec284d reports (with
# `source.startswith`); the pair rule is utils/metrics.py compute_final_metrics
# @ e2c52c284e735e139b3daa61c206ee208f36c461.
CATEGORIES = (("mmlu-pro", "knowledge"), ("livebench-reasoning", "reasoning"), ("livebench-math", "math"),
              ("livecodebench", "coding"))
JUDGE_DOMAINS = {"knowledge": "chat", "reasoning": "math", "math": "math", "coding": "code"}
LABELS = {"A>B": "A", "B>A": "B"}  # JudgeBench spells the better response "A>B"
# JudgeBench's own decision spellings (run_judge.py's `judgments[i]["decision"]`), mapped at the edge
OFFICIAL_DECISIONS = {"A>B": "A", "A>>B": "A", "B>A": "B", "B>>A": "B", "A=B": "tie"}
_MODEL_IN_NAME = re.compile(r"response_model=([^,]+?)(?:,|\.jsonl$)")


def category(source: str) -> str | None:
    """The JudgeBench category of a `source` such as 'mmlu-pro-law' or 'livebench-math'."""
    for prefix, name in CATEGORIES:
        if source.startswith(prefix):
            return name
    return None


def validate(record: dict) -> None:
    """Raise RecordError unless `record` is a JudgeBench record."""
    need(record, "pair_id", (str, int))
    need(record, "source", str)
    label = need(record, "label", str)
    if label not in ("A>B", "B>A"):
        raise RecordError("label", f"{label!r} is not 'A>B' or 'B>A'")
    slots = need(record, "decisions", list)
    if not 1 <= len(slots) <= 2:
        raise RecordError("decisions", f"expected [d_AB] or [d_AB, d_BA], got {len(slots)} entries")
    for slot in slots:
        for d in as_list(slot):
            if d is not None and d not in DECISIONS:
                raise RecordError("decisions", f"{d!r} is not one of {DECISIONS}, {tuple(OFFICIAL_DECISIONS)} "
                                               "or null")


def from_official(row: dict) -> dict:
    """A record from JudgeBench's own spelling: a run_judge.py output row (``"judgments": [{"decision":
    "A>B"}, {"decision": ...}]``, the second for the swapped order) or decisions spelled "A>B"/"B>A"/"A=B"."""
    if "decisions" not in row and isinstance(row.get("judgments"), list):
        row = {**row, "decisions": [j.get("decision") if isinstance(j, dict) else j for j in row["judgments"]]}
    if isinstance(row.get("decisions"), list):
        row = {**row, "decisions": [[_decision(d) for d in slot] if isinstance(slot, list) else _decision(slot)
                                    for slot in row["decisions"]]}
    return row


def _decision(d: Any) -> Any:
    return OFFICIAL_DECISIONS.get(d, d) if isinstance(d, str) else d


def item_result(record: dict, tie_policy: str | None = None) -> bool:
    """Whether the pair is judged correctly: the label-signed vote over all decisions is > 0."""
    slots = record["decisions"]
    v = vote(as_list(slots[0]), as_list(slots[1]) if len(slots) > 1 else ())
    return (v if LABELS[record["label"]] == A else -v) > 0


def _accuracies(records: Sequence[dict]) -> dict[str, float]:
    out = {"overall": pct(mean([float(item_result(r)) for r in records]))}
    for _, name in CATEGORIES:
        rows = [r for r in records if category(r["source"]) == name]
        if rows:
            out[name] = pct(mean([float(item_result(r)) for r in rows]))
    return out


def score(records: Sequence[dict], tie_policy: str | None = None) -> dict[str, Any]:
    """Overall and per-category accuracy in percent (and per response model when there are several)."""
    if not records:
        return {}
    metrics: dict[str, Any] = _accuracies(records)
    models = sorted({r["response_model"] for r in records if r.get("response_model")})
    if len(models) > 1:
        metrics["by_response_model"] = {m: _accuracies([r for r in records if r.get("response_model") == m])
                                        for m in models}
    return metrics


def headline(metrics: dict[str, Any]) -> float | None:
    return metrics.get("overall")


# ---- items ----

def to_item(row: dict, path: Path | None = None) -> dict:
    """A JudgeBench row as an item: candidates [response_A, response_B], the label and the source."""
    for field in ("pair_id", "question", "response_A", "response_B", "label", "source"):
        if field not in row:
            raise ValueError(f"{path or HUB_ID}: row {row.get('pair_id')!r} has no '{field}' field")
    model = row.get("response_model")
    if not model and path is not None and (m := _MODEL_IN_NAME.search(path.name)):
        model = m.group(1)
    return {"id": row["pair_id"], "pair_id": row["pair_id"], "source": row["source"], "label": row["label"],
            "group": category(row["source"]) or row["source"],
            "response_model": model, "prompt": user_prompt(row["question"]),
            "candidates": [row["response_A"], row["response_B"]],
            "judge_domain": JUDGE_DOMAINS.get(category(row["source"]) or "", "chat")}


def load(path: str | Path | None = None) -> list[dict]:
    """JudgeBench items from local .jsonl files (one per response model) or the hub (all splits)."""
    if path is None:
        return [to_item(row) for row in load_hub(HUB_ID)]
    return [to_item(row, f) for f in data_files(path, ("*.jsonl",)) for row in read_rows(f)]


def comparisons(item: dict) -> list[tuple[int, int]]:
    return [(0, 1)]


def make_record(item: dict, scores: Sequence[float | None] | None = None,
                decisions: dict[tuple[int, int], tuple[list, list]] | None = None) -> dict:
    """A JudgeBench record; pointwise scores become one order-free decision (a single game)."""
    record = {"pair_id": item["pair_id"], "source": item["source"], "label": item["label"],
              "response_model": item.get("response_model")}
    if decisions is None:
        record["decisions"] = [from_scores(scores[0], scores[1])]
        record["score_A"], record["score_B"] = scores[0], scores[1]
    else:
        in_order, swapped = decisions[(0, 1)]
        record["decisions"] = [compact(in_order), compact(swapped)] if swapped else [compact(in_order)]
    return record


# ----------------------------------------------------------------------------- reporting (patarm.eval.report)


def report_bars(metrics: dict[str, Any]) -> dict[str, float]:
    """Per-category accuracies, for the report's bar chart."""
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float))}


def report_scores(records: Sequence[dict]) -> tuple[list, list]:
    """(scores given to the better response, scores given to the other) of pointwise records."""
    good, bad = [], []
    for r in records:
        if "score_A" in r:
            first_better = LABELS[r["label"]] == A
            good.append(r["score_A"] if first_better else r["score_B"])
            bad.append(r["score_B"] if first_better else r["score_A"])
    return good, bad


# ----------------------------------------------------------------------------- analysis (patarm.eval.analysis)


def stratum(record: dict) -> str:
    return category(record["source"]) or record["source"]


def preferred_pairs(record: dict) -> list[tuple[int, int]]:
    """(better, worse) candidate indices [response_A, response_B] by JudgeBench's label."""
    return [(0, 1)] if LABELS[record["label"]] == A else [(1, 0)]
