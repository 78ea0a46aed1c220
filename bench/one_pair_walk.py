"""The one-pair walk: which patarm modules a run of the CPU recipe chain (prep run → sft → grpo → export → eval) enters,
in the order it first enters them, and how often that order switches between top-level packages (patarm.data,
patarm.judge, ...; a module directly under patarm counts as its own package). A reading aid for the code's shape,
not a timing: fewer modules and switches mean a shorter walk for a reader following one pair through the stages.

    flock /tmp/patarm-cpu.lock python bench/one_pair_walk.py [--root OTHER_CHECKOUT] [--out walk.json]

`--root` traces another checkout of the project (e.g. an older commit unpacked with `git archive`), with its own
configs; the eval step judges one item per benchmark (`--limit 1`) and needs ../shared/benchmarks beside the root.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def walk(root: Path) -> dict:
    """Run the chain from `root` in a temporary folder, recording every patarm module a Python function runs in."""
    sys.path.insert(0, str(root))
    first_seen: dict[str, int] = {}
    stage_of: dict[str, str] = {}
    stage = ["start"]

    def profile(frame, event, arg):
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith("patarm") and name not in first_seen:
                first_seen[name] = len(first_seen)
                stage_of[name] = stage[0]

    from patarm.cli import main

    configs = root / "configs"
    commands = [("prep", ["prep", "run", "--config", configs / "prep" / "cpu-tiny.yaml"]),
                ("sft", ["sft", "--config", configs / "sft" / "tiny.yaml"]),
                ("grpo", ["grpo", "--config", configs / "grpo" / "tiny.yaml"]),
                ("export", ["export", "--config", configs / "export" / "tiny.yaml"]),
                ("eval", ["eval", "--config", configs / "eval" / "tiny.yaml", "--limit", "1"])]
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            for name, argv in commands:
                stage[0] = name
                threading.setprofile(profile)
                sys.setprofile(profile)
                try:
                    main([str(a) for a in argv])
                finally:
                    sys.setprofile(None)
                    threading.setprofile(None)
        finally:
            os.chdir(cwd)
    order = sorted(first_seen, key=first_seen.get)
    switches = sum(package(a) != package(b) for a, b in zip(order, order[1:]))
    return {"root": str(root), "modules": len(order), "packages": sorted({package(m) for m in order}),
            "switches": switches, "order": [f"{stage_of[m]}: {m}" for m in order]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=HERE, help="the checkout to trace (default: this one)")
    parser.add_argument("--out", type=Path, default=None, help="also write the full walk as JSON here")
    args = parser.parse_args()
    result = walk(args.root.resolve())
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: result[k] for k in ("root", "modules", "switches", "packages")}))


if __name__ == "__main__":
    main()
