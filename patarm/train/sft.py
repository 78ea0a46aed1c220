"""Supervised fine-tuning of a judge on pointwise and/or pairwise judgment corpora (PaTaRM §3.3,
stage 1) with TRL's SFTTrainer, the loss on the judgment only.

    accelerate launch -m patarm sft --config configs/sft/tiny.yaml

A corpus row is `{"messages": [..judge prompt.., {"role": "assistant", "content": judgment}]}` — what
`patarm prep`'s pointwise and pairwise steps write to `{run_dir}/prep/<step>/sft.jsonl`; extra columns
are ignored.

Any chat model family: where TRL can mark the assistant turn of the model's chat template (the template
has `{% generation %}` markers, or TRL ships a training variant of it: Qwen3, Llama 3, Gemma, Phi-3, ...)
rows stay `messages` with `assistant_only_loss`; otherwise (e.g. SmolLM2's ChatML) each row becomes
TRL's prompt/completion format — the judge prompt as `prompt`, the judgment as `completion` — and TRL's
`completion_only_loss` keeps the loss on the judgment (`loss_format`).
"""

from __future__ import annotations

import logging
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset
from trl import ModelConfig, SFTConfig, SFTTrainer, get_peft_config

from patarm.config import RunArguments
from patarm.io import DataError, iter_jsonl
from patarm.train.common import (
    AtomicCheckpointMixin,
    JsonlMetricsCallback,
    load_model,
    setup_logging,
    train_and_save,
)
from patarm.train.sft_tokenize import pretokenize, trl_reads_tokens
from patarm.train.speed import compact_lm_head

logger = logging.getLogger(__name__)

LOSS_FORMATS = ("auto", "messages", "prompt-completion", "full")


@dataclass
class SFTDataArguments(RunArguments):
    """The judgment corpora to train on."""

    train_files: list[str] = field(
        default_factory=lambda: ["{run_dir}/prep/pointwise/sft.jsonl", "{run_dir}/prep/pairwise/sft.jsonl"],
        metadata={"path": "input", "help": "judgment corpora (jsonl rows with `messages`): by default the pointwise "
                  "and pairwise SFT sets `patarm prep` writes into the run folder"})
    max_rows: int | None = field(default=None, metadata={"help": "use at most this many rows (after mixing)"})
    judge_template: str | None = field(
        default=None,
        metadata={
            "help": "the pointwise template the corpus was "
            "rendered with, recorded for `patarm judge`/`eval` (default: read from the rows)"
        },
    )
    rubric_mode: str | None = field(default=None, metadata={"help": "the corpus's rubric mode, recorded likewise"})
    max_judgment_tokens: int | None = field(default=None, metadata={"help": "the judgment length judges of this run "
                                            "get by default (default: the corpus's longest judgment + 25 %)"})
    loss_format: str = field(default="auto", metadata={
        "help": "how the loss stays on the judgment: 'messages' (TRL's assistant_only_loss; needs a chat template TRL "
                "can mark, e.g. Qwen3), 'prompt-completion' (TRL's completion_only_loss; any chat template), 'auto' "
                "(messages where the template allows it, else prompt-completion), or 'full' (loss on every token)",
        "choices": list(LOSS_FORMATS)})
    enable_thinking: bool = field(default=False, metadata={
        "help": "Qwen3's thinking switch, passed to the chat template and recorded for judging: false renders the "
                "empty <think></think> block of non-thinking mode, so the judge writes its judgment directly; true "
                "leaves the block to the judge (an optional leading <think> is part of the judgment format). Chat "
                "templates without the switch ignore it"})
    dev_pairs: str | None = field(default=None, metadata={"path": "input", "help": (
        "preference pairs (any layout `patarm prep` reads) the judge judges while it trains: greedy pointwise "
        "judgments of both sides, pair accuracy every dev_eval_steps steps and at the end, logged to "
        "<output_dir>/dev.jsonl (patarm.train.dev); none: no checks")})
    dev_eval_steps: int = field(default=250, metadata={"help": "steps between two checks on the dev pairs"})
    dev_target: float | None = field(default=None, metadata={"help": (
        "stop training at the first check whose dev pair accuracy is at least this (none: train every step)")})
    dev_keep_best: bool = field(default=True, metadata={"help": (
        "end with the weights of the best dev check (the latest of equals) rather than the last step's")})
    pretokenize: bool = field(default=True, metadata={"help": (
        "tokenise the corpus here, a batch of rows per chat-template call (patarm.train.sft_tokenize: the same "
        "tokens and labels as TRL's row-at-a-time preparation, sooner); false: TRL's own preparation")})


