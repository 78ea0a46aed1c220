"""bench/serve.py at its smallest size: a broken benchmark (e.g. a server that cannot batch its judge) fails here."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_serve_runs_at_its_smallest_size():
    args = ["--items", "64", "--rounds", "1", "--clients", "8", "--items-per-request", "8", "--max-batch", "32",
            "--max-new-tokens", "8"]
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "serve.py"), *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    ratio = re.search(r"^serve_vs_inprocess_ratio=(\S+)$", done.stdout, re.M)
    assert ratio and float(ratio.group(1)) > 0, done.stdout
