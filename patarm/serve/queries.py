"""Split OpenRLHF's remote-RM queries into the conversation and the response the judge scores.

OpenRLHF posts `{"query": [...], "prompts": [...], "labels": [...]}` where a query is the policy's
prompt + response decoded with `skip_special_tokens=False` (chat-template markup, possibly padding and
the end-of-turn token included) and a prompt is the rendered prompt the rollout started from.

The split, per query:

1. padding/BOS tokens at the start and end-of-turn/EOS tokens at the end are removed;
2. with a prompt, the response is what follows the prompt in the query (the prompt must occur in it);
   without one, it is what follows the last assistant header of a known chat format (`CHAT_FORMATS`);
3. a leading `<think>…</think>` block is removed from the response (the judge scores the answer);
4. the prompt text is parsed back into chat messages when it is in a known chat format, else it is
   passed to the judge as plain text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class ChatFormat:
    """How one family of chat templates marks turns (data, not code paths per model)."""

    name: str
    turn: re.Pattern  # groups: role, content
    assistant_header: str


CHAT_FORMATS = (
    ChatFormat("chatml", re.compile(r"<\|im_start\|>(system|user|assistant|tool)\n(.*?)<\|im_end\|>", re.S),
               "<|im_start|>assistant\n"),
    ChatFormat("llama3", re.compile(r"<\|start_header_id\|>(system|user|assistant|ipython)<\|end_header_id\|>\n\n"
                                    r"(.*?)<\|eot_id\|>", re.S),
               "<|start_header_id|>assistant<|end_header_id|>\n\n"),
)
LEADING_TOKENS = ("<|endoftext|>", "<|end_of_text|>", "<|begin_of_text|>", "<|finetune_right_pad_id|>", "<pad>",
                  "<s>", "<unk>")
TRAILING_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>", "<pad>", "<|eom_id|>")
_THINK_RE = re.compile(r"\A\s*<think>.*?</think>\s*", re.S)


def _strip_tokens(text: str, leading: tuple[str, ...], trailing: tuple[str, ...]) -> str:
    changed = True
    while changed:
        changed = False
        for tok in leading:
            if text.startswith(tok):
                text, changed = text[len(tok):], True
        for tok in trailing:
            if text.rstrip().endswith(tok):  # templates put a newline after the end-of-turn token
                text, changed = text.rstrip()[:-len(tok)], True
    return text


def prompt_messages(prompt_text: str) -> str | Messages:
    """Chat messages of a rendered prompt in a known format; the text itself otherwise."""
    text = _strip_tokens(prompt_text, LEADING_TOKENS, ())
    for fmt in CHAT_FORMATS:
        turns = [{"role": m.group(1), "content": m.group(2).strip()} for m in fmt.turn.finditer(text)]
        if any(t["role"] == "user" for t in turns):
            return turns
    return text.strip()


def split_query(query: str, prompt: str | None = None, *, index: int = 0) -> tuple[str | Messages, str]:
    """(conversation, response) of one query; ValueError naming `index` when no split is found."""
    q = _strip_tokens(query, LEADING_TOKENS, TRAILING_TOKENS)
    if prompt:
        p = _strip_tokens(prompt, LEADING_TOKENS, ())
        at = q.find(p)
        if at < 0:
            raise ValueError(f"query {index}: its prompt (prompts[{index}]) does not occur in it; send the prompt "
                             "exactly as rendered for the policy")
        prompt_text, response = p, q[at + len(p):]
    else:
        cut = max(((q.rfind(f.assistant_header), f) for f in CHAT_FORMATS), key=lambda x: x[0])
        if cut[0] < 0:
            raise ValueError(f"query {index}: no `prompts` given and no assistant header of a known chat format "
                             f"({', '.join(f.name for f in CHAT_FORMATS)}); send `prompts` too")
        prompt_text, response = q[:cut[0]], q[cut[0] + len(cut[1].assistant_header):]
    response = _THINK_RE.sub("", _strip_tokens(response, (), TRAILING_TOKENS), count=1).strip()
    return prompt_messages(prompt_text), response
