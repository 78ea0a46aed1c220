"""Throughput through `patarm serve` against direct in-process batched judging: same model, same items.

    flock /tmp/patarm-cpu.lock python bench/serve.py [--model DIR] [--items 1024] [--clients 8]
        [--items-per-request 8] [--rounds 5]

The in-process side calls `JudgeScorer.score` on batches of `--max-batch` items. The served side starts
the real CLI (`python -m patarm serve`) in its own process and sends the same items from
`--clients` concurrent loopback clients, `--items-per-request` items per request. The two sides
alternate in rounds so machine noise hits both; the ratio is the median of the rounds' ratios.
Without `--model` a random judge of the quickstart's size is built, with end-of-sequence suppressed
so every judgment has exactly `--max-new-tokens` tokens on both sides. The last lines are
`serve_vs_inprocess_ratio=` (target >= 0.9)
and `p99_ms=` (request latency through the server).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from patarm.data import load_pairs  # noqa: E402
from patarm.serve.scorer import DEMO_PAIRS, ScoreItem, load_scorer  # noqa: E402
from patarm.train.rows import pairs_to_judge_rows  # noqa: E402

TEMPLATE = "pointwise-compact"


def build_judge(out: Path, new_tokens: int) -> str:
    """A random judge of the quickstart's size whose every judgment is `new_tokens` long."""
    from patarm.models.tiny import build_tiny_judge

    rows = pairs_to_judge_rows(load_pairs(DEMO_PAIRS).pairs, TEMPLATE)
    model, tokenizer = build_tiny_judge([m["content"] for r in rows for m in r["prompt"]], None, vocab_size=1024,
                                        hidden_size=192, num_layers=3, num_heads=4, num_kv_heads=2,
                                        intermediate_size=576)
    model.generation_config.min_new_tokens = new_tokens  # equal work on both sides, whatever the batches
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


def bench_items(count: int) -> list[dict]:
    pairs = load_pairs(DEMO_PAIRS).pairs
    sides = [(p, side) for p in pairs for side in ("chosen", "rejected")]
    return [{"prompt": p.prompt, "response": getattr(p, side), "domain": p.domain, "id": str(i)}
            for i, (p, side) in enumerate(sides[i % len(sides)] for i in range(count))]


def run_inprocess(scorer, items: list[dict], max_batch: int) -> float:
    """Seconds to judge `items` in batches of `max_batch`, in this process."""
    start = time.perf_counter()
    for i in range(0, len(items), max_batch):
        scorer.score([ScoreItem(**{k: v for k, v in it.items() if k != "id"}) for it in items[i:i + max_batch]])
    return time.perf_counter() - start


def run_served(url: str, items: list[dict], clients: int, per_request: int) -> tuple[float, list[float]]:
    """(seconds for all items, per-request latencies in seconds) through the server."""
    requests = [items[i:i + per_request] for i in range(0, len(items), per_request)]
    it, latencies = iter(requests), []

    def client() -> None:
        with httpx.Client(base_url=url, timeout=600) as http:
            for chunk in it:  # shared: each free client takes the next request
                t = time.perf_counter()
                r = http.post("/v1/judge", json={"items": chunk})
                r.raise_for_status()
                assert [x["id"] for x in r.json()["results"]] == [c["id"] for c in chunk]
                latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for f in [pool.submit(client) for _ in range(clients)]:
            f.result()
    return time.perf_counter() - start, latencies


def start_server(model: str, args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "patarm", "serve", "--model", model, "--port", "0", "--template", TEMPLATE,
           "--max-new-tokens", str(args.max_new_tokens), "--max-batch", str(args.max_batch),
           "--max-wait-ms", str(args.max_wait_ms), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    while True:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before listening")
        found = re.search(r"listening on (http://\S+)", line)
        if found:
            url = found.group(1)
            break
    for _ in range(600):
        try:
            if httpx.get(url + "/health").status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("the server did not answer /health")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="A judge folder (default: build a random quickstart-size judge).")
    p.add_argument("--items", type=int, default=1024)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--items-per-request", type=int, default=8)
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--max-wait-ms", type=float, default=10.0)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()

    model = args.model or build_judge(Path(tempfile.mkdtemp(prefix="bench-serve-")), args.max_new_tokens)
    items = bench_items(args.items)
    scorer = load_scorer(model, max_new_tokens=args.max_new_tokens, batch_size=args.max_batch, template=TEMPLATE)
    proc, url = start_server(model, args)
    try:
        run_inprocess(scorer, items[:args.max_batch], args.max_batch)  # warm-up, both sides
        run_served(url, items[:args.max_batch], args.clients, args.items_per_request)
        direct, served, latencies = [], [], []
        for r in range(args.rounds):
            direct.append(run_inprocess(scorer, items, args.max_batch))
            seconds, lat = run_served(url, items, args.clients, args.items_per_request)
            served.append(seconds)
            latencies += lat
            print(f"round {r}: inprocess {len(items) / direct[-1]:.1f} items/s, served {len(items) / seconds:.1f} "
                  f"items/s", flush=True)
        text = httpx.get(url + "/metrics").text
        count, total = (float(re.search(rf"^patarm_serve_batch_size_{k} (\S+)$", text, re.M).group(1))
                        for k in ("count", "sum"))
    finally:
        proc.terminate()
        proc.wait(60)
        proc.stderr.close()
    inproc, through = len(items) / statistics.median(direct), len(items) / statistics.median(served)
    ratio = statistics.median(d / s for d, s in zip(direct, served))  # rounds side by side see the same noise
    print(f"items={len(items)} clients={args.clients} items_per_request={args.items_per_request} "
          f"max_batch={args.max_batch} max_new_tokens={args.max_new_tokens} rounds={args.rounds}")
    print(f"inprocess_items_per_s={inproc:.1f}")
    print(f"serve_items_per_s={through:.1f}")
    print(f"served_mean_batch={total / count:.1f}")
    print(f"p50_ms={1000 * percentile(latencies, 0.5):.0f}")
    print(f"serve_vs_inprocess_ratio={ratio:.3f}")
    print(f"p99_ms={1000 * percentile(latencies, 0.99):.0f}")


if __name__ == "__main__":
    main()
