"""Supervised fine-tuning of a judge on pointwise and/or pairwise judgment corpora (PaTaRM §3.3,
stage 1) with TRL's SFTTrainer and assistant-only loss.

    accelerate launch -m patarm sft --config configs/sft/tiny.yaml

A corpus row is `{"messages": [..judge prompt.., {"role": "assistant", "content": judgment}]}` — what
`patarm prep`'s pointwise and pairwise steps write to `{run_dir}/prep/<step>/sft.jsonl`; extra columns
are ignored.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset
from trl import ModelConfig, SFTConfig, SFTTrainer, get_peft_config

from patarm.config import RunArguments
from patarm.io import DataError, iter_jsonl
from patarm.train.common import (
    AtomicCheckpointMixin, JsonlMetricsCallback, load_model, setup_logging, train_and_save,
)

logger = logging.getLogger(__name__)


@dataclass
class SFTDataArguments(RunArguments):
    """The judgment corpora to train on."""

    train_files: list[str] = field(
        default_factory=lambda: ["{run_dir}/prep/pointwise/sft.jsonl", "{run_dir}/prep/pairwise/sft.jsonl"],
        metadata={"path": "input", "help": "judgment corpora (jsonl rows with `messages`): by default the pointwise "
                  "and pairwise SFT sets `patarm prep` writes into the run folder"})
    max_rows: int | None = field(default=None, metadata={"help": "use at most this many rows (after mixing)"})
    judge_template: str | None = field(default=None, metadata={"help": "the pointwise template the corpus was "
                                       "rendered with, recorded for `patarm judge`/`eval` (default: read from the rows)"})
    rubric_mode: str | None = field(default=None, metadata={"help": "the corpus's rubric mode, recorded likewise"})
    max_judgment_tokens: int | None = field(default=None, metadata={"help": "the judgment length judges of this run "
                                            "get by default (default: the corpus's longest judgment + 25 %)"})


class PaTaRMSFTTrainer(AtomicCheckpointMixin, SFTTrainer):
    """SFTTrainer whose checkpoints are marked complete only once fully written."""


def _check_row(row: dict, path: str, index: int) -> dict:
    messages = row.get("messages") if isinstance(row, dict) else None
    if not isinstance(messages, list) or not messages:
        raise DataError(path, index, "messages", "missing_field", "an SFT row needs a non-empty 'messages' list")
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or m.get("role") not in ("system", "user", "assistant"):
            raise DataError(path, index, "messages", "wrong_type", "each message needs a role and text content")
    if messages[-1]["role"] != "assistant" or not messages[-1]["content"].strip():
        raise DataError(path, index, "messages", "bad_prompt", "the last message must be the judge's (assistant) judgment")
    return {"messages": messages, "template": row.get("template") if row.get("kind", "pointwise") == "pointwise"
            else None, "rubric_mode": row.get("rubric_mode")}


def load_sft_rows(paths: list[str], max_rows: int | None = None) -> list[dict]:
    """Rows of every corpus, validated (errors name file, row and field)."""
    if not paths:
        raise ValueError("train_files is empty: give at least one judgment corpus (jsonl with `messages` rows)")
    rows = []
    for path in paths:
        if not Path(path).is_file():
            raise FileNotFoundError(f"SFT corpus {path} does not exist; write it with `patarm prep run` (the pointwise "
                                    "and pairwise steps) or point train_files at judgment corpora")
        for index, row in iter_jsonl(path):
            if isinstance(row, DataError):
                raise row
            rows.append(_check_row(row, path, index))
    if not rows:
        raise ValueError(f"the SFT corpora {paths} hold no rows: the prep steps kept nothing (see their manifest.json)")
    return rows[:max_rows] if max_rows else rows


def _most_common(values: list) -> Any:
    values = [v for v in values if v]
    return Counter(values).most_common(1)[0][0] if values else None


def train(data: SFTDataArguments, args: SFTConfig, model_args: ModelConfig) -> PaTaRMSFTTrainer:
    """Load corpora and the judge, train with assistant-only loss, save."""
    setup_logging(args)
    rows = load_sft_rows(data.train_files, data.max_rows)
    templates, modes = [r.pop("template") for r in rows], [r.pop("rubric_mode") for r in rows]
    data.judge_template = data.judge_template or _most_common(templates)
    data.rubric_mode = data.rubric_mode or _most_common(modes)
    texts = [m["content"] for r in rows for m in r["messages"]]
    model, tokenizer = load_model(model_args, texts, args.seed, args.output_dir)
    if data.max_judgment_tokens is None:  # so `patarm judge/eval/serve` size their generation to this judge
        longest = max(len(tokenizer(r["messages"][-1]["content"], add_special_tokens=False)["input_ids"]) for r in rows)
        data.max_judgment_tokens = int(longest * 1.25) + 8
    trainer = PaTaRMSFTTrainer(
        model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
        peft_config=get_peft_config(model_args), callbacks=[JsonlMetricsCallback()],
    )
    train_and_save(trainer, "sft", data, args, model_args)
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(args.output_dir)
    return trainer
