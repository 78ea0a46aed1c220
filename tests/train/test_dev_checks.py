"""SFT's dev-pair checks (patarm.train.dev): pair accuracy judged while training, the stop at a target, the best
check's weights at the end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from patarm.data import write_pairs
from patarm.demo.synthetic import make_pairs
from patarm.demo.teacher import RuleTeacher
from patarm.io import read_jsonl, write_jsonl
from patarm.prep.corpus import pointwise_corpus
from patarm.train import parse_args as parse
from patarm.train import sft
from patarm.train.common import weight_fingerprint

ROOT = Path(__file__).resolve().parents[2]


def _corpus(run: Path) -> None:
    rows, _ = pointwise_corpus(make_pairs(40, seed=3, kinds=("lowercase", "uppercase")), RuleTeacher(),
                               "pointwise-compact", min_margin=2.0)
    write_jsonl(rows, run / "prep" / "pointwise" / "sft.jsonl")
    write_pairs(make_pairs(4, seed=9, kinds=("lowercase", "uppercase")), run / "prep" / "dev" / "pairs.jsonl")


def _train(run: Path, *flags: str):
    args = parse("sft", ["--config", str(ROOT / "configs/sft/tiny.yaml"), "--run_dir", str(run),
                         "--train_files", str(run / "prep" / "pointwise" / "sft.jsonl"), "--max_steps", "8",
                         "--report_to", "none", "--dev_pairs", str(run / "prep" / "dev" / "pairs.jsonl"),
                         "--dev_eval_steps", "2", *flags])
    return sft.train(*args)


@pytest.fixture
def scripted(monkeypatch):
    """dev_pair_accuracy replaced by a script of accuracies; records the weights each check saw."""
    seen: list[dict] = []
    script = [0.5, 0.9, 0.7, 0.8]

    def fake(model, tokenizer, pairs, template, max_new_tokens, batch_size=64, enable_thinking=False):
        assert template == "pointwise-compact" and len(pairs) == 4 and max_new_tokens > 0
        seen.append(weight_fingerprint(model.named_parameters()))
        return {"dev_accuracy": script[len(seen) - 1], "dev_format_valid": 1.0}

    monkeypatch.setattr("patarm.train.dev.dev_pair_accuracy", fake)
    return seen


def test_the_best_check_is_kept(tmp_path, scripted):
    _corpus(tmp_path)
    trainer = _train(tmp_path)
    assert trainer.state.global_step == 8
    log = read_jsonl(tmp_path / "sft" / "dev.jsonl")
    assert [(r["step"], r["dev_accuracy"], r["best"]) for r in log] == [
        (2, 0.5, True), (4, 0.9, True), (6, 0.7, False), (8, 0.8, False)]
    assert json.loads((tmp_path / "sft" / "dev-best.json").read_text()) == {"step": 4}
    from transformers import AutoModelForCausalLM

    saved = weight_fingerprint(AutoModelForCausalLM.from_pretrained(tmp_path / "sft").named_parameters())
    assert saved == scripted[1]  # the weights of step 4, the best check
    assert saved != scripted[3]  # not the last step's


def test_training_stops_at_the_target(tmp_path, scripted):
    _corpus(tmp_path)
    trainer = _train(tmp_path, "--dev_target", "0.9")
    assert trainer.state.global_step == 4
    assert [r["step"] for r in read_jsonl(tmp_path / "sft" / "dev.jsonl")] == [2, 4]


def test_without_keep_best_the_last_step_is_saved(tmp_path, scripted):
    _corpus(tmp_path)
    _train(tmp_path, "--dev_keep_best", "false")
    from transformers import AutoModelForCausalLM

    saved = weight_fingerprint(AutoModelForCausalLM.from_pretrained(tmp_path / "sft").named_parameters())
    assert saved == scripted[3]
    assert not (tmp_path / "sft" / "dev-best.pt").exists()


def test_a_missing_dev_file_is_named(tmp_path):
    _corpus(tmp_path)
    (tmp_path / "prep" / "dev" / "pairs.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match="dev_pairs .*pairs.jsonl does not exist"):
        _train(tmp_path)


def test_dev_accuracy_is_the_pair_accuracy_patarm_eval_reports(sft_judge):
    """The check judges as `patarm eval` does: the same accuracy as judge_pairs_pointwise + summarize."""
    from patarm.backends import GenerationOptions
    from patarm.backends.hf import HFBackend
    from patarm.eval.pairs import judge_pairs_pointwise, summarize
    from patarm.models import load_causal_lm
    from patarm.train.dev import dev_pair_accuracy

    model, tokenizer = load_causal_lm(str(sft_judge))
    pairs = make_pairs(24, seed=11, kinds=("lowercase", "uppercase"))
    model.train()
    got = dev_pair_accuracy(model, tokenizer, pairs, "pointwise-compact", 48)
    assert model.training  # the check leaves the model as it found it
    backend = HFBackend(model.eval(), tokenizer, GenerationOptions(max_new_tokens=48, temperature=0.0))
    want = summarize(judge_pairs_pointwise(pairs, backend, "pointwise-compact"))
    assert got["dev_accuracy"] == pytest.approx(want["accuracy"])
    assert got["dev_format_valid"] == 1.0
    assert torch.is_grad_enabled()


TWO_RANKS = """
import json, os, shutil, sys
from pathlib import Path
import patarm.train.dev as dev
from patarm.train import parse_args as parse
from patarm.train import sft
from patarm.train.common import weight_fingerprint

