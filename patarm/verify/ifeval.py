"""IFEval instruction-following scores through the maintained `if-verifiable` package's checkers.

Scoring is the official one (google-research instruction_following_eval): a response is matched
to its input row by prompt; prompt-level accuracy = share of prompts whose every instruction is
followed, instruction-level = followed / all instructions, each strict and loose (loose also
accepts the response with its first and/or last line removed and/or ``*`` stripped). Figures are
percentages.

Offline, the checkers need NLTK's punkt tables: pass `nltk_data` (or set NLTK_DATA) to a folder
holding ``tokenizers/punkt_tab/english``.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from patarm.io import needs_nltk_tables, read_jsonl

SEED = 0  # the official code draws a random letter for two malformed rows: fix it


@dataclass
class PromptResult:
    """Per-instruction strict/loose outcomes of one prompt."""

    key: int | str
    prompt: str
    instruction_ids: list[str]
    strict: list[bool]
    loose: list[bool]


def _use_nltk_data(nltk_data: str | os.PathLike | None) -> None:
    """Point NLTK at an offline data folder (`nltk_data`, else the folders in $NLTK_DATA). NLTK reads
    $NLTK_DATA only when it is first imported, so folders are also put on `nltk.data.path` directly."""
    if nltk_data is not None:
        folders = [str(Path(nltk_data).resolve())]
        os.environ["NLTK_DATA"] = folders[0]
    else:
        folders = [str(Path(f).resolve()) for f in os.environ.get("NLTK_DATA", "").split(os.pathsep) if f]
    if not folders:
        return
    try:
        import nltk

        for folder in reversed(folders):
            if folder not in nltk.data.path:
                nltk.data.path.insert(0, folder)
    except ImportError:  # the checkers will say so
        pass


def _registry() -> dict:
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT

    return INSTRUCTION_DICT


def check_response(row: dict, response: str) -> PromptResult:
    """Check one response against one IFEval input row ({key, prompt, instruction_id_list, kwargs})."""
    _use_nltk_data(None)  # $NLTK_DATA set after NLTK was imported still counts
    from if_verifiable import IFEvalSample, evaluate_output_for_sample
    from langdetect import DetectorFactory

    ids = list(row["instruction_id_list"])
    unknown = [i for i in ids if i not in _registry()]
    if unknown:  # the package skips these silently; the official code fails: so do we
        raise ValueError(f"prompt {row.get('key')}: unknown instruction ids {unknown}")
    random.seed(SEED)
    DetectorFactory.seed = SEED
    sample = IFEvalSample(key=row["key"], prompt=row["prompt"], instruction_id_list=ids, kwargs=row["kwargs"])
    with needs_nltk_tables(f"checking IFEval prompt {row.get('key')}"):
        results, _ = evaluate_output_for_sample("ifeval", sample, response)
    if not results:  # an empty response: the package returns nothing; every instruction fails
        return PromptResult(row["key"], row["prompt"], ids, [False] * len(ids), [False] * len(ids))
    return PromptResult(row["key"], row["prompt"], ids, [r.strict_pass for r in results],
                        [r.loose_pass for r in results])


def share_followed(row: dict | str, response: str) -> float:
    """The fraction of the row's instructions `response` follows (strict); `row` may be its JSON text."""
    import json

    strict = check_response(json.loads(row) if isinstance(row, str) else row, response).strict
    return sum(strict) / len(strict) if strict else 0.0


def summarize(results: list[PromptResult]) -> dict[str, float]:
    """The four official figures, in percent."""
    if not results:
        raise ValueError("no prompts to score")
    n_inst = sum(len(r.strict) for r in results)

    def pct(x: float, n: int) -> float:
        return round(100.0 * x / n, 4)

    return {
        "prompt_strict": pct(sum(all(r.strict) for r in results), len(results)),
        "inst_strict": pct(sum(sum(r.strict) for r in results), n_inst),
        "prompt_loose": pct(sum(all(r.loose) for r in results), len(results)),
        "inst_loose": pct(sum(sum(r.loose) for r in results), n_inst),
    }


def by_instruction(results: list[PromptResult]) -> dict[str, dict[str, dict[str, float]]]:
    """Instruction-level accuracy per instruction kind, as the official report breaks it down: `tier0` by category
    (`detectable_format`), `tier1` by instruction id (`detectable_format:title`); each {n, strict, loose} (percent),
    most frequent first."""
    tiers: dict[str, dict[str, list[int]]] = {"tier0": {}, "tier1": {}}
    for r in results:
        for iid, strict, loose in zip(r.instruction_ids, r.strict, r.loose):
            for tier, name in (("tier0", iid.split(":")[0]), ("tier1", iid)):
                n = tiers[tier].setdefault(name, [0, 0, 0])
                n[0], n[1], n[2] = n[0] + 1, n[1] + strict, n[2] + loose
    return {tier: {name: {"n": n, "strict": round(100.0 * k / n, 4), "loose": round(100.0 * m / n, 4)}
                   for name, (n, k, m) in sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0]))}
            for tier, counts in tiers.items()}


