"""TRL's fused LM head on a CPU against the project's (`patarm.train.lm_head`): one forward and backward of the
per-token log-probabilities and entropies (GRPO's request) of N tokens through a [V, H] head, at SmolLM2's sizes
by default, under bf16 autocast where the CPU computes in it, else fp32.

    flock /tmp/patarm-cpu.lock python bench/lm_head.py [--tokens 2900] [--vocab 49152] [--hidden 576] [--repeats 3]

The two run alternately, each from the same inputs; the first call of each is a warm-up. Prints each one's median
seconds, the largest difference of their outputs and gradients (relative to the largest value), and last
`speedup_cpu_head=` (TRL's median / the project's).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402


def run(fn, hidden, weight, targets, grad_out, autocast: bool):
    h = hidden.detach().clone().requires_grad_()
    w = weight.detach().clone().requires_grad_()
    t = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logprobs, entropy, *_ = fn.apply(h, w, None, targets, 1.0, 32768, None, 1.0, ("log_probs", "entropy"))
    (logprobs * grad_out).sum().backward()
    return time.perf_counter() - t, (logprobs.detach(), entropy.detach(), h.grad, w.grad)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2900, help="scored tokens (a policy step's 16 rollouts of "
                                                                 "~180 tokens)")
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--hidden", type=int, default=576)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    ns = parser.parse_args()
    torch.set_num_threads(ns.threads)
    from trl.kernels import ChunkedLogProbFunction

    from patarm.train.common import cpu_bf16
    from patarm.train.lm_head import CpuLogProbFunction

    autocast = cpu_bf16()[0]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
          f"{ns.threads}, torch {torch.__version__}; {'bf16 autocast' if autocast else 'fp32'}; {ns.tokens} tokens x "
          f"vocab {ns.vocab} x hidden {ns.hidden}; load average {os.getloadavg()[0]:.2f}", flush=True)
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(ns.tokens, ns.hidden, generator=g)
    weight = torch.randn(ns.vocab, ns.hidden, generator=g) * 0.05
    targets = torch.randint(0, ns.vocab, (ns.tokens,), generator=g)
    grad_out = torch.randn(ns.tokens, generator=g)
    times: dict[str, list[float]] = {"trl": [], "cpu_head": []}
    outs = {}
    for i in range(ns.repeats + 1):
        for name, fn in (("trl", ChunkedLogProbFunction), ("cpu_head", CpuLogProbFunction)):
            seconds, outs[name] = run(fn, hidden, weight, targets, grad_out, autocast)
            if i:
                times[name].append(seconds)
    for name, ts in times.items():
        print(f"{name}: {statistics.median(ts):.2f} s forward + backward (runs {[round(t, 2) for t in ts]})")
    for label, a, b in zip(("log-probs", "entropies", "grad hidden", "grad weight"), outs["trl"], outs["cpu_head"]):
        print(f"{label}: largest difference {(a - b).abs().max().item() / a.abs().max().item():.1e} of the largest "
              "value")
    print(f"speedup_cpu_head={statistics.median(times['trl']) / statistics.median(times['cpu_head']):.2f}")


if __name__ == "__main__":
    main()
