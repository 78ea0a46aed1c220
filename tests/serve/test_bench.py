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


def test_bench_serve_hostile_runs_at_its_smallest_size():
    """Each attack runs against the real server and every probe is answered 200; the figures are printed."""
    args = ["--probes", "3", "--interval-ms", "0", "--warmup-s", "0.3", "--sockets", "8", "--header-mb", "2",
            "--response-chars", "20000", "--max-new-tokens", "4"]
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "serve_hostile.py"), *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    for case in ("quiet", "slowloris", "big_header", "prepare"):
        for figure in ("p50_ms", "max_ms"):
            value = re.search(rf"^{case}_health_{figure}=(\S+)$", done.stdout, re.M)
            assert value and float(value.group(1)) > 0, done.stdout
    assert re.search(r"^attack_health_max_ms=\d", done.stdout, re.M), done.stdout
