"""What TRL's dataset preparation costs before SFT's first step, with 1 and with N tokenising processes
(`dataset_num_proc`): `patarm sft --max_steps 1` on a run folder's corpus, each setting `--repeats` times,
alternating, so the machine's drift falls on both (prints figures; not a test).

    flock /tmp/patarm-cpu.lock .venv/bin/python bench/sft_dataset_prep.py --run_dir runs/quickstart
    # another stage config: --config patarm/demo/configs/gsm8k-sft.yaml --model smollm2 --run_dir RUN/reference

`--run_dir` is a finished quickstart (its `prep/pointwise/sft.jsonl` and `base/`). A one-step run is set-up
(imports, model load), TRL's tokenisation of the whole corpus and one step; only the tokenisation depends on the
setting. Last lines: `wall_s_proc<n>=` (each run), `median_s_proc<n>=`, `saved_s=` and `speedup=` (median with 1
process / median with N). Checks that the weights after the step are the same under both (`same_weights=`): the
processes tokenise shards of the corpus and `datasets` joins them in order. Run it alone.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def fail(message: str, code: int = 2) -> None:
    """Bad input (exit 2) or a failed run (exit 1): one paragraph on stderr, no traceback."""
    print(f"bench/sft_dataset_prep.py: {message}", file=sys.stderr)
    sys.exit(code)


def one_run(args: argparse.Namespace, procs: int, out: Path) -> tuple[float, str]:
    command = [sys.executable, "-m", "patarm", "sft", "--config", args.config, "--run_dir", args.run_dir,
               "--model_name_or_path", args.model or str(Path(args.run_dir) / "base"), "--output_dir", str(out),
               "--max_steps", "1", "--dataset_num_proc", str(procs), "--save_strategy", "no"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    wall = time.perf_counter() - start
    if done.returncode != 0:
        fail(f"`patarm sft` with dataset_num_proc {procs} failed (exit {done.returncode}); its last lines:\n"
             + "\n".join(done.stderr.strip().splitlines()[-8:]), code=1)
    return wall, hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run_dir", required=True)
    parser.add_argument("--config", default="patarm/demo/configs/sft.yaml")
    parser.add_argument("--model", default=None, help="model spec (default: the run folder's base/)")
    parser.add_argument("--procs", type=int, default=2, help="tokenising processes to compare with 1")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if args.procs < 2 or args.repeats < 1:
        fail(f"--procs {args.procs} / --repeats {args.repeats}: give --procs >= 2 (compared with 1) and --repeats >= 1")
    if not Path(args.run_dir, "prep", "pointwise", "sft.jsonl").is_file():
        fail(f"--run_dir {args.run_dir} has no prep/pointwise/sft.jsonl; pass a finished run folder (`make quickstart` "
             "writes runs/quickstart)")
    if args.model is None and not Path(args.run_dir, "base").is_dir():
        fail(f"--run_dir {args.run_dir} has no base/ model; pass --model (e.g. smollm2 for a GSM8K run folder)")
    walls: dict[int, list[float]] = {1: [], args.procs: []}
    hashes: dict[int, set[str]] = {1: set(), args.procs: set()}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for procs in ((1, args.procs) if r % 2 == 0 else (args.procs, 1)):
                wall, digest = one_run(args, procs, Path(tmp) / f"r{r}-p{procs}")
                walls[procs].append(wall)
                hashes[procs].add(digest)
                print(f"wall_s_proc{procs}={wall:.1f}", flush=True)
    one, many = statistics.median(walls[1]), statistics.median(walls[args.procs])
    print(f"median_s_proc1={one:.1f}")
    print(f"median_s_proc{args.procs}={many:.1f}")
    print(f"saved_s={one - many:.1f}")
    print(f"speedup={one / many:.2f}")
    print(f"same_weights={len(hashes[1] | hashes[args.procs]) == 1}")


if __name__ == "__main__":
    main()
