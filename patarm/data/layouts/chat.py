"""Chat messages in the shapes preference sets use, read into canonical `{"role", "content"}` form.

Messages may use role/content or sharegpt's from/value keys, content may be a string or a list of text
parts, and role names vary ("human", "gpt", ...). Anthropic-style transcripts ("\\n\\nHuman: …
\\n\\nAssistant: …") are split into messages too. Every problem raises `RowProblem` naming the field.
"""

from __future__ import annotations

import re
from typing import Any

from patarm.data.layouts.base import Parts, RowProblem
from patarm.data.schema import Message

# sharegpt speakers and chat roles, mapped onto the canonical roles.
ROLE_MAP = {
    "user": "user", "human": "user",
    "assistant": "assistant", "gpt": "assistant", "model": "assistant", "function_call": "assistant",
    "system": "system",
    "tool": "tool", "observation": "tool",
}


def content_text(content: Any, where: str) -> str:
    """A message's content as text: a string, or a list of text parts ({"type": "text", "text"|"value"})."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if isinstance(part, str):
                parts.append(part)
                continue
            value = part.get("text", part.get("value")) if isinstance(part, dict) else None
            if not isinstance(value, str) or part.get("type", "text") != "text":
                raise RowProblem(f"{where}[{i}]", "wrong_type", "only text content parts are supported")
            parts.append(value)
        # Chat templates concatenate text parts without a separator, so do the same.
        return "".join(parts)
    if content is None:
        raise RowProblem(where, "wrong_type", "the message has no content")
    raise RowProblem(where, "wrong_type", f"expected text, got {type(content).__name__}")


def message(msg: Any, where: str) -> Message:
    """One chat message, with role/content or sharegpt from/value keys, in canonical form."""
    if not isinstance(msg, dict):
        raise RowProblem(where, "wrong_type", f"expected a message object, got {type(msg).__name__}")
    role = msg.get("role", msg.get("from"))
    if role is None:
        raise RowProblem(f"{where}.role", "missing_field", "the message has no 'role' (or 'from')")
    canonical = ROLE_MAP.get(role) if isinstance(role, str) else None
    if canonical is None:
        canonical = ROLE_MAP.get(role.strip().lower()) if isinstance(role, str) else None
        if canonical is None:
            raise RowProblem(f"{where}.role", "wrong_type", f"unknown role {role!r}")
    key = "content" if "content" in msg else "value"
    if key not in msg:
        raise RowProblem(f"{where}.content", "wrong_type", "the message has no 'content' (or 'value')")
    return {"role": canonical, "content": content_text(msg[key], f"{where}.{key}")}


def messages(value: Any, field: str) -> list[Message]:
    """A list of chat messages in canonical form."""
    if value is None:
        raise RowProblem(field, "missing_field", f"the row has no '{field}'")
    if not isinstance(value, list):
        raise RowProblem(field, "wrong_type", f"expected a list of messages, got {type(value).__name__}")
    return [message(m, f"{field}[{i}]") for i, m in enumerate(value)]


def reply(value: Any, field: str, prompt: list[Message] | None = None) -> str:
    """A response as text: a string, one assistant message, or a one-message list.

    A list that repeats `prompt` before the reply (full conversation plus explicit prompt) is accepted.
    """
    if isinstance(value, str):
        return value
    if value is None:
        raise RowProblem(field, "missing_field", f"the row has no '{field}'")
    if isinstance(value, dict):
        msgs = [message(value, field)]
    elif isinstance(value, list):
        msgs = messages(value, field)
        if prompt and len(msgs) > len(prompt) and msgs[: len(prompt)] == prompt:
            msgs = msgs[len(prompt):]
    else:
        raise RowProblem(field, "wrong_type", f"expected a string or an assistant message, got {type(value).__name__}")
    if not msgs:
        raise RowProblem(field, "empty_response", "the response has no messages")
    if len(msgs) != 1 or msgs[0]["role"] != "assistant":
        roles = [m["role"] for m in msgs]
        raise RowProblem(field, "wrong_type", f"expected a single assistant message, got roles {roles}")
    return msgs[0]["content"]


def split_conversation(msgs: list[Message], field: str) -> tuple[list[Message], str]:
    """A full conversation -> (everything before the final assistant turn, that turn's text)."""
    if not msgs:
        raise RowProblem(field, "empty_response", "the conversation is empty")
    if msgs[-1]["role"] != "assistant":
        raise RowProblem(field, "missing_field",
                         f"the conversation does not end with an assistant reply (last role: {msgs[-1]['role']})")
    return msgs[:-1], msgs[-1]["content"]


def shared_prompt(chosen: list[Message], rejected: list[Message], chosen_field: str,
                  rejected_field: str) -> tuple[list[Message], str, str]:
    """Two full conversations that differ only in their final assistant turn -> (prompt, chosen, rejected)."""
    chosen_prompt, chosen_text = split_conversation(chosen, chosen_field)
    rejected_prompt, rejected_text = split_conversation(rejected, rejected_field)
    if chosen_prompt != rejected_prompt:
        raise RowProblem(rejected_field, "prompt_mismatch",
                         f"'{chosen_field}' and '{rejected_field}' differ before their final assistant turns")
    return chosen_prompt, chosen_text, rejected_text


def conversation_pair(row: dict[str, Any], parse: Any, chosen_field: str, rejected_field: str) -> Parts:
    """The Parts of a row whose two fields hold whole conversations (read by `parse(value, field)`) that share
    everything but their final assistant turn."""
    prompt, chosen, rejected = shared_prompt(
        parse(row.get(chosen_field), chosen_field),
        parse(row.get(rejected_field), rejected_field),
        chosen_field,
        rejected_field,
    )
    return Parts(prompt, chosen, rejected, frozenset({chosen_field, rejected_field}))


# "\n\nHuman: " / "\n\nAssistant: " turn markers of Anthropic-style transcripts (HH-RLHF, Nectar prompts).
_TURN = re.compile(r"(?:^|\n\n)(Human|Assistant):[ ]?")


def transcript(value: Any, field: str, open_end: bool = False) -> list[Message]:
    """An Anthropic-style transcript as messages. With `open_end`, a trailing empty "Assistant:" turn (the
    cue for the reply, as in a Nectar prompt "\\n\\nHuman: … \\n\\nAssistant: ") is dropped."""
    if value is None:
        raise RowProblem(field, "missing_field", f"the row has no '{field}'")
    if not isinstance(value, str):
        raise RowProblem(field, "wrong_type", f"expected a transcript string, got {type(value).__name__}")
    parts = _TURN.split(value)
    if len(parts) < 3 or parts[0].strip():
        raise RowProblem(field, "wrong_type", "not a Human/Assistant transcript: it must start with '\\n\\nHuman: '")
    msgs = [{"role": "user" if speaker == "Human" else "assistant", "content": content}
            for speaker, content in zip(parts[1::2], parts[2::2])]
    if open_end and msgs[-1]["role"] == "assistant" and not msgs[-1]["content"].strip():
        msgs.pop()
    return msgs
