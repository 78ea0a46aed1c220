"""A tiny judge that already writes valid judgments (a short SFT on the bundled task, once per session), so
GRPO tests start where rewards differ and gradients are not zero."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def sft_judge(tmp_path_factory) -> Path:
    """A folder with a tiny Qwen3 judge SFT-trained on rule-teacher judgments (pointwise-compact): 250 steps,
    ~25 s; greedy judgments are all well-formed and sampled ones mostly (measured: 1.0 and 0.78 format-valid)."""
    from patarm.demo.synthetic import make_pairs
    from patarm.demo.teacher import RuleTeacher
    from patarm.io import write_jsonl
    from patarm.prep.corpus import pointwise_corpus
    from patarm.train import parse_args as parse
    from patarm.train import sft

    run = tmp_path_factory.mktemp("sft-judge")
    rows, _ = pointwise_corpus(make_pairs(400, seed=5, kinds=("lowercase", "uppercase")), RuleTeacher(),
                               "pointwise-compact", min_margin=2.0)
    write_jsonl(rows, run / "prep" / "pointwise" / "sft.jsonl")
    args = parse("sft", ["--config", str(ROOT / "configs/sft/tiny.yaml"), "--run_dir", str(run),
                         "--train_files", str(run / "prep" / "pointwise" / "sft.jsonl"), "--max_rows", "800",
                         "--learning_rate", "3e-3", "--per_device_train_batch_size", "16", "--num_train_epochs", "5",
                         "--report_to", "none", "--logging_steps", "100"])
    sft.train(*args)
    (run / "sft" / "READY").write_text(json.dumps({"rows": len(rows)}))
    return run / "sft"
