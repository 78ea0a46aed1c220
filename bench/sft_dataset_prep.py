"""What the SFT corpus's preparation costs before SFT's first step: TRL's own (one `Dataset.map` call per row and
step) against PaTaRM's batched tokenisation (`pretokenize`, patarm.train.sft_tokenize), each with N tokenising
processes (`dataset_num_proc`): `patarm sft --max_steps 1` on a run folder's corpus, each setting `--repeats`
times, alternating, so the machine's drift falls on every setting (prints figures; not a test).

    flock /tmp/patarm-cpu.lock .venv/bin/python bench/sft_dataset_prep.py --run_dir runs/quickstart
    # other settings: --settings trl:1 trl:2 batched:1 batched:2 (the first is the baseline)
    # another stage config: --config patarm/demo/configs/gsm8k-sft.yaml --model smollm2 --run_dir RUN/reference

`--run_dir` is a finished quickstart (its `prep/pointwise/sft.jsonl` and `base/`). A one-step run is set-up
(imports, model load), the tokenisation of the whole corpus and one step; only the tokenisation depends on the
setting. Last lines: `wall_s_<setting>=` (each run), `median_s_<setting>=`, then per setting after the first
`saved_s_<setting>=` and `speedup_<setting>=` (the baseline's median / its median). Checks that the weights after
the step are the same under every setting (`same_weights=`): the same tokens and labels, whichever way they were
made, and `datasets` joins the processes' shards in order. Run it alone.
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


def one_run(args: argparse.Namespace, setting: tuple[str, int], out: Path) -> tuple[float, str]:
    preparation, procs = setting
    command = [sys.executable, "-m", "patarm", "sft", "--config", args.config, "--run_dir", args.run_dir,
               "--model_name_or_path", args.model or str(Path(args.run_dir) / "base"), "--output_dir", str(out),
               "--max_steps", "1", "--dataset_num_proc", str(procs), "--save_strategy", "no",
               "--pretokenize", str(preparation == "batched").lower()]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    wall = time.perf_counter() - start
    if done.returncode != 0:
        fail(f"`patarm sft` with {preparation} preparation in {procs} process(es) failed (exit {done.returncode}); "
             "its last lines:\n" + "\n".join(done.stderr.strip().splitlines()[-8:]), code=1)
    return wall, hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()


def parse_setting(text: str) -> tuple[str, int]:
    """`trl:2` → ("trl", 2); bad text exits 2."""
    preparation, _, procs = text.partition(":")
    if preparation not in ("trl", "batched") or not procs.isdigit() or int(procs) < 1:
        fail(f"--settings {text!r}: give PREPARATION:PROCESSES, PREPARATION trl or batched, PROCESSES >= 1 "
             "(e.g. trl:2 batched:2)")
    return preparation, int(procs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run_dir", required=True)
    parser.add_argument("--config", default="patarm/demo/configs/sft.yaml")
    parser.add_argument("--model", default=None, help="model spec (default: the run folder's base/)")
    parser.add_argument("--settings", nargs="+", default=["trl:2", "batched:2"],
                        help="PREPARATION:PROCESSES to compare (trl or batched), the first the baseline")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    settings = list(dict.fromkeys(parse_setting(t) for t in args.settings))
    if len(settings) < 2 or args.repeats < 1:
        fail(f"--settings {' '.join(args.settings)} / --repeats {args.repeats}: give two settings or more (the "
             "first is the baseline) and --repeats >= 1")
    if not Path(args.run_dir, "prep", "pointwise", "sft.jsonl").is_file():
        fail(f"--run_dir {args.run_dir} has no prep/pointwise/sft.jsonl; pass a finished run folder (`make quickstart` "
             "writes runs/quickstart)")
    if args.model is None and not Path(args.run_dir, "base").is_dir():
        fail(f"--run_dir {args.run_dir} has no base/ model; pass --model (e.g. smollm2 for a GSM8K run folder)")
    names = {s: f"{s[0]}_proc{s[1]}" for s in settings}
    walls: dict[tuple, list[float]] = {s: [] for s in settings}
    hashes: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for setting in (settings if r % 2 == 0 else settings[::-1]):
                wall, digest = one_run(args, setting, Path(tmp) / f"r{r}-{names[setting]}")
                walls[setting].append(wall)
                hashes.add(digest)
                print(f"wall_s_{names[setting]}={wall:.1f}", flush=True)
    medians = {s: statistics.median(w) for s, w in walls.items()}
    for setting in settings:
        print(f"median_s_{names[setting]}={medians[setting]:.1f}")
    base = medians[settings[0]]
    for setting in settings[1:]:
        print(f"saved_s_{names[setting]}={base - medians[setting]:.1f}")
        print(f"speedup_{names[setting]}={base / medians[setting]:.2f}")
    print(f"same_weights={len(hashes) == 1}")


if __name__ == "__main__":
    main()