MEASURES = (("prompt_strict", "prompt", "strict"), ("inst_strict", "instruction", "strict"),
            ("prompt_loose", "prompt", "loose"), ("inst_loose", "instruction", "loose"))


def paired_change(before: list[PromptResult], after: list[PromptResult]) -> dict[str, dict[str, float]]:
    """The change from `before` to `after` on the same prompts, per official figure, with a paired test.

    Two policies answering the same prompts are compared prompt by prompt, not as two independent samples
    (which overstates the noise: most prompts are followed, or not, by both). Prompt level: the mean of the
    per-prompt differences with its standard error, and McNemar's exact test on the prompts that changed
    (`scipy.stats.binomtest`). Instruction level: a ratio of sums over prompts, so its standard error is the
    cluster-robust one (instructions of one prompt are not independent), with a two-sided normal p-value.
    Figures in percentage points; `z` = change / standard error. Prompts are matched by key; a prompt in one
    list only is an error (two runs over different prompts cannot be paired)."""
    import math

    from scipy import stats

    a, b = {r.key: r for r in before}, {r.key: r for r in after}
    if set(a) != set(b) or not a:
        only_a, only_b = sorted(set(a) - set(b), key=str), sorted(set(b) - set(a), key=str)
        raise ValueError(f"paired change needs the same prompts on both sides: {len(only_a)} only before "
                         f"(keys {only_a[:5]}), {len(only_b)} only after (keys {only_b[:5]}); answer the same prompts "
                         "in both files (a file answering only some is scored over those)")
    keys = sorted(a, key=str)
    n = len(keys)
    out: dict[str, dict[str, float]] = {}
    for name, level, kind in MEASURES:
        # per prompt: (followed before, followed after, out of); prompt level counts a prompt followed in full
        units = [(sum(x), sum(y), len(x)) if level == "instruction" else (int(all(x)), int(all(y)), 1)
                 for x, y in ((getattr(a[k], kind), getattr(b[k], kind)) for k in keys)]
        total = float(sum(u for _, _, u in units))
        d = [y - x for x, y, _ in units]
        mean = sum(d) / total
        # cluster-robust variance of a ratio of sums; with one unit per prompt it is the paired s.e. of a mean
        var = n / (n - 1) * sum((di - mean * u) ** 2 for di, (_, _, u) in zip(d, units)) if n > 1 else 0.0
        se = math.sqrt(var) / total
        extra: dict[str, int] = {}
        if level == "prompt":  # McNemar's exact test on the prompts that changed
            up, down = sum(di > 0 for di in d), sum(di < 0 for di in d)
            p = stats.binomtest(up, up + down).pvalue if up + down else 1.0
            extra = {"up": up, "down": down}
        else:
            p = 2 * stats.norm.sf(abs(mean / se)) if se > 0 else (1.0 if mean == 0 else 0.0)
        base = sum(x for x, _, _ in units) / total
        out[name] = {"before": round(100 * base, 4), "after": round(100 * (base + mean), 4),
                     "change": round(100 * mean, 4), "se": round(100 * se, 4),
                     "z": round(mean / se, 3) if se > 0 else (0.0 if mean == 0 else math.copysign(math.inf, mean)),
                     "p": float(p), "n": int(total), **extra}
    return out


def evaluate(input_path: str | Path, responses_path: str | Path, nltk_data: str | os.PathLike | None = None,
             ) -> tuple[dict[str, float], list[PromptResult]]:
    """Score a responses file (``{"prompt", "response"}`` lines) against IFEval's input_data.jsonl.

    The official evaluation answers all 541 prompts; a file answering only some is scored over those
    (the summary says how many: `prompts_scored`, `prompts_without_response`). Responses to prompts that
    are not in the input are an error (a mismatched file), as is a file answering none.
    """
    _use_nltk_data(nltk_data)
    rows = read_jsonl(input_path)
    responses: dict[str, str] = {}
    for i, line in enumerate(read_jsonl(responses_path)):
        if "prompt" not in line or "response" not in line:
            raise ValueError(f"{responses_path}: line {i + 1} lacks 'prompt' or 'response'")
        responses[line["prompt"]] = line["response"] or ""
    prompts = {row["prompt"] for row in rows}
    missing = [row["key"] for row in rows if row["prompt"] not in responses]
    extra = len(set(responses) - prompts)
    if extra or len(missing) == len(rows):
        raise ValueError(f"responses do not match the input: {len(missing)} prompts without a response "
                         f"(keys {missing[:5]}), {extra} responses to unknown prompts")
    results = [check_response(row, responses[row["prompt"]]) for row in rows if row["prompt"] in responses]
    return {**summarize(results), "prompts_scored": len(results), "prompts_without_response": len(missing)}, results
