"""Slow tier: GRPO-PAR under two real processes (DDP; DeepSpeed over two machines is test_multinode.py), resume,
export.

Every run starts from a judge that already writes valid judgments (the `sft_judge` fixture), so rewards
differ within a group, gradients are not zero, and "the weights changed" and "the resumed run equals the
uninterrupted one" are real checks rather than plumbing.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import DEMO_PAIRS

ROOT = Path(__file__).resolve().parents[2]
ACCELERATE = str(Path(sys.executable).parent / "accelerate")
TINY = "configs/grpo/tiny.yaml"


def _grpo_args(judge: Path, out: Path, *extra: str) -> list[str]:
    return ["--config", TINY, "--model_name_or_path", str(judge), "--train_file", str(DEMO_PAIRS),
            "--output_dir", str(out), "--report_to", "none", *extra]


def _run(cmd, tmp_path, extra_env=None, timeout=600):
    env = {**os.environ, "PATARM_PAIR_AUDIT": str(tmp_path / "audit"), "OMP_NUM_THREADS": "1", **(extra_env or {})}
    proc = subprocess.run([str(c) for c in cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
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


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _max_diff(a: dict, b: dict) -> float:
    """Largest element-wise difference over the tensors both hold (DeepSpeed also saves a tied lm_head)."""
    common = a.keys() & b.keys()
    assert len(common) >= len(a) - 1
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in common)


@pytest.mark.slow
def test_two_processes_keep_pairs_whole(tmp_path, sft_judge):
    """DDP on one machine; DeepSpeed (ZeRO-3) keeps pairs whole over two machines in tests/train/test_multinode.py
    (the sampler is the same under every backend, and each DeepSpeed run here cost ~30 s beyond DDP's on 2 cores)."""
    out = tmp_path / "run"
    _run([ACCELERATE, "launch", "--multi_gpu", "--num_processes", "2", "--main_process_port", "0", "-m", "patarm",
          "grpo", *_grpo_args(sft_judge, out)], tmp_path)
    _assert_whole_pairs(_audit(tmp_path), 2)
    assert (out / "checkpoint-2" / "CHECKPOINT_COMPLETE").is_file()
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("par/pair_accuracy" in m and "rewards/par/mean" in m and "rewards/format/mean" in m for m in logged)
    assert any(m.get("grad_norm", 0) > 0 for m in logged), "no step had a gradient: the rewards never differed"
    assert _max_diff(_weights(sft_judge), _weights(out)) > 0  # GRPO moved the judge


@pytest.mark.slow
def test_trl_default_sampler_would_split_pairs(tmp_path, sft_judge):
    """The negative control: with TRL's own sampler the reward's pair check fires."""
    script = (
        "import sys, patarm.train.grpo as g\n"
        "from trl import GRPOTrainer\n"
        "from patarm.train import parse_args as parse\n"
        "g.PaTaRMGRPOTrainer._get_train_sampler = GRPOTrainer._get_train_sampler\n"
        "g.train(*parse('grpo', sys.argv[1:]))\n"
    )
    argv = _grpo_args(sft_judge, tmp_path / "r", "--per_device_train_batch_size", "16", "--max_pairs", "48",
                      "--max_steps", "6")
    proc = subprocess.run([sys.executable, "-c", script, *argv], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0 and "is incomplete in this reward call" in proc.stderr


@pytest.mark.slow
def test_resume_continues_exactly_where_it_stopped(tmp_path, sft_judge):
    """An interrupted run resumed from its newest complete checkpoint sees the same pairs and ends with the
    same weights as the uninterrupted run, also when the kill came after checkpoint-3's files were written
    but before its completion marker."""
    import shutil

    base = [sys.executable, "-m", "patarm", "grpo"]
    _run([*base, *_grpo_args(sft_judge, tmp_path / "full", "--max_steps", "4", "--save_steps", "1")], tmp_path / "a")
    # The kill, during step 4's save: checkpoint-3 is on disk except for its completion marker, and
    # checkpoint-4 and the final model were never written.
    shutil.copytree(tmp_path / "full", tmp_path / "part")
    shutil.rmtree(tmp_path / "part" / "checkpoint-4")
    (tmp_path / "part" / "model.safetensors").unlink()
    (tmp_path / "part" / "checkpoint-3" / "CHECKPOINT_COMPLETE").unlink()
    metrics_before = (tmp_path / "part" / "metrics.jsonl").read_text().splitlines()
    _run([*base, *_grpo_args(sft_judge, tmp_path / "part", "--max_steps", "4", "--save_steps", "1",
                             "--resume_from_checkpoint", "true")], tmp_path / "c")
    full = [sorted(call["pairs"]) for call in _audit(tmp_path / "a")["rank-0"]]
    resumed = [sorted(call["pairs"]) for call in _audit(tmp_path / "c")["rank-0"]]
    assert full[:2] + resumed == full  # resumed from checkpoint-2 (the newest complete one): steps 3 and 4 again
    update = _max_diff(_weights(sft_judge), _weights(tmp_path / "full"))
    apart = _max_diff(_weights(tmp_path / "full"), _weights(tmp_path / "part"))
    # the same rollouts and updates: what differs is float rounding, far below one step's change
    assert update > 0 and apart < 0.02 * update, (apart, update)
    rows = [json.loads(line) for line in (tmp_path / "part" / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in rows]
    assert len(metrics_before) > 4 and steps == [1, 2, 3, 4, 4], f"each step logged once after the resume: {steps}"
    assert [r.get("reward") for r in rows] == [json.loads(m).get("reward") for m in metrics_before]  # same rollouts


@pytest.mark.slow
def test_export_gives_the_same_greedy_judgments(tmp_path, sft_judge):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from patarm.backends import GenerationOptions
    from patarm.backends.hf import HFBackend
    from patarm.data import load_pairs
    from patarm.eval.pairs import judge_pairs_pointwise
    from patarm.export import export

    out = tmp_path / "run"
    _run([sys.executable, "-m", "patarm", "grpo", *_grpo_args(sft_judge, out, "--max_steps", "2")], tmp_path)
    exported = export(out / "checkpoint-2", tmp_path / "hf", eval_results={"accuracy": 0.5})
    assert (exported / "model.safetensors").is_file() and (exported / "generation_config.json").is_file()
    card = (exported / "README.md").read_text()
    assert "rubric mode | adaptive" in card and "graded" in card and '"accuracy": 0.5' in card
    pairs = load_pairs(DEMO_PAIRS, limit=4).pairs
    opts = GenerationOptions(max_new_tokens=48)
    a = judge_pairs_pointwise(pairs, HFBackend.from_pretrained(str(out / "checkpoint-2"), opts), "pointwise-compact")
    model = AutoModelForCausalLM.from_pretrained(str(exported))
    tok = AutoTokenizer.from_pretrained(str(exported), padding_side="left")
    assert tok.chat_template
    b = judge_pairs_pointwise(pairs, HFBackend(model, tok, opts), "pointwise-compact")
    assert [r["chosen"][0]["text"] for r in a] == [r["chosen"][0]["text"] for r in b]
    assert any(r["chosen"][0]["score"] is not None for r in a)  # a real judgment, not noise


@pytest.mark.slow
def test_lora_grpo_exports_a_merged_model(tmp_path, sft_judge):
    from patarm.export import export

    out = tmp_path / "run"
    _run(
        [
            sys.executable,
            "-m",
            "patarm",
            "grpo",
            *_grpo_args(
                sft_judge,
                out,
                "--max_steps",
                "2",
                "--use_peft",
                "--lora_r",
                "4",
                "--lora_target_modules",
                "q_proj",
                "v_proj",
            ),
        ],
        tmp_path,
    )
    assert (out / "checkpoint-2" / "adapter_config.json").is_file()
    exported = export(out / "checkpoint-2", tmp_path / "hf")
    assert not (exported / "adapter_config.json").exists()  # merged, a plain causal LM
    assert _max_diff(_weights(sft_judge), _weights(exported)) > 0  # the adapter's update is in the weights
