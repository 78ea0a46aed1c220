"""Supervised fine-tuning of a judge on pointwise and/or pairwise judgment corpora (PaTaRM §3.3,
stage 1) with TRL's SFTTrainer and assistant-only loss.

    accelerate launch -m patarm sft --config configs/sft/tiny.yaml

A corpus row is `{"messages": [..judge prompt.., {"role": "assistant", "content": judgment}]}` (what
`patarm prep` writes); extra columns are ignored.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from datasets import Dataset
from trl import ModelConfig, SFTConfig, SFTTrainer, get_peft_config

from patarm.data.schema import DataError
from patarm.train.common import (
    AtomicCheckpointMixin, JsonlMetricsCallback, TinyModelArguments, load_model_and_tokenizer, setup_logging,
    train_and_save,
)

logger = logging.getLogger(__name__)


@dataclass
class SFTDataArguments(TinyModelArguments):
    """The judgment corpora to train on."""

    train_files: list[str] = field(default_factory=list, metadata={
        "help": "Judgment corpora (jsonl rows with `messages`), e.g. the pointwise and pairwise SFT sets."})
    max_rows: int | None = field(default=None, metadata={"help": "Use at most this many rows (after mixing)."})


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
    return {"messages": messages}


def load_sft_rows(paths: list[str], max_rows: int | None = None) -> list[dict]:
    """Rows of every corpus, validated (errors name file, row and field)."""
    if not paths:
        raise ValueError("train_files is empty: give at least one judgment corpus (jsonl with `messages` rows)")
    rows = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise DataError(path, i, None, "bad_json", f"not valid JSON ({err.msg})") from err
                rows.append(_check_row(row, path, i))
    return rows[:max_rows] if max_rows else rows


def train(data: SFTDataArguments, args: SFTConfig, model_args: ModelConfig) -> PaTaRMSFTTrainer:
    """Load corpora and the judge, train with assistant-only loss, save."""
    setup_logging(args.report_to)
    rows = load_sft_rows(data.train_files, data.max_rows)
    texts = [m["content"] for r in rows for m in r["messages"]]
    model, tokenizer = load_model_and_tokenizer(model_args.model_name_or_path, texts, data, seed=args.seed,
                                                dtype=model_args.dtype, output_dir=args.output_dir)
    trainer = PaTaRMSFTTrainer(
        model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
        peft_config=get_peft_config(model_args), callbacks=[JsonlMetricsCallback()],
    )
    train_and_save(trainer, "sft", data, args, model_args)
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(args.output_dir)
    return trainer


def main(argv: list[str]) -> None:
    from patarm.config import parse_config

    data, args, model_args = parse_config((SFTDataArguments, SFTConfig, ModelConfig), argv, prog="patarm sft")
    train(data, args, model_args)
