"""The SFT corpus tokenised as TRL's `SFTTrainer` tokenises it, a batch of rows at a time.

TRL prepares a dataset with one `Dataset.map` call per row and step (chat template, then labels, each row on its own);
the chat template's `{% generation %}` spans, the prompt/completion split at their common prefix and the labels are
the same here, computed with one chat-template call (`apply_chat_template` over a list of conversations: one
fast-tokenizer call) per batch of `BATCH_ROWS` rows, in `dataset_num_proc` processes (`datasets`' batched map).
TRL receives `input_ids` and `labels` and keeps only its own truncation to `max_length` and its check for rows
left without a loss token. The same tokens and labels as TRL's path (tests/train/test_sft_tokenize.py compares
them); `bench/sft_dataset_prep.py` times both.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from datasets import Dataset
from trl import SFTConfig

logger = logging.getLogger(__name__)

BATCH_ROWS = 1000


def trl_chat_template(tokenizer: Any, args: SFTConfig) -> str | None:
    """The chat template TRL tokenises with: its training variant (with `{% generation %}` markers) where
    `assistant_only_loss` needs one the tokenizer's lacks, else the tokenizer's own (None)."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    if args.assistant_only_loss and not has_generation_markers(tokenizer.chat_template):
        return get_training_chat_template(tokenizer)
    return None


def pretokenize(rows: list[dict], tokenizer: Any, args: SFTConfig, loss_format: str, enable_thinking: bool,
                files: list[str]) -> Dataset:
    """`rows` (`{"messages": [...]}`, validated) as a dataset of `input_ids` and `labels` (-100 where no loss):
    `messages` rows with TRL's assistant mask (`assistant_only_loss`), prompt/completion rows with its completion
    mask (`completion_only_loss`), or every token (`full`)."""
    from trl.data_utils import common_prefix_length

    template = trl_chat_template(tokenizer, args)
    kwargs = {"chat_template": template, "enable_thinking": enable_thinking}
    split = loss_format == "prompt-completion"
    warned: list[bool] = []

    def tokenize(batch: dict, indices: list[int]) -> dict:
        conversations = batch["messages"]
        full = tokenizer.apply_chat_template(conversations, tokenize=True, return_dict=True,
                                             return_assistant_tokens_mask=args.assistant_only_loss, **kwargs)
        masks: list[list[list[int]]] = [[] for _ in conversations]
        if args.assistant_only_loss:
            for index, (row_masks, mask) in enumerate(zip(masks, full["assistant_masks"])):
                if 1 not in mask:
                    raise ValueError(f"SFT row {indices[index] + 1} of the rows read from {', '.join(files)}: the "
                                     "chat template marks none of its tokens as the assistant's (TRL's "
                                     "assistant_only_loss would train on nothing): check its last message, or use "
                                     "loss_format prompt-completion")
                row_masks.append(mask)
        if split:
            prompts = tokenizer.apply_chat_template([c[:-1] for c in conversations], tokenize=True, return_dict=True,
                                                    add_generation_prompt=True, **kwargs)["input_ids"]
            for row_masks, prompt, ids in zip(masks, prompts, full["input_ids"]):
                start = common_prefix_length(prompt, ids)
                if start < len(prompt) and not warned:
                    warned.append(True)  # once a process, as TRL warns once
                    logger.warning("a tokenized prompt is not a prefix of its prompt + completion (the chat template "
                                   "renders the prompt alone otherwise, or tokens merge across the boundary): the "
                                   "completion starts where they diverge, as in TRL; likely so in every row")
                if args.completion_only_loss:
                    row_masks.append([0] * start + [1] * (len(ids) - start))
        labels = [[token if all(bits) else -100 for token, *bits in zip(ids, *row_masks)]
                  for ids, row_masks in zip(full["input_ids"], masks)]
        return {"input_ids": full["input_ids"], "labels": labels}

    dataset = Dataset.from_list([{"messages": r["messages"]} for r in rows])
    procs = args.dataset_num_proc if args.dataset_num_proc and len(rows) > BATCH_ROWS else None
    return dataset.map(tokenize, batched=True, batch_size=BATCH_ROWS, with_indices=True, num_proc=procs,
                       remove_columns=["messages"], desc="Tokenizing the SFT corpus (batched)")


@contextmanager
def trl_reads_tokens(args: SFTConfig, tokenizer: Any) -> Iterator[None]:
    """Around building the trainer on a `pretokenize`d dataset: TRL refuses `assistant_only_loss` on rows that are not
    conversations (tokenised ones are not), and the assistant masks are in the labels already, so it is off while
    TRL reads the dataset and back afterwards (the run's recorded arguments say what it trained with). TRL's check
    that the template's end-of-turn token is in the mask (a warning) is made here instead."""
    if not args.assistant_only_loss:
        yield
        return
    from trl.chat_template_utils import is_chat_template_stop_token_trained

    if not is_chat_template_stop_token_trained(tokenizer, chat_template=trl_chat_template(tokenizer, args)):
        logger.warning("the chat template does not include the assistant turn's end-of-turn token in the loss mask; "
                       "the judge may not learn to stop (TRL's check)")
    args.assistant_only_loss = False
    try:
        yield
    finally:
        args.assistant_only_loss = True