class PaTaRMSFTTrainer(AtomicCheckpointMixin, SFTTrainer):
    """SFTTrainer whose checkpoints are marked complete only once fully written, and whose LM head scores only
    the judgment's positions on every device (`patarm.train.speed.compact_lm_head`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        compact_lm_head()


def _check_row(row: dict, path: str, index: int) -> dict:
    messages = row.get("messages") if isinstance(row, dict) else None
    if not isinstance(messages, list) or not messages:
        raise DataError(path, index, "messages", "missing_field", "an SFT row needs a non-empty 'messages' list")
    for m in messages:
        if (
            not isinstance(m, dict)
            or not isinstance(m.get("content"), str)
            or m.get("role") not in ("system", "user", "assistant")
        ):
            raise DataError(path, index, "messages", "wrong_type", "each message needs a role and text content")
    if messages[-1]["role"] != "assistant" or not messages[-1]["content"].strip():
        raise DataError(
            path, index, "messages", "bad_prompt", "the last message must be the judge's (assistant) judgment"
        )
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


def template_marks_assistant(tokenizer: Any) -> bool:
    """Whether TRL can mask the assistant turns of the tokenizer's chat template: it has `{% generation %}`
    markers, or TRL ships a training variant of it that it swaps in (Qwen3, Llama 3, Gemma, Phi-3, ...)."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    template = tokenizer.chat_template
    if not template:
        return False
    if has_generation_markers(template):
        return True
    try:
        get_training_chat_template(tokenizer)
    except ValueError:  # "The chat template is not training-compatible ... patching is not supported"
        return False
    return True


def choose_loss_format(requested: str, tokenizer: Any, args: SFTConfig) -> str:
    """The row format that keeps the loss on the judgment with this tokenizer (see `loss_format`), with
    `args.assistant_only_loss` / `args.completion_only_loss` set to match. An explicit
    `completion_only_loss: false` without `assistant_only_loss` asks for the loss on every token."""
    if requested not in LOSS_FORMATS:
        raise ValueError(f"loss_format {requested!r}: choose one of {', '.join(LOSS_FORMATS)}")
    if requested == "auto":
        if args.completion_only_loss is False and not args.assistant_only_loss:
            requested = "full"
        else:
            requested = "messages" if template_marks_assistant(tokenizer) else "prompt-completion"
    elif requested == "messages" and not template_marks_assistant(tokenizer):
        raise ValueError(
            "loss_format 'messages' needs a chat template with {% generation %} markers or one TRL ships a "
            "training variant of; this tokenizer's has neither. Use loss_format prompt-completion (or auto)"
        )
    args.assistant_only_loss = requested == "messages"
    args.completion_only_loss = requested == "prompt-completion"
    why = {"messages": "messages rows, TRL's assistant_only_loss (the chat template marks the assistant turn)",
           "prompt-completion": "prompt/completion rows, TRL's completion_only_loss (the chat template has no "
                                "{% generation %} markers TRL can use)",
           "full": "messages rows, loss on every token (completion_only_loss and assistant_only_loss are off)"}
    logger.info("SFT loss format: %s", why[requested])
    return requested


def to_training_rows(rows: list[dict], loss_format: str, enable_thinking: bool) -> list[dict]:
    """Rows as TRL reads them: `messages`, or `prompt` (the judge prompt) + `completion` (the judgment);
    `chat_template_kwargs` carries the thinking switch to every chat-template call TRL makes."""
    kwargs = {"enable_thinking": enable_thinking}
    if loss_format == "prompt-completion":
        return [{"prompt": r["messages"][:-1], "completion": r["messages"][-1:], "chat_template_kwargs": kwargs}
                for r in rows]
    return [{"messages": r["messages"], "chat_template_kwargs": kwargs} for r in rows]


