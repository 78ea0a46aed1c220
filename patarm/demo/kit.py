"""The recipe kit: what every recipe (the quickstart, the GSM8K skill recipe, the downstream loop) does between
its stages, written once.

- `stage_args` / `train_stage`: a training stage configured and run exactly as `patarm <stage>` runs it, resuming
  from the newest complete checkpoint in its folder (a stage config that saves checkpoints makes a stopped recipe
  resume mid-stage);
- `trained` / `step_done` / `write_step`: skip-if-done (a stopped run resumes where it stopped);
- `Clock`: one progress line per finished stage, and every stage's seconds (merged into `timings.json`);
- `grpo_curve` / `smooth` / `plot_grpo_curve`: the GRPO judge's PAR curve from its metrics.jsonl, and its plot.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from patarm.io import read_json, read_jsonl, write_json, write_jsonl
from patarm.models.settings import RUN_CONFIG_FILE
from patarm.train import parse_args, run_stage

logger = logging.getLogger("patarm.recipe")
MANIFEST = "manifest.json"


# ----------------------------------------------------------------------------- stages and skip-if-done


def stage_args(stage: str, config: str | Path, run_dir: str | Path, *flags: str) -> tuple[Any, ...]:
    """A training stage's (data, training, model) arguments from `config` in the run folder `run_dir`, then
    `flags`: exactly what `patarm <stage> --config CONFIG --run_dir RUN_DIR FLAGS...` parses."""
    return parse_args(stage, ["--config", str(config), "--run_dir", str(run_dir), *map(str, flags)])


def train_stage(stage: str, parsed: tuple[Any, ...]) -> str:
    """Train and save one stage from its parsed (data, training, model) arguments, as `patarm <stage>` does, but
    resuming from the newest *complete* checkpoint already in its output folder (one a stopped run of the same
    stage left there; a half-written one is skipped) unless the arguments name one; the checkpoints are removed
    once the stage is saved (the stage's folder then holds its model, and `trained` says so). Returns the folder."""
    import shutil

    from accelerate import PartialState

    from patarm.train.common import complete_checkpoints

    _, training, _ = parsed
    done = complete_checkpoints(training.output_dir)
    if done and not training.resume_from_checkpoint:
        logger.info("%s resumes from %s", stage, done[-1])
        training.resume_from_checkpoint = str(done[-1])
    out = run_stage(stage, parsed)
    state = PartialState()
    state.wait_for_everyone()
    if state.is_main_process:
        for checkpoint in Path(out).glob("checkpoint-*"):  # the stage is saved: its checkpoints are only disk now
            shutil.rmtree(checkpoint, ignore_errors=True)
    return out


def trained(folder: str | Path) -> bool:
    """A training stage is complete once it wrote its patarm_config.json (after the weights)."""
    return (Path(folder) / RUN_CONFIG_FILE).is_file()


def step_done(folder: str | Path) -> bool:
    """A data step is complete once it wrote its manifest (`write_step` writes it last)."""
    return (Path(folder) / MANIFEST).is_file()


def write_step(folder: str | Path, manifest: Any, files: dict[str, list]) -> None:
    """A data step's files (jsonl rows by file name), then its manifest: its presence marks the step complete."""
    folder = Path(folder)
    for name, rows in files.items():
        write_jsonl(rows, folder / name)
    manifest.write(str(folder / MANIFEST))


# ----------------------------------------------------------------------------- progress


class Clock:
    """One progress line per finished stage (seconds since the recipe started, the stage's own seconds, a note),
    and the stages' seconds in `timings`, merged into `{run_dir}/timings.json` when a run folder is given."""

    def __init__(self, run_dir: str | Path | None = None):
        self.t0 = self.last = time.time()
        self.path = Path(run_dir) / "timings.json" if run_dir is not None else None
        self.timings: dict[str, float] = read_json(self.path) if self.path and self.path.is_file() else {}

    def done(self, name: str, started: float | None = None, note: str = "") -> None:
        """Stage `name` finished; it started at `started` (default: when the previous stage finished)."""
        now = time.time()
        self.timings[name] = round(now - (self.last if started is None else started), 1)
        self.last = now
        if self.path is not None:
            write_json(self.timings, self.path)
        logger.info("%6.0fs  %s done in %.0f s%s", now - self.t0, name, self.timings[name], f": {note}" if note else "")


# ----------------------------------------------------------------------------- the GRPO curve


def grpo_curve(metrics: str | Path) -> list[dict]:
    """Per logged GRPO step of a PaTaRM judge: step, pair_accuracy (PAR satisfied), margin, reward, and each side's
    mean rollout score (chosen_score, rejected_score; None in runs logged before they were) ([] when the stage
    wrote no metrics.jsonl, e.g. it was skipped)."""
    path = Path(metrics)
    if not path.is_file():
        return []
    return [{"step": m["step"], "pair_accuracy": m["par/pair_accuracy"], "margin": m.get("par/margin"),
             "reward": m.get("reward"), "chosen_score": m.get("par/chosen_score"),
             "rejected_score": m.get("par/rejected_score")} for m in read_jsonl(path) if "par/pair_accuracy" in m]


def smooth(values: Sequence[float | None], k: int | None = None) -> list[float]:
    """Trailing mean over `k` points (default ~10 % of them): per-step values are noisy, each step sees a few
    pairs or prompts. None counts as missing."""
    vals = [float("nan") if v is None else float(v) for v in values]
    k = k or max(1, len(vals) // 10)
    out = []
    for i in range(len(vals)):
        window = [v for v in vals[max(0, i - k + 1):i + 1] if not math.isnan(v)]
        out.append(sum(window) / len(window) if window else float("nan"))
    return out


def plot_grpo_curve(curve: list[dict], path: str | Path, title: str = "GRPO with PAR: rollouts over training") -> None:
    """Pair accuracy (raw and smoothed, left axis) and mean score margin (right axis) over GRPO steps, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    steps = [c["step"] for c in curve]
    acc = [c["pair_accuracy"] for c in curve]
    k = max(1, len(acc) // 10)
    ax.plot(steps, acc, color="tab:blue", alpha=0.25, linewidth=0.8)
    ax.plot(steps, smooth(acc, k), label=f"pair accuracy (PAR satisfied), {k}-step mean", color="tab:blue",
            linewidth=2)
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("pair accuracy", color="tab:blue")
    ax.set_ylim(0, 1)
    twin = ax.twinx()
    twin.plot(steps, [c["margin"] if c["margin"] is not None else float("nan") for c in curve],
              label="mean margin", color="tab:orange")
    twin.set_ylabel("mean score margin s̄c − s̄r", color="tab:orange")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
