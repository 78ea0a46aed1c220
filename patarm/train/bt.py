"""The Bradley–Terry scalar reward-model baseline (TRL RewardTrainer) on the same pairs — the
paper's controlled comparison (Table 1, "Scalar RM (BT)").

    patarm bt --config configs/bt/tiny.yaml
"""

from __future__ import annotations

from dataclasses import dataclass, field

from datasets import Dataset
from trl import ModelConfig, RewardConfig, RewardTrainer, get_peft_config

from patarm.config import RunArguments
from patarm.data import load_pairs
from patarm.models import load_tokenizer, resolve_model
from patarm.train.common import AtomicCheckpointMixin, JsonlMetricsCallback, setup_logging, train_and_save


@dataclass
class BTDataArguments(RunArguments):
    """The preference pairs the scalar reward model learns from."""

    train_file: str = field(default="{run_dir}/prep/pointwise/pairs.jsonl", metadata={"path": "input", "help":
                            "preference pairs (any supported layout; jsonl/json/parquet or a hub id): by default the "
                            "pairs of the run's pointwise SFT corpus, the judge's own training pairs"})
    on_error: str = field(default="raise", metadata={"help": "Malformed rows: 'raise' or 'skip' (counted)."})
    max_pairs: int | None = field(default=None, metadata={"help": "Use at most this many pairs."})
    facts: list[str] = field(default_factory=list, metadata={
        "help": "facts stated after each response, as a judge template states them (patarm.judge.facts: "
                "text-counts): the BT model reads the same counts as a `pointwise-counts` judge; recorded with the "
                "model, so its scorers state them too"})

    def __post_init__(self) -> None:
        from patarm.judge.facts import check_fact_sets

        check_fact_sets(tuple(self.facts), "--facts")


class PaTaRMRewardTrainer(AtomicCheckpointMixin, RewardTrainer):
    """RewardTrainer whose checkpoints are marked complete only once fully written."""


def preference_rows(pairs, facts: tuple[str, ...] | list[str] = ()) -> list[dict]:
    """Pairs in TRL's conversational preference format (prompt / chosen / rejected messages); with `facts`, each
    response with them appended (`patarm.judge.facts.with_facts`)."""
    from patarm.judge.facts import with_facts

    return [{"prompt": p.prompt, "chosen": [{"role": "assistant", "content": with_facts(p.chosen, facts)}],
             "rejected": [{"role": "assistant", "content": with_facts(p.rejected, facts)}]} for p in pairs]


def _load_scalar_model(spec: str, texts: list[str], seed: int, output_dir: str):
    """A causal LM's body with a 1-logit score head (a `tiny` spec is built from `texts` first)."""
    from transformers import AutoModelForSequenceClassification

    name = resolve_model(spec, texts=texts, output_dir=output_dir, seed=seed)
    tokenizer = load_tokenizer(name, padding_side="right")
    model = AutoModelForSequenceClassification.from_pretrained(name, num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def train(data: BTDataArguments, args: RewardConfig, model_args: ModelConfig) -> PaTaRMRewardTrainer:
    setup_logging(args)
    pairs = load_pairs(data.train_file, on_error=data.on_error, limit=data.max_pairs).pairs
    rows = preference_rows(pairs, data.facts)
    texts = [p.question for p in pairs] + [p.chosen for p in pairs] + [p.rejected for p in pairs]
    model, tokenizer = _load_scalar_model(model_args.model_name_or_path, texts, args.seed, args.output_dir)
    trainer = PaTaRMRewardTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                                  processing_class=tokenizer, peft_config=get_peft_config(model_args),
                                  callbacks=[JsonlMetricsCallback()])
    train_and_save(trainer, "bt", data, args, model_args)
    return trainer