seen, script = [], [0.5, 0.9, 0.7, 0.8]

def fake(model, *args, **kwargs):
    seen.append(weight_fingerprint(model.named_parameters()))
    return {"dev_accuracy": script[len(seen) - 1], "dev_format_valid": 1.0}

dev.dev_pair_accuracy = fake
root, rank = Path(sys.argv[1]), int(os.environ["RANK"])
run = root / f"node-{rank}"  # each process its own folder: two machines without a shared file system
shutil.copytree(root / "data", run)
trainer = sft.train(*parse("sft", ["--config", sys.argv[2], "--run_dir", str(run), "--max_steps", "8",
                                   "--train_files", str(run / "prep" / "pointwise" / "sft.jsonl"),
                                   "--model_name_or_path", str(run / "tiny-base"),
                                   "--report_to", "none", "--dev_pairs", str(run / "prep" / "dev" / "pairs.jsonl"),
                                   "--dev_eval_steps", "2"]))
(run / "fingerprints.json").write_text(json.dumps({"final": weight_fingerprint(trainer.model.named_parameters()),
                                                   "seen": seen}))
"""


@pytest.mark.slow
def test_two_processes_without_a_shared_folder_end_on_the_best_check(tmp_path):
    """Two real processes (DDP), each with its own output folder, as on two machines without a shared file system:
    only the main process judges and holds dev-best.pt, and both end on the weights of its best check."""
    import os
    import subprocess
    import sys

    from patarm.models import resolve_model

    _corpus(tmp_path / "data")
    texts = [m["content"] for r in read_jsonl(tmp_path / "data" / "prep" / "pointwise" / "sft.jsonl")
             for m in r["messages"]]
    resolve_model("tiny:hidden_size=64,num_layers=2,vocab_size=512", texts=texts, output_dir=tmp_path / "data")
    script = tmp_path / "two_ranks.py"
    script.write_text(TWO_RANKS)
    accelerate = str(Path(sys.executable).parent / "accelerate")
    proc = subprocess.run([accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--main_process_port", "0",
                           str(script), str(tmp_path), str(ROOT / "configs/sft/tiny.yaml")], cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    main, other = (json.loads((tmp_path / f"node-{r}" / "fingerprints.json").read_text()) for r in (0, 1))
    assert len(main["seen"]) == 4 and other["seen"] == []  # the main process judged every check, alone
    assert main["final"] == main["seen"][1] != main["seen"][3]  # step 4's weights, the best check's, not the last's
    assert other["final"] == main["final"]  # the other process ends on the same weights
    assert not (tmp_path / "node-1" / "sft" / "dev-best.pt").exists()  # which it never had on its disk
    assert [r["step"] for r in read_jsonl(tmp_path / "node-0" / "sft" / "dev.jsonl")] == [2, 4, 6, 8]


def test_the_judgment_length_judges_get_is_the_corpus_longest_plus_a_quarter(sft_judge):
    """`max_judgment_tokens` left unset: the longest judgment of the rows trained on (in this tokenizer), + 25 % + 8,
    recorded in patarm_config.json for `patarm judge/eval/serve`."""
    from transformers import AutoTokenizer

    rows = read_jsonl(sft_judge.parent / "prep" / "pointwise" / "sft.jsonl")[:800]  # the fixture's --max_rows
    tokenizer = AutoTokenizer.from_pretrained(sft_judge)
    longest = max(len(tokenizer(r["messages"][-1]["content"], add_special_tokens=False)["input_ids"]) for r in rows)
    recorded = json.loads((sft_judge / "patarm_config.json").read_text())["data"]["max_judgment_tokens"]
    assert recorded == int(longest * 1.25) + 8
