"""How much the quickstart's learning depends on the seed and on the CPU's kernels: `patarm quickstart` once per
(seed, kernel setting), every cell its own run folder, then the table of held-out pair accuracy after SFT and
after GRPO-PAR.

    python bench/quickstart_spread.py [--seeds 0 1 2 3 4] [--kernels native avx2 default] [--jobs 2]
                                      [--out runs/quickstart-spread] [--small]

Kernel settings (environment variables of each run; another make of CPU takes other code paths, and the order of
floating-point sums changes with them):
  native   this CPU's own kernels
  avx2     ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
  default  ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41

The first line names the ATen kernel set each setting gets on this CPU (on an AVX2-only CPU `native` is `avx2`).
`--jobs 2` runs two cells at once with one thread each (the quickstart's 0.7M-parameter judge is bound by
per-operation overhead, so two one-thread runs finish sooner than two two-thread runs in turn). A cell whose
`report.json` exists is read, not rerun, so an interrupted table resumes. Last lines: `sft_min=`, `sft_mean=`,
`grpo_minus_sft_min=`, `cells_below_0.95=`, `sft_pairs=` (the cells' SFT pairs from their reports; None: a report
written before reports stated their sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}


def run_cell(out: Path, seed: int, kernel: str, threads: int, small: bool) -> dict:
    folder = out / f"{kernel}-seed{seed}"
    report = folder / "report.json"
    if not report.is_file():
        env = {**os.environ, **KERNELS[kernel], "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        cmd = [sys.executable, "-m", "patarm", "quickstart", "--run_dir", str(folder), "--seed", str(seed)]
        started = time.time()
        with open(out / f"{kernel}-seed{seed}.log", "w") as log:
            done = subprocess.run(cmd + (["--small"] if small else []), env=env, cwd=ROOT, stdout=log,
                                  stderr=subprocess.STDOUT)
        if done.returncode:
            return {"seed": seed, "kernel": kernel, "error": f"exit {done.returncode}, see {log.name}"}
        print(f"{kernel} seed {seed}: {time.time() - started:.0f} s", flush=True)
    saved = json.loads(report.read_text())
    stages = saved["stages"]
    return {"seed": seed, "kernel": kernel, "sft": stages["sft"]["accuracy"], "grpo": stages["grpo"]["accuracy"],
            "seconds": saved.get("seconds"), "sft_pairs": saved.get("sizes", {}).get("sft_pairs")}


def aten_capability(kernel: str) -> str:
    """The ATen kernel set a process gets under a setting (`native` and `avx2` coincide on an AVX2-only CPU)."""
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **KERNELS[kernel]}, capture_output=True,
                          text=True)
    return done.stdout.strip() or f"unknown (exit {done.returncode})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    parser.add_argument("--jobs", type=int, default=2, help="cells run at once (threads per cell: 2 // jobs, >= 1)")
    parser.add_argument("--out", default="runs/quickstart-spread")
    parser.add_argument("--small", action="store_true", help="the test-suite size (seconds per cell)")
    ns = parser.parse_args()
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    threads = max(1, (os.cpu_count() or 2) // ns.jobs)
    cells = [(s, k) for k in ns.kernels for s in ns.seeds]
    print("ATen kernels: " + ", ".join(f"{k}={aten_capability(k)}" for k in ns.kernels), flush=True)
    with ThreadPoolExecutor(ns.jobs) as pool:
        rows = list(pool.map(lambda c: run_cell(out, c[0], c[1], threads, ns.small), cells))
    failed = [r for r in rows if "error" in r]
    for r in failed:
        print(f"{r['kernel']} seed {r['seed']}: {r['error']}")
    rows = [r for r in rows if "error" not in r]
    print(f"\n| kernels | {' | '.join(f'seed {s}' for s in ns.seeds)} |")
    print(f"|---|{'---|' * len(ns.seeds)}")
    for k in ns.kernels:
        cells_k = {r["seed"]: r for r in rows if r["kernel"] == k}
        print(f"| {k} | " + " | ".join(f"{cells_k[s]['sft']:.3f} → {cells_k[s]['grpo']:.3f}" if s in cells_k else "–"
                                        for s in ns.seeds) + " |")
    (out / "table.json").write_text(json.dumps(rows, indent=1))
    if rows:
        sft = [r["sft"] for r in rows]
        print(f"sft_min={min(sft):.3f}")
        print(f"sft_mean={statistics.mean(sft):.3f}")
        print(f"grpo_minus_sft_min={min(r['grpo'] - r['sft'] for r in rows):+.3f}")
        print(f"cells_below_0.95={sum(x < 0.95 for x in sft)}/{len(rows)}")
        # a cell read back from an earlier run may have other sizes than today's default (None: not recorded)
        print(f"sft_pairs={sorted({r['sft_pairs'] for r in rows}, key=str)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
