"""Skill-RM benchmark (not a timed test): sandbox throughput and the prompt cost of static routing.

    python bench/skills.py [--runs 200] [--workers N]

Prints `sandbox_runs_per_s=<n>` (short programs through the sandbox worker pool; the isolation
level used is printed too) and, per domain, the prompt size of static routing versus pasting the
whole resource bank into a flat prompt. Token counts are a tokenizer-free proxy (words and
punctuation marks), the same for both sides of the comparison.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from patarm.skills.package import find_skill  # noqa: E402
from patarm.skills.router import bank_view_resources, static_prompt  # noqa: E402
from patarm.verify.sandbox import SandboxPool  # noqa: E402

DOMAINS = ("chat", "math", "code", "safety", "instruction-following")
PROGRAM = "def f(n):\n    return sum(i * i for i in range(n))\nassert f(100) == 328350\nprint('ok')\n"


def approx_tokens(text: str) -> int:
    """Words and punctuation marks: a stable stand-in for a tokenizer's count."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def sandbox_throughput(runs: int, workers: int | None) -> tuple[float, str, int]:
    """(runs per second, isolation level, failures) for `runs` short programs."""
    pool = SandboxPool(workers, allow_weak=True)  # our own program: a weaker level is fine for a figure
    pool.map([PROGRAM] * min(4, runs))  # warm the probe and the page cache
    start = time.perf_counter()
    verdicts = pool.map([PROGRAM] * runs)
    elapsed = time.perf_counter() - start
    return runs / elapsed, verdicts[0].isolation, sum(v.status != "ok" for v in verdicts)


def routing_cost() -> list[tuple[str, int, int]]:
    """(domain, static-routing prompt tokens, whole-bank prompt tokens): the same judge messages
    and sample, with the routed resources or with every view resource of the bank."""
    skill = find_skill("reward-judge")
    everything = bank_view_resources(skill)
    rows = []
    for domain in DOMAINS:
        routed = static_prompt(skill, "(prompt)", "(response)", domain, run_verifiers=False)
        flat = static_prompt(skill, "(prompt)", "(response)", domain, run_verifiers=False, resources=everything)
        rows.append((domain, *(sum(approx_tokens(m["content"]) for m in msgs) for msgs in (routed, flat))))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=None, help="default: CPU count")
    args = parser.parse_args()
    rate, level, failures = sandbox_throughput(args.runs, args.workers)
    print(f"sandbox_runs_per_s={rate:.1f} isolation={level} failures={failures}")
    for domain, routed, flat in routing_cost():
        print(f"prompt_tokens domain={domain} static_routing={routed} whole_bank={flat} ratio={routed / flat:.2f}")


if __name__ == "__main__":
    main()
