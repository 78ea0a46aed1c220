"""Project-side truncation of judge prompts, so every prompt fits the judge's window with room for its
judgment (TRL's GRPO has no `max_prompt_length`; eval, judge and the server must not overflow either).

A judge prompt must keep its instructions, rubric and output format, so we shorten the untrusted
blocks instead: first the conversation (keeping its end, the turn being answered), then the response(s)
(keeping each one's head and tail; of two, the longer first). A marker shows the judge where text was cut.
"""

from __future__ import annotations

from typing import Any

MARKER = " [… truncated …] "
MIN_KEEP = 32  # tokens of each block that are never cut


def _prompt_length(messages: list[dict[str, str]], tokenizer: Any) -> int:
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
    return len(ids)


def _block(content: str, name: str) -> tuple[int, int] | None:
    """(start, end) of the text inside the first `<name>` … `</name>` of `content`, without a newline right
    after the opening tag or right before the closing one; None without such a block. What the regex
    `<name>\\n?(.*?)\\n?</name>` (DOTALL) finds, by `str.find`: a lazy scan over a multi-megabyte response
    holds the GIL for tens of milliseconds (a server's event loop waits that long)."""
    opening = content.find(f"<{name}>")
    if opening < 0:
        return None
    start = opening + len(name) + 2
    start += content.startswith("\n", start)
    end = content.find(f"</{name}>", start)
    if end < 0:
        return None
    return start, end - (end > start and content[end - 1] == "\n")


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


def truncate_messages(
    messages: list[dict[str, str]], tokenizer: Any, max_length: int
) -> tuple[list[dict[str, str]], bool]:
    """Shorten the conversation, then the response, of a rendered judge prompt to `max_length` tokens."""
    length = _prompt_length(messages, tokenizer)
    if length <= max_length:
        return messages, False
    user = dict(messages[-1])
    for blocks, tail_only in ((("conversation",), True), (("response", "response_a", "response_b"), False)):
        for attempt in range(8):  # re-tokenising the cut text can shift counts by a few tokens: retry
            over = length - max_length
            if over <= 0:
                break
            # The longest block gives first; one already at its minimum (cutting leaves it as it is) is passed
            # over. Each block is tokenised once per cut, not once more to test it first: a multi-megabyte
            # response is costly to tokenise, and its token list costly to decode or convert.
            content = user["content"]
            spans = sorted((s for b in blocks if (s := _block(content, b))), key=lambda s: s[0] - s[1])
            for start, end in spans:
                body = _cut(content[start:end], tokenizer, over + 8 * (attempt + 1), tail_only)
                if body != content[start:end]:
                    break
            else:
                break  # every block is already at its minimum
            user["content"] = content[:start] + body + content[end:]
            length = _prompt_length([*messages[:-1], user], tokenizer)
    return [*messages[:-1], user], True


def truncate_judge_rows(rows: list[dict], tokenizer: Any, max_length: int) -> tuple[list[dict], int]:
    """Truncate each row's `prompt` messages; returns the rows and how many were truncated."""
    count = 0
    out = []
    for row in rows:
        messages, cut = truncate_messages(row["prompt"], tokenizer, max_length)
        count += cut
        out.append({**row, "prompt": messages})
    return out, count


def context_window(model: Any, tokenizer: Any) -> int | None:
    """Positions the model can attend to (its config; the tokenizer's limit when that is smaller and sane)."""
    window = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < 10**8:  # tokenizers without a limit report ~1e30
        window = min(window, limit) if window else limit
    return window


class PromptFitter:
    """Makes every judge prompt fit `window - max_new_tokens` tokens of a local model, by the rules above,
    and counts what it did (`truncated`: prompts it cut; `too_long`: prompts still over after cutting,
    i.e. whose instructions alone do not fit). Backends without a tokenizer (HTTP) pass prompts through.
    `tokenizer` (default: the backend's) is the one it counts with: give a copy when another thread may
    be batching with the backend's own (a fast tokenizer's padding state is per object, not per call)."""

    def __init__(self, backend: Any, tokenizer: Any = None):
        self.tokenizer = tokenizer if tokenizer is not None else getattr(backend, "tokenizer", None)
        window = context_window(getattr(backend, "model", None), self.tokenizer) if self.tokenizer else None
        options = getattr(backend, "options", None)
        new = getattr(options, "max_new_tokens", None)
        self.window = window
        self.budget = window - new if window and new else None
        trained = getattr(options, "max_prompt_tokens", None)  # the prompt length the judge was trained on
        if self.tokenizer and trained:
            if trained < 2 * MIN_KEEP:
                raise ValueError(f"max_prompt_tokens {trained} is below the {2 * MIN_KEEP} tokens a judge prompt "
                                 "keeps at least; raise --max_prompt_tokens")
            self.budget = min(self.budget, trained) if self.budget else trained
        if self.budget is not None and self.budget < 2 * MIN_KEEP:
            raise ValueError(f"max_new_tokens {new} leaves {self.budget} of the model's {window} positions for the "
                             f"prompt; lower --max_new_tokens")
        self.truncated = self.too_long = 0

    def __call__(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        return self.fitted(messages)[0]

    def fitted(self, messages: list[dict[str, str]]) -> tuple[list[dict[str, str]], int | None]:
        """(the shortened messages, their token count if still over the budget, else None)."""
        if self.budget is None:
            return messages, None
        out, cut = truncate_messages(messages, self.tokenizer, self.budget)
        if not cut:
            return out, None
        self.truncated += 1
        length = _prompt_length(out, self.tokenizer)
        if length <= self.budget:
            return out, None
        self.too_long += 1
        return out, length

    def length(self, messages: list[dict[str, str]]) -> int | None:
        """Prompt tokens of chat `messages` (None without a tokenizer)."""
        return _prompt_length(messages, self.tokenizer) if self.tokenizer is not None else None
