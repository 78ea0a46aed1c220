"""Training stages in one process on tiny models: SFT data checks, truncation, BT, judge CLI, quickstart."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from helpers import DEMO_PAIRS, run_cli
from patarm.data import load_pairs
from patarm.data.schema import DataError
from patarm.judge import load_template
from patarm.judge.truncate import MARKER, truncate_judge_rows
from patarm.models.tiny import build_tiny_judge
from patarm.train.rows import pairs_to_judge_rows
from patarm.train.sft import load_sft_rows

ROOT = Path(__file__).resolve().parents[2]
DEMO = DEMO_PAIRS


@pytest.fixture(scope="module")
def tiny_judge(tmp_path_factory):
    rows = pairs_to_judge_rows(load_pairs(DEMO).pairs, "pointwise-compact")
    texts = [m["content"] for r in rows for m in r["prompt"]]
    out = tmp_path_factory.mktemp("judge")
    model, tok = build_tiny_judge(texts, out, vocab_size=400, hidden_size=32, num_layers=1)
    return out, model, tok


def test_sft_rows_are_validated(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})
                    + "\n" + json.dumps({"messages": [{"role": "user", "content": "q"}]}) + "\n")
    with pytest.raises(DataError, match=r"c\.jsonl, row 1, field 'messages'.*assistant"):
        load_sft_rows([str(path)])


def test_long_prompts_are_truncated_keeping_the_instructions(tiny_judge):
    _, _, tok = tiny_judge
    pair = load_pairs(DEMO).pairs[0]
    pair.chosen = " ".join(["word"] * 400)
    rows = pairs_to_judge_rows([pair], load_template("pointwise-compact"))
    out, count = truncate_judge_rows(rows, tok, 120)
    assert count == 1  # the chosen row; the short rejected row is untouched
    content = out[0]["prompt"][-1]["content"]
    assert MARKER.strip() in content and "</response>" in content and content.rstrip().endswith("Score 1-10.")
    ids = tok.apply_chat_template(out[0]["prompt"], tokenize=True, add_generation_prompt=True, return_dict=False)
    assert len(ids) <= 120
    assert out[1]["prompt"] == rows[1]["prompt"]


def test_judge_cli_writes_one_record_per_pair(tiny_judge, tmp_path, capsys):
    out = tmp_path / "j.jsonl"
    run_cli("judge", "--model", tiny_judge[0], "--input", DEMO, "--template", "pointwise-compact",
            "--num-samples", "2", "--temperature", "0.7", "--max-new-tokens", "8", "--output", out)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 48 and len(records[0]["chosen"]) == 2
    assert {"score", "tags_ok", "criteria", "evaluation", "par", "format"} <= set(records[0]["chosen"][0])
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert summary["pairs"] == 48


@pytest.mark.slow
def test_bt_baseline_trains(tmp_path):
    from patarm.train import parse_args as parse
    from patarm.train.bt import train

    data, args, model_args = parse("bt", ["--config", str(ROOT / "configs/bt/tiny.yaml"), "--output_dir", str(tmp_path),
                                          "--train_file", str(DEMO), "--max_steps", "2"])
    trainer = train(data, args, model_args)
    assert trainer.state.global_step == 2 and (tmp_path / "model.safetensors").is_file()


@pytest.mark.slow
def test_quickstart_small_writes_the_report(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    from patarm.demo.quickstart import Sizes, run

    sizes = replace(Sizes.small(), heads=8, kv_heads=4)  # not the small size's own 4 / 2: the judge is built from Sizes
    report = run(tmp_path, sizes)
    saved = json.loads((tmp_path / "report.json").read_text())
    base = json.loads((tmp_path / "base" / "config.json").read_text())
    assert (base["num_attention_heads"], base["num_key_value_heads"]) == (8, 4)
    assert saved["sizes"]["heads"] == 8 and saved["sizes"]["sft_pairs"] == sizes.sft_pairs  # the run states its sizes
    assert set(saved["stages"]) == {"base", "sft", "grpo"}
    for stage in saved["stages"].values():
        assert {"accuracy", "format_valid", "margin"} <= set(stage) and 0 <= stage["accuracy"] <= 1
    assert saved["grpo_curve"] and {"step", "pair_accuracy", "margin", "reward"} <= set(saved["grpo_curve"][0])
    # SFT judged the dev pairs (drawn after the held-out ones, none of them) at its last step at least
    dev, heldout = (load_pairs(tmp_path / "prep" / s / "pairs.jsonl").pairs for s in ("dev", "heldout"))
    assert len(dev) == sizes.dev and not {p.id for p in dev} & {p.id for p in heldout}
    assert saved["sft_dev"] and saved["sft_dev"][-1]["best"] in (True, False)
    assert "SFT dev pair accuracy by step" in (tmp_path / "report.md").read_text()
    assert Path(report["paths"]["plot"]).stat().st_size > 1000
    assert (tmp_path / "export" / "model.safetensors").is_file()


@pytest.mark.slow
def test_quickstart_with_an_empty_rl_set_skips_grpo(tmp_path, monkeypatch):
    """A judge that gets every pool pair right in every rollout leaves rejection sampling nothing (measured: a
    3-cycle SFT judge kept 0 of 400): GRPO is skipped and said so, the SFT judge is exported, the run finishes."""
    monkeypatch.chdir(ROOT)
    import shutil

    from patarm.demo import quickstart
    from patarm.demo.quickstart import Sizes, run

    # the RL set's rollouts sample as the GRPO stage config does (here a copy at temperature 0.7), not at a fixed 1.0
    configs = shutil.copytree(quickstart.CONFIG_DIR, tmp_path / "configs")
    hot = (configs / "grpo.yaml").read_text().replace("temperature: 1.0", "temperature: 0.7")
    (configs / "grpo.yaml").write_text(hot)
    monkeypatch.setattr(quickstart, "CONFIG_DIR", configs)
    run_dir = tmp_path / "run"
    run(run_dir, replace(Sizes.small(), rl_keep=(0.5, 1.0)))  # the small judge's correct rate is 0: none kept
    assert json.loads((run_dir / "prep" / "rl" / "manifest.json").read_text())["temperature"] == 0.7
    saved = json.loads((run_dir / "report.json").read_text())
    assert "the RL set is empty (0 of 16" in saved["grpo_skipped"] and saved["grpo_curve"] == []
    assert saved["stages"]["grpo"] == saved["stages"]["sft"] and saved["grpo_trend"] is None
    assert "GRPO skipped: the RL set is empty" in (run_dir / "report.md").read_text()
    assert not (run_dir / "grpo").exists() and not (run_dir / "grpo_curve.png").exists()
    assert (run_dir / "export" / "model.safetensors").is_file()


@pytest.mark.slow
def test_the_spread_bench_runs_two_seeds_under_forced_kernels_and_resumes(tmp_path):
    """`bench/quickstart_spread.py` at the test-suite size: two seeds under another CPU's kernels (SSE, forced through
    the environment of each cell), each its own run with its own judge, the table read back without rerunning. The
    learning itself is measured at full size (docs/results.md: 15 cells); the small judge learns nothing."""
    cmd = [sys.executable, str(ROOT / "bench" / "quickstart_spread.py"), "--small", "--seeds", "0", "1", "--kernels",
           "default", "--jobs", "2", "--out", str(tmp_path)]
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "ATen kernels: default=DEFAULT" in first.stdout
    cells = json.loads((tmp_path / "table.json").read_text())
    assert sorted((c["seed"], c["kernel"]) for c in cells) == [(0, "default"), (1, "default")]
    assert all(0 <= c["sft"] <= 1 and 0 <= c["grpo"] <= 1 for c in cells)
    reports = [json.loads((tmp_path / f"default-seed{s}" / "report.json").read_text()) for s in (0, 1)]
    assert [(r["seed"], r["cpu_kernels"]) for r in reports] == [(0, "DEFAULT"), (1, "DEFAULT")]  # the env reached it
    judges = [(tmp_path / f"default-seed{s}" / "sft" / "model.safetensors").read_bytes() for s in (0, 1)]
    assert judges[0] != judges[1]  # the seed reaches the data and the judge's initialisation
    assert "cells_below_0.95=" in first.stdout and "sft_pairs=[64]" in first.stdout  # the small size's, from reports
    stamp = (tmp_path / "default-seed0" / "report.json").stat().st_mtime_ns
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "default seed 0:" not in again.stdout  # read, not rerun
    assert (tmp_path / "default-seed0" / "report.json").stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_grpo_trackers_write_under_the_output_folder(tmp_path, monkeypatch, sft_judge):
    """Truncated prompts are logged once training began: a log before `train()` opened TensorBoard's writer in
    the working directory (`./runs/<date>`), outside the run folder."""
    from patarm.train import grpo
    from patarm.train import parse_args as parse

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    out = tmp_path / "grpo"
    args = parse("grpo", ["--config", str(ROOT / "configs/grpo/tiny.yaml"), "--model_name_or_path", str(sft_judge),
                          "--train_file", str(DEMO), "--output_dir", str(out), "--max_steps", "1",
                          "--max_prompt_length", "48", "--save_strategy", "no", "--report_to", "tensorboard",
                          "--extra_rewards", "patarm.demo.gsm8k.consistency:evidence_reward"])
    grpo.train(*args)
    assert not (cwd / "runs").exists(), sorted(p.name for p in cwd.iterdir())
    assert list((out / "runs").rglob("events.out.tfevents.*"))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any(r.get("data/truncated_prompts", 0) > 0 for r in rows)
    # an extra reward reaches TRL beside PAR and the format penalty, logged under its name (a tiny judge's text
    # states no facts: −1 for every rollout)
    assert any(r.get("rewards/evidence_reward/mean") == -1.0 and "rewards/par/mean" in r for r in rows)
