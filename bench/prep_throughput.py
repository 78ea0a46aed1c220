"""Data-prep throughput, side by side in one run (a benchmark that prints figures, not a timed test).

    python bench/prep_throughput.py [--rows 100000] [--latency 0.2] [--concurrency 16] [--requests 480]

Prints, last:
  prep_rows_per_s=<n>                 `patarm prep normalize` (load + validate + normalise + write
                                      pairs.jsonl + manifest) over synthetic rows in three layouts;
                                      target >= 20000 on a 2-core machine
  teacher_concurrency_efficiency=<x>  achieved requests/s of the OpenAI-compatible teacher (with its
                                      on-disk cache) against a loopback server answering after a fixed
                                      latency, divided by the ideal concurrency / latency; target >= 0.8
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from patarm.backends import make_backend  # noqa: E402
from patarm.prep.normalize import NormalizeConfig, normalize  # noqa: E402


def synthetic_rows(n: int):
    """Rows in the TRL standard, TRL conversational and sharegpt layouts, in turn."""
    for i in range(n):
        question, good, bad = f"Question {i}: what is {i} plus {i}?", f"It is {2 * i}.", f"It is {2 * i + 1}."
        if i % 3 == 0:
            yield {"prompt": question, "chosen": good, "rejected": bad, "source": "bench"}
        elif i % 3 == 1:
            yield {
                "prompt": [{"role": "user", "content": question}],
                "chosen": [{"role": "assistant", "content": good}],
                "rejected": [{"role": "assistant", "content": bad}],
            }
        else:
            yield {"conversations": [{"from": "human", "value": question}], "chosen": {"from": "gpt", "value": good},
                   "rejected": {"from": "gpt", "value": bad}}


def bench_normalize(rows: int, work: Path) -> float:
    """Rows per second of a full `normalize` run (best of two, the first warms the file cache)."""
    src = work / "rows.jsonl"
    with open(src, "w", encoding="utf-8") as fh:
        for row in synthetic_rows(rows):
            fh.write(json.dumps(row) + "\n")
    best = 0.0
    for attempt in range(2):
        start = time.perf_counter()
        manifest = normalize(NormalizeConfig(input=str(src)), work / f"out{attempt}")
        elapsed = time.perf_counter() - start
        assert manifest["rows_out"] == rows, manifest["dropped"]
        best = max(best, rows / elapsed)
        print(f"normalize: {rows} rows in {elapsed:.2f} s ({manifest['layouts']})")
    return best


def bench_teacher(latency: float, concurrency: int, requests: int, work: Path) -> float:
    """Achieved / ideal request rate against a stub server in its own process (no shared GIL)."""
    server = subprocess.Popen([sys.executable, "-m", "patarm.backends.stub_server", "--port", "0", "--latency",
                               str(latency), "--max-seconds", "300"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        teacher = make_backend({"kind": "openai", "model": "bench", "base_url": base_url, "concurrency": concurrency,
                                "timeout_s": 30}, cache=work / "cache.sqlite", progress=False)
        teacher.generate([[{"role": "user", "content": "warm-up"}]])  # connect once, outside the timing
        prompts = [[{"role": "user", "content": f"prompt {i}"}] for i in range(requests)]
        start = time.perf_counter()
        teacher.generate(prompts)
        elapsed = time.perf_counter() - start
    finally:
        server.terminate()
        server.wait(timeout=10)
    achieved, ideal = requests / elapsed, concurrency / latency
    print(f"teacher: {requests} calls in {elapsed:.2f} s = {achieved:.1f}/s; ideal {ideal:.1f}/s "
          f"(concurrency {concurrency}, latency {latency * 1000:.0f} ms)")
    return achieved / ideal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--latency", type=float, default=0.2, help="server latency per request, seconds")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=480)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows_per_s = bench_normalize(args.rows, Path(tmp))
        efficiency = bench_teacher(args.latency, args.concurrency, args.requests, Path(tmp))
    print(f"prep_rows_per_s={rows_per_s:.0f}")
    print(f"teacher_concurrency_efficiency={efficiency:.3f}")


if __name__ == "__main__":
    main()
