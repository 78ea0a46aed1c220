"""The recipe kit every recipe shares: skip-if-done markers, the progress clock, the GRPO curve and its smoothing."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from patarm.data import Manifest
from patarm.demo import kit

ROOT = Path(__file__).resolve().parents[2]


def test_a_step_is_done_only_once_its_manifest_is_written(tmp_path):
    folder = tmp_path / "prep" / "rl"
    assert not kit.step_done(folder)
    kit.write_step(folder, Manifest(), {"pairs.jsonl": [{"a": 1}], "extra.jsonl": []})
    assert kit.step_done(folder) and (folder / "pairs.jsonl").read_text().strip() == '{"a": 1}'
    assert not kit.trained(tmp_path / "sft")
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "patarm_config.json").write_text("{}")
    assert kit.trained(tmp_path / "sft")


def test_clock_logs_one_line_per_stage_and_merges_timings(tmp_path, caplog):
    (tmp_path / "timings.json").write_text(json.dumps({"earlier/sft": 12.0}))  # a resumed run keeps its timings
    clock = kit.Clock(tmp_path)
    with caplog.at_level(logging.INFO, logger="patarm.recipe"):
        clock.done("arm/rl-set", note="kept 3 of 8 pairs")
        clock.done("arm/grpo", started=clock.t0 - 5)
    timings = json.loads((tmp_path / "timings.json").read_text())
    assert set(timings) == {"earlier/sft", "arm/rl-set", "arm/grpo"} and timings["arm/grpo"] >= 5
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and lines[0].endswith("arm/rl-set done in 0 s: kept 3 of 8 pairs")
    assert kit.Clock().path is None  # no run folder: nothing written


def test_grpo_curve_reads_the_par_metrics(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("\n".join(json.dumps(m) for m in [
        {"step": 1, "loss": 0.1},
        {"step": 1, "par/pair_accuracy": 0.5, "par/margin": 1.0, "reward": 0.2, "par/chosen_score": 8.0,
         "par/rejected_score": 7.0},
        {"step": 2, "par/pair_accuracy": 0.75},
    ]) + "\n")
    none = {"margin": None, "reward": None, "chosen_score": None, "rejected_score": None}
    assert kit.grpo_curve(metrics) == [{"step": 1, "pair_accuracy": 0.5, "margin": 1.0, "reward": 0.2,
                                        "chosen_score": 8.0, "rejected_score": 7.0},
                                       {"step": 2, "pair_accuracy": 0.75} | none]
    assert kit.grpo_curve(tmp_path / "missing.jsonl") == []


def test_smooth_is_a_trailing_mean_that_skips_missing_values():
    assert kit.smooth([1, 3, None, 5], k=2) == [1.0, 2.0, 3.0, 5.0]
    assert math.isnan(kit.smooth([None], k=1)[0])


def test_plot_grpo_curve_writes_a_png(tmp_path):
    kit.plot_grpo_curve([{"step": s, "pair_accuracy": 0.5, "margin": None} for s in range(5)], tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_train_stage_resumes_from_the_newest_complete_checkpoint(tmp_path, caplog):
    """A stage stopped after its second checkpoint (its model not yet saved) trains only its third step when the
    recipe runs it again; each step is logged once; once saved, the stage's checkpoints are gone."""
    from patarm.demo.synthetic import make_pairs
    from patarm.demo.teacher import RuleTeacher
    from patarm.io import write_jsonl
    from patarm.prep.corpus import pointwise_corpus
    from patarm.train.common import COMPLETE_MARKER

    rows, _ = pointwise_corpus(make_pairs(24, seed=1, kinds=("lowercase",)), RuleTeacher(), "pointwise-compact")
    write_jsonl(rows, tmp_path / "prep" / "pointwise" / "sft.jsonl")

    def parsed(steps: int):
        return kit.stage_args("sft", ROOT / "configs/sft/tiny.yaml", tmp_path, "--max_steps", steps,
                              "--train_files", tmp_path / "prep" / "pointwise" / "sft.jsonl", "--save_strategy",
                              "steps", "--save_steps", 1, "--logging_steps", 1, "--report_to", "none")

    out = Path(kit.run_stage("sft", parsed(2)))  # as if stopped after checkpoint-2: its model not saved yet
    (out / "model.safetensors").unlink()
    (out / "patarm_config.json").unlink()
    (out / "checkpoint-3").mkdir()  # a half-written checkpoint is skipped
    assert (out / "checkpoint-2" / COMPLETE_MARKER).is_file() and not kit.trained(out)
    with caplog.at_level(logging.INFO, logger="patarm.recipe"):
        kit.train_stage("sft", parsed(3))
    assert any(r.getMessage().endswith("sft resumes from " + str(out / "checkpoint-2")) for r in caplog.records)
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged if "loss" in m] == [1, 2, 3]  # each step once (and each run's summary row)
    assert kit.trained(out) and not list(out.glob("checkpoint-*"))
    kit.run_stage("sft", parsed(1))  # a run from step 0 starts its metrics afresh
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged if "loss" in m] == [1]
