"""`patarm.train.sft_tokenize`: the SFT corpus tokenised in batches gives TRL's own preparation's tokens and labels,
row for row, in each loss format (assistant-only on Qwen3's template, completion-only on a ChatML one without
generation markers, every token), in one process and in two; a row the template marks no assistant token in is
named."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from test_model_families import CHATML

CORPUS_ROWS = 300  # three batches of 100 (BATCH_ROWS patched below): batch edges and the two-process split


@pytest.fixture(scope="module")
def corpus_rows() -> list[dict]:
    from patarm.demo.synthetic import make_pairs
    from patarm.demo.teacher import RuleTeacher
    from patarm.prep.corpus import pointwise_corpus

    rows, _ = pointwise_corpus(make_pairs(CORPUS_ROWS, seed=7, kinds=("lowercase", "uppercase")), RuleTeacher(),
                               "pointwise-compact", min_margin=2.0)
    assert len(rows) >= CORPUS_ROWS
    return [{"messages": r["messages"]} for r in rows[:CORPUS_ROWS]]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, corpus_rows) -> Path:
    from patarm.models.tiny import build_tiny_judge

    out = tmp_path_factory.mktemp("tiny")
    build_tiny_judge([m["content"] for r in corpus_rows[:200] for m in r["messages"]], out, vocab_size=400,
                     hidden_size=32, num_layers=1)
    return out


def _config(**overrides):
    from trl import SFTConfig

    return SFTConfig(output_dir=os.path.join(tempfile.gettempdir(), "patarm-unused"), use_cpu=True, bf16=False,
                     report_to=[], max_length=None, **overrides)


def _trl_prepared(folder: Path, tok, rows: list[dict], loss_format: str, args) -> list[tuple[list, list]]:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    from patarm.train.sft import to_training_rows

    trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(str(folder)), processing_class=tok, args=args,
                         train_dataset=Dataset.from_list(to_training_rows(rows, loss_format, False)))
    data = trainer.train_dataset
    return list(zip(data["input_ids"], data["labels"]))


@pytest.mark.parametrize("loss_format", ["messages", "prompt-completion", "full"])
def test_batched_tokens_and_labels_are_trls(tiny_folder, corpus_rows, loss_format, monkeypatch):
    from patarm.models import load_tokenizer
    from patarm.train import sft_tokenize
    from patarm.train.sft import choose_loss_format
    from patarm.train.sft_tokenize import pretokenize

    monkeypatch.setattr(sft_tokenize, "BATCH_ROWS", 100)

    tok = load_tokenizer(str(tiny_folder))
    if loss_format != "messages":
        tok.chat_template = CHATML  # SmolLM2's: no generation markers
    rows = corpus_rows
    args = _config(completion_only_loss=False) if loss_format == "full" else _config()
    assert choose_loss_format("auto", tok, args) == loss_format
    theirs = _trl_prepared(tiny_folder, tok, rows, loss_format, args)
    for procs in (None, 2):
        args.dataset_num_proc = procs
        ours = pretokenize(rows, tok, args, loss_format, False, ["sft.jsonl"])
        assert list(zip(ours["input_ids"], ours["labels"])) == theirs
    trained = [t for t, lab in zip(*theirs[0]) if lab != -100]
    if loss_format == "full":
        assert trained == theirs[0][0]
    else:  # the judgment (and its stop token; Qwen3's turn also holds the empty thinking block) only
        assert rows[0]["messages"][-1]["content"] in tok.decode(trained) and len(trained) < len(theirs[0][0])


def test_sft_trains_on_the_batched_tokens_as_on_trls(tiny_folder, corpus_rows, tmp_path):
    """Two steps of `patarm sft` with and without `pretokenize`: the same weights, and the run's recorded
    arguments keep `assistant_only_loss` (it is off only while TRL reads the tokens)."""
    import hashlib

    from patarm.io import write_jsonl
    from patarm.train import parse_args, sft

    write_jsonl([{**r, "kind": "pointwise", "template": "pointwise-compact"} for r in corpus_rows[:64]],
                tmp_path / "sft.jsonl")
    digests = []
    for pretok in ("true", "false"):
        out = tmp_path / pretok
        trainer = sft.train(*parse_args("sft", [
            "--config", str(Path(__file__).resolve().parents[2] / "configs/sft/tiny.yaml"),
            "--run_dir", str(tmp_path), "--model_name_or_path", str(tiny_folder),
            "--train_files", str(tmp_path / "sft.jsonl"),
            "--output_dir", str(out), "--max_steps", "2", "--per_device_train_batch_size", "8",
            "--save_strategy", "no", "--report_to", "none", "--pretokenize", pretok]))
        assert trainer.args.assistant_only_loss is True
        digests.append(hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest())
    assert digests[0] == digests[1]


def test_a_row_with_no_assistant_token_is_named(tiny_folder, corpus_rows):
    from patarm.models import load_tokenizer
    from patarm.train.sft import choose_loss_format
    from patarm.train.sft_tokenize import pretokenize

    tok = load_tokenizer(str(tiny_folder))
    args = _config()
    assert choose_loss_format("messages", tok, args) == "messages"
    bad = json.loads(json.dumps(corpus_rows[:3]))
    bad[2]["messages"] = bad[2]["messages"][:-1]  # no assistant turn left
    with pytest.raises(ValueError, match=r"SFT row 3 of the rows read from a\.jsonl, b\.jsonl: the chat template"):
        pretokenize(bad, tok, args, "messages", False, ["a.jsonl", "b.jsonl"])