def check_lengths(input_ids: list, max_length: int, files: list[str]) -> None:
    """Padding-free batches are not cut to `max_length` by TRL: refuse rows that would have been cut."""
    long = [i for i, ids in enumerate(input_ids) if len(ids) > max_length]
    if long:
        raise ValueError(
            f"{len(long)} SFT row(s) of {', '.join(files)} are longer than max_length={max_length} tokens "
            f"(e.g. row {long[0] + 1} of the rows read: {len(input_ids[long[0]])} tokens) and padding_free batches "
            "are not truncated: raise max_length, cut the prompts in prep (the prompt budget), or set "
            "padding_free: false"
        )


def dev_callback(data: SFTDataArguments, tokenizer: Any) -> Any:
    """The dev-pairs check of `data.dev_pairs` (patarm.train.dev), judged with the corpus's template."""
    from patarm.data import load_pairs
    from patarm.train.dev import DevPairsCallback

    if not data.judge_template:
        raise ValueError("dev_pairs needs the judge template the corpus was rendered with: the rows name none, set "
                         "judge_template")
    if not Path(data.dev_pairs).is_file():
        raise FileNotFoundError(f"dev_pairs {data.dev_pairs} does not exist; point it at a pairs file (e.g. a "
                                "held-back split that `patarm prep` wrote) or leave it unset")
    pairs = load_pairs(data.dev_pairs).pairs
    return DevPairsCallback(pairs, tokenizer, data.judge_template, data.max_judgment_tokens, data.dev_eval_steps,
                            data.dev_target, data.dev_keep_best, data.enable_thinking)


def train(data: SFTDataArguments, args: SFTConfig, model_args: ModelConfig) -> PaTaRMSFTTrainer:
    """Load corpora and the judge, train with the loss on the judgment only, save."""
    setup_logging(args)
    rows = load_sft_rows(data.train_files, data.max_rows)
    templates, modes = [r.pop("template") for r in rows], [r.pop("rubric_mode") for r in rows]
    data.judge_template = data.judge_template or _most_common(templates)
    data.rubric_mode = data.rubric_mode or _most_common(modes)
    texts = [m["content"] for r in rows for m in r["messages"]]
    model, tokenizer = load_model(model_args, texts, args.seed, args.output_dir)
    data.loss_format = choose_loss_format(data.loss_format, tokenizer, args)
    if data.max_judgment_tokens is None:  # so `patarm judge/eval/serve` size their generation to this judge
        judgments = sorted({r["messages"][-1]["content"] for r in rows})  # one batched call over the distinct ones
        longest = max(len(ids) for ids in tokenizer(judgments, add_special_tokens=False)["input_ids"])
        data.max_judgment_tokens = int(longest * 1.25) + 8
    # TRL does not cut padding-free rows to max_length: cut nothing, refuse rows that are longer (below)
    max_length = args.max_length
    if args.padding_free and not args.packing:
        args.max_length = None
    reading = nullcontext()
    if data.pretokenize and not args.packing:  # (packing: TRL's own preparation)
        dataset = pretokenize(rows, tokenizer, args, data.loss_format, data.enable_thinking, data.train_files)
        reading = trl_reads_tokens(args, tokenizer)
    else:
        dataset = Dataset.from_list(to_training_rows(rows, data.loss_format, data.enable_thinking))
    with reading:
        trainer = PaTaRMSFTTrainer(
            model=model, args=args, processing_class=tokenizer, peft_config=get_peft_config(model_args),
            train_dataset=dataset, callbacks=[JsonlMetricsCallback()],
        )
    if data.dev_pairs:
        trainer.add_callback(dev_callback(data, tokenizer))
    if max_length and args.max_length is None:
        args.max_length = max_length
        check_lengths(trainer.train_dataset["input_ids"], max_length, data.train_files)
    train_and_save(trainer, "sft", data, args, model_args)
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(args.output_dir)
    return trainer
