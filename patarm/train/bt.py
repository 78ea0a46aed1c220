"""The Bradley–Terry scalar reward-model baseline (TRL RewardTrainer) on the same pairs — the
paper's controlled comparison (Table 1, "Scalar RM (BT)").

    patarm bt --config configs/bt/tiny.yaml
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from datasets import Dataset
from trl import ModelConfig, RewardConfig, RewardTrainer, get_peft_config

from patarm.data import load_pairs
from patarm.train.common import (
    AtomicCheckpointMixin, JsonlMetricsCallback, TinyModelArguments, build_tiny_base, setup_logging,
    train_and_save,
)


@dataclass
class BTDataArguments(TinyModelArguments):
    """The preference pairs the scalar reward model learns from."""

    train_file: str = field(default="patarm/assets/if_pairs_demo.jsonl",
                            metadata={"help": "Preference pairs (jsonl/json/parquet or a hub id), any supported layout."})
    on_error: str = field(default="raise", metadata={"help": "Malformed rows: 'raise' or 'skip' (counted)."})
    max_pairs: int | None = field(default=None, metadata={"help": "Use at most this many pairs."})


class PaTaRMRewardTrainer(AtomicCheckpointMixin, RewardTrainer):
    """RewardTrainer whose checkpoints are marked complete only once fully written."""


def preference_rows(pairs) -> list[dict]:
    """Pairs in TRL's conversational preference format (prompt / chosen / rejected messages)."""
    return [{"prompt": p.prompt, "chosen": [{"role": "assistant", "content": p.chosen}],
             "rejected": [{"role": "assistant", "content": p.rejected}]} for p in pairs]


def _load_scalar_model(name: str, texts: list[str], tiny: TinyModelArguments, seed: int, output_dir: str):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if name == "tiny":  # build the tiny causal judge, then load its body with a 1-logit score head
        name = build_tiny_base(texts, Path(output_dir) / "tiny-base", tiny, seed)
    tokenizer = AutoTokenizer.from_pretrained(name)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(name, num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def train(data: BTDataArguments, args: RewardConfig, model_args: ModelConfig) -> PaTaRMRewardTrainer:
    setup_logging(args.report_to)
    pairs = load_pairs(data.train_file, on_error=data.on_error, limit=data.max_pairs).pairs
    rows = preference_rows(pairs)
    texts = [p.question for p in pairs] + [p.chosen for p in pairs] + [p.rejected for p in pairs]
    model, tokenizer = _load_scalar_model(model_args.model_name_or_path, texts, data, args.seed, args.output_dir)
    trainer = PaTaRMRewardTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                                  processing_class=tokenizer, peft_config=get_peft_config(model_args),
                                  callbacks=[JsonlMetricsCallback()])
    train_and_save(trainer, "bt", data, args, model_args)
    return trainer


def main(argv: list[str]) -> None:
    from patarm.config import parse_config

    data, args, model_args = parse_config((BTDataArguments, RewardConfig, ModelConfig), argv, prog="patarm bt")
    train(data, args, model_args)
