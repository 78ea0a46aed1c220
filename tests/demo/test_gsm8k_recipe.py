"""`patarm quickstart --recipe gsm8k-skill` end to end on a handful of problems (slow: SmolLM2-135M-Instruct on
the CPU, every stage, voting on the final judge and the BT baseline), then resumed with nothing left to do. It reads
../shared/benchmarks, so a fresh clone's CI skips it; in the development checkout it is the suite's longest test:
131 s on a 2-core Ice Lake Xeon in fp32 at 2 SFT problems (4 rows, one step) and GRPO at its smallest group (G = 2),
was 192 s at 4 problems and G = 4. It runs the reference arm: the no-reference and evidence arms are its code with
other judge prompts (tests/demo/test_gsm8k.py and tests/demo/test_gsm8k_graded.py check those prompts and the arms'
arguments) and no BT of their own."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import smollm2_missing

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "patarm" / "demo" / "configs"

TINY = ["--heldout_problems", "1", "--sft_problems", "2", "--rl_problems", "1", "--rl_rollouts", "2",
        "--rl_keep", "0.0", "1.0", "--grpo_steps", "1", "--max_prompt_tokens", "256", "--max_new_tokens", "64",
        "--eval_batch_size", "8", "--vote_k", "2", "--arms", "reference"]


@pytest.mark.slow
@pytest.mark.skipif(smollm2_missing() is not None, reason=str(smollm2_missing()))
def test_gsm8k_skill_recipe_runs_end_to_end_and_resumes(tmp_path, bench):
    run_dir = tmp_path / "run"
    grpo = yaml.safe_load((CONFIGS / "gsm8k-grpo.yaml").read_text()) | {"num_generations": 2,
                                                                         "per_device_train_batch_size": 4}
    (tmp_path / "grpo.yaml").write_text(yaml.safe_dump(grpo))  # the recipe's GRPO stage at its smallest group
    command = [sys.executable, "-m", "patarm", "quickstart", "--recipe", "gsm8k-skill", "--run_dir", str(run_dir),
               "--data_dir", str(bench / "gsm8k"), "--grpo_config", str(tmp_path / "grpo.yaml"), *TINY]
    first = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-3000:]
    report = json.loads((run_dir / "report.json").read_text())
    assert set(report["arms"]) == {"reference"}
    for arm, result in report["arms"].items():
        assert set(result["stages"]) == {"base", "sft", "grpo"}, arm
        for summary in [*result["stages"].values(), result["bt"]]:
            assert summary["problems"] == 1 and 0 <= summary["pair_accuracy"] <= 1 and 0 <= summary["best_of_n"] <= 100
        assert set(result["stages"]["grpo"]["voting"]) == {"vote@1", "vote@2", "adaptive@2"}
        assert 0 <= result["stages"]["sft"]["consistency"]["consistent_rate"] <= 1
        records = [json.loads(line) for line in (run_dir / arm / "eval" / "sft.jsonl").read_text().splitlines()]
        assert [len(r["scores"]) for r in records] == [4]
    split = json.loads((run_dir / "split.json").read_text())
    assert len(split["heldout"]) == 1 and not set(split["heldout"]) & (set(split["sft"]) | set(split["rl"]))
    # the reference arm's judge sees the reference, not the evidence arm's arithmetic check
    sft_rows = (run_dir / "reference" / "prep" / "pointwise" / "sft.jsonl").read_text()
    assert "reference-answer" in sft_rows and "Verifier evidence" not in sft_rows
    assert "issues :: " in sft_rows  # the default teacher states the count of issues (since 2026-12-06)
    md = (run_dir / "report.md").read_text()
    assert "Oracle@4" in md and "majority vote" in md and "BT scalar RM" in md and "tie" in md and "adaptive@2" in md
    assert (run_dir / "bo4.png").stat().st_size > 0
    assert "reference/sft done" in first.stderr and "reference/eval-grpo done" in first.stderr  # progress shown

    timings = (run_dir / "timings.json").read_text()
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert " done in " not in again.stderr  # every stage's output existed: nothing ran again
    assert (run_dir / "timings.json").read_text() == timings
    assert json.loads((run_dir / "report.json").read_text())["arms"] == report["arms"]


def test_the_recipe_writes_only_into_its_run_folder(tmp_path, bench, monkeypatch):
    """A tiny judge end to end (seconds): nothing lands in the working directory — the base judge's tiny model is
    built inside the run folder (it was once built under ./runs/tiny-base of whatever folder the user was in)."""
    from helpers import run_cli

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    run_cli("quickstart", "--recipe", "gsm8k-skill", "--model", "tiny", "--run_dir", tmp_path / "run",
            "--data_dir", bench / "gsm8k", *TINY, "--bt_baseline", "false")
    assert list(cwd.iterdir()) == []
    assert (tmp_path / "run" / "report.json").is_file() and (tmp_path / "run" / "tiny-base").is_dir()


def test_grpo_epochs_caps_grpo_at_passes_over_the_kept_rl_set(tmp_path, bench):
    """`--grpo_epochs 1` (the paper's one RL epoch): GRPO-PAR runs one step per kept pair (the default config's
    step is 1 pair × 2 sides × G = 8), not `grpo_steps` steps cycling over a small set; the report states both."""
    from helpers import run_cli

    run_dir = tmp_path / "run"
    run_cli("quickstart", "--recipe", "gsm8k-skill", "--model", "tiny", "--run_dir", run_dir, "--data_dir",
            bench / "gsm8k", *TINY, "--bt_baseline", "false", "--vote_k", "0", "--rl_problems", "2",
            "--grpo_steps", "7", "--grpo_epochs", "1")  # a flag given twice: the later one wins
    arm = json.loads((run_dir / "report.json").read_text())["arms"]["reference"]
    kept = arm["prep"]["rl"]["kept"]
    assert 1 <= kept <= 2
    assert arm["prep"]["grpo"] == {"steps": kept, "pairs_per_step": 1.0, "passes": 1.0, "epochs_cap": 1.0}
    assert [c["step"] for c in arm["grpo_curve"]] == list(range(1, kept + 1))  # logged every step
    assert f"| {kept} (1) |" in (run_dir / "report.md").read_text()


def test_grpo_plan_counts_pairs_per_step_from_the_stage_config():
    from types import SimpleNamespace

    from patarm.demo.gsm8k.recipe import parse_args
    from patarm.demo.gsm8k.stages import grpo_plan

    def training(batch=16, accumulation=1, processes=1, generations=8):
        return SimpleNamespace(per_device_train_batch_size=batch, gradient_accumulation_steps=accumulation,
                               world_size=processes, num_generations=generations)

    # the CPU default: 1 pair × 2 sides × G = 8 a step; 4 kept pairs and 40 steps are 10 passes unless capped
    assert grpo_plan(40, None, 4, training()) == {"steps": 40, "pairs_per_step": 1.0, "passes": 10.0,
                                                  "epochs_cap": None}
    assert grpo_plan(40, 1.0, 4, training())["steps"] == 4
    assert grpo_plan(40, 1.0, 80, training())["steps"] == 40  # grpo_steps stays the most
    # two processes × 2 accumulation steps: 4 pairs a step; 10 pairs in one epoch are 3 steps (the last one cycles)
    assert grpo_plan(40, 1.0, 10, training(accumulation=2, processes=2)) == {
        "steps": 3, "pairs_per_step": 4.0, "passes": 1.2, "epochs_cap": 1.0}
    assert grpo_plan(40, 0.1, 4, training())["steps"] == 1  # at least one step
    assert grpo_plan(40, 2.0, 4, training())["steps"] == 8
    with pytest.raises(ValueError, match="grpo_epochs must be > 0"):
        parse_args(["--grpo_epochs", "0"])
