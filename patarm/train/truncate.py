"""Project-side truncation of judge prompts (TRL's GRPO has no `max_prompt_length`).

A judge prompt must keep its instructions, rubric and output format, so we shorten the untrusted
blocks instead: first the conversation (keeping its end, the turn being answered), then the response
(keeping its head and tail). A marker shows the judge where text was cut.
"""

from __future__ import annotations

import re
from typing import Any

MARKER = " [… truncated …] "
_BLOCK = {
    "conversation": re.compile(r"(<conversation>\n?)(.*?)(\n?</conversation>)", re.DOTALL),
    "response": re.compile(r"(<response>\n?)(.*?)(\n?</response>)", re.DOTALL),
}
MIN_KEEP = 32  # tokens of each block that are never cut


def _prompt_length(messages: list[dict[str, str]], tokenizer: Any) -> int:
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
    return len(ids)


def _cut(text: str, tokenizer: Any, drop: int, keep_tail_only: bool) -> str:
    if keep_tail_only and text.startswith(MARKER.strip() + " "):  # cut before: drop the old marker
        text = text[len(MARKER.strip()) + 1:]
    ids = tokenizer.encode(text, add_special_tokens=False)
    keep = max(MIN_KEEP, len(ids) - drop)
    if keep >= len(ids):
        return text
    if keep_tail_only:
        return MARKER.strip() + " " + tokenizer.decode(ids[-keep:])
    head = keep // 2
    return tokenizer.decode(ids[:head]) + MARKER + tokenizer.decode(ids[len(ids) - (keep - head):])


def truncate_messages(messages: list[dict[str, str]], tokenizer: Any, max_length: int) -> tuple[list[dict[str, str]], bool]:
    """Shorten the conversation, then the response, of a rendered judge prompt to `max_length` tokens."""
    length = _prompt_length(messages, tokenizer)
    if length <= max_length:
        return messages, False
    user = dict(messages[-1])
    for block, tail_only in (("conversation", True), ("response", False)):
        for attempt in range(4):  # re-tokenising the cut text can shift counts by a few tokens: retry
            over = length - max_length
            match = _BLOCK[block].search(user["content"])
            if over <= 0 or not match:
                break
            body = _cut(match.group(2), tokenizer, over + 8 * (attempt + 1), tail_only)
            if body == match.group(2):
                break  # this block is already at its minimum
            user["content"] = user["content"][:match.start(2)] + body + user["content"][match.end(2):]
            length = _prompt_length([*messages[:-1], user], tokenizer)
    return [*messages[:-1], user], True


def truncate_judge_rows(rows: list[dict], tokenizer: Any, max_length: int, template: Any = None) -> tuple[list[dict], int]:
    """Truncate each row's `prompt` messages; returns the rows and how many were truncated."""
    count = 0
    out = []
    for row in rows:
        messages, cut = truncate_messages(row["prompt"], tokenizer, max_length)
        count += cut
        out.append({**row, "prompt": messages})
    return out, count
