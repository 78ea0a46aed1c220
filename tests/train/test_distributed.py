"""Slow tier: GRPO-PAR under two real processes (DDP and DeepSpeed ZeRO-2), resume, export."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import DEMO_PAIRS, run_cli

ROOT = Path(__file__).resolve().parents[2]
ACCELERATE = str(Path(sys.executable).parent / "accelerate")
TINY = "configs/grpo/tiny.yaml"


def _run(cmd, tmp_path, extra_env=None, timeout=600):
    env = {**os.environ, "PATARM_PAIR_AUDIT": str(tmp_path / "audit"), "OMP_NUM_THREADS": "1", **(extra_env or {})}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc


def _audit(tmp_path):
    calls = {}
    for f in sorted((tmp_path / "audit").glob("rank-*.jsonl")):
        calls[f.stem] = [json.loads(line) for line in f.read_text().splitlines()]
    return calls


def _assert_whole_pairs(calls, ranks):
    assert sorted(calls) == [f"rank-{r}" for r in range(ranks)], f"expected {ranks} processes, audit: {list(calls)}"
    for rank_calls in calls.values():
        assert rank_calls, "a process made no reward call"
        for call in rank_calls:
            for c, r in call["pairs"].values():
                assert c == r == 4  # num_generations rollouts on each side, in the same call


@pytest.mark.slow
@pytest.mark.parametrize("launcher", [
    ["--multi_gpu", "--num_processes", "2"],
    ["--use_deepspeed", "--zero_stage", "2", "--num_processes", "2"],
], ids=["ddp", "deepspeed-zero2"])
def test_two_processes_keep_pairs_whole(tmp_path, launcher):
    out = tmp_path / "run"
    _run([ACCELERATE, "launch", *launcher, "--main_process_port", "0", "-m", "patarm", "grpo",
          "--config", TINY, "--output_dir", str(out)], tmp_path)
    _assert_whole_pairs(_audit(tmp_path), 2)
    assert (out / "checkpoint-2" / "CHECKPOINT_COMPLETE").is_file()
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("par/pair_accuracy" in m and "rewards/par/mean" in m and "rewards/format/mean" in m for m in logged)


@pytest.mark.slow
def test_trl_default_sampler_would_split_pairs(tmp_path):
    """The negative control: with TRL's own sampler the reward's pair check fires."""
    script = (
        "import sys, patarm.train.grpo as g\n"
        "from trl import GRPOTrainer\n"
        "g.PaTaRMGRPOTrainer._get_train_sampler = GRPOTrainer._get_train_sampler\n"
        "g.main(sys.argv[1:])\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, "--config", TINY, "--output_dir", str(tmp_path / "r"),
                           "--per_device_train_batch_size", "16", "--max_pairs", "48", "--max_steps", "6"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0 and "is incomplete in this reward call" in proc.stderr


@pytest.mark.slow
def test_resume_continues_the_same_pair_order(tmp_path):
    base = [sys.executable, "-m", "patarm", "grpo", "--config", TINY, "--max_steps", "4", "--save_steps", "2"]
    _run([*base, "--output_dir", str(tmp_path / "full")], tmp_path / "a")
    _run([*base, "--output_dir", str(tmp_path / "part"), "--max_steps", "2"], tmp_path / "b")
    # a half-written checkpoint (no completion marker) must be ignored when resuming
    (tmp_path / "part" / "checkpoint-3").mkdir()
    _run([*base, "--output_dir", str(tmp_path / "part"), "--resume_from_checkpoint", "true"], tmp_path / "c")
    full = [sorted(call["pairs"]) for call in _audit(tmp_path / "a")["rank-0"]]
    first = [sorted(call["pairs"]) for call in _audit(tmp_path / "b")["rank-0"]]
    resumed = [sorted(call["pairs"]) for call in _audit(tmp_path / "c")["rank-0"]]
    assert first + resumed == full


@pytest.mark.slow
def test_export_gives_the_same_greedy_judgments(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from patarm.data import load_pairs
    from patarm.export import export
    from patarm.backends import GenerationOptions
    from patarm.backends.hf import HFBackend
    from patarm.eval.pairs import judge_pairs_pointwise

    out = tmp_path / "run"
    _run([sys.executable, "-m", "patarm", "grpo", "--config", TINY, "--output_dir", str(out), "--max_steps", "2"], tmp_path)
    exported = export(out / "checkpoint-2", tmp_path / "hf", eval_results={"accuracy": 0.5})
    assert (exported / "model.safetensors").is_file() and (exported / "generation_config.json").is_file()
    card = (exported / "README.md").read_text()
    assert "rubric mode | adaptive" in card and "graded" in card and '"accuracy": 0.5' in card
    pairs = load_pairs(DEMO_PAIRS, limit=4).pairs
    opts = GenerationOptions(max_new_tokens=16)
    a = judge_pairs_pointwise(pairs, HFBackend.from_pretrained(str(out / "checkpoint-2"), opts), "pointwise-compact")
    model = AutoModelForCausalLM.from_pretrained(str(exported))
    tok = AutoTokenizer.from_pretrained(str(exported), padding_side="left")
    assert tok.chat_template
    b = judge_pairs_pointwise(pairs, HFBackend(model, tok, opts), "pointwise-compact")
    assert [r["chosen"][0]["text"] for r in a] == [r["chosen"][0]["text"] for r in b]


@pytest.mark.slow
def test_lora_grpo_exports_a_merged_model(tmp_path):
    from transformers import AutoModelForCausalLM

    from patarm.export import export

    out = tmp_path / "run"
    _run([sys.executable, "-m", "patarm", "grpo", "--config", TINY, "--output_dir", str(out), "--max_steps", "2",
          "--use_peft", "--lora_r", "4", "--lora_target_modules", "q_proj", "v_proj"], tmp_path)
    assert (out / "checkpoint-2" / "adapter_config.json").is_file()
    exported = export(out / "checkpoint-2", tmp_path / "hf")
    assert not (exported / "adapter_config.json").exists()  # merged, a plain causal LM
    model = AutoModelForCausalLM.from_pretrained(str(exported))
    assert not any("lora" in name for name, _ in model.named_parameters())
