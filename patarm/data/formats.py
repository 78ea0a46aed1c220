"""Per-row converters: turn one raw preference row, in any supported layout, into a PreferencePair.

Supported layouts (the name is what `format=` accepts and what the manifest counts):

* ``standard``        TRL standard: ``{"prompt": str, "chosen": str, "rejected": str}``
* ``conversational``  TRL conversational: ``{"prompt": [msgs], "chosen": [msgs], "rejected": [msgs]}``
* ``canonical``       our own pairs.jsonl: ``{"id", "prompt": [msgs], "chosen": str, "rejected": str, ...}``
* ``implicit_prompt`` TRL implicit prompt / Skywork-Reward-Preference: ``{"chosen": [full conversation],
  "rejected": [full conversation]}``; the shared prefix is the prompt, the final assistant turn the reply
* ``sharegpt``        LLaMA-Factory: ``{"conversations": [{"from", "value"}], "chosen": {...}, "rejected": {...}}``
* ``messages``        LLaMA-Factory v1: ``{"chosen_messages": [...], "rejected_messages": [...]}``

Every problem raises `DataError` with a reason code from `REASONS`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

from patarm.data.schema import DataError, Message, PreferencePair

FORMATS = ("standard", "conversational", "canonical", "implicit_prompt", "sharegpt", "messages")
FORMAT_ALIASES = {"skywork": "implicit_prompt", "implicit": "implicit_prompt", "chosen_messages": "messages"}

# Reason codes a row can be dropped for (the keys of `Manifest.dropped`).
REASONS = (
    "not_an_object", "missing_field", "wrong_type", "empty_prompt", "empty_response",
    "identical_responses", "prompt_mismatch", "bad_prompt", "bad_json",
)

# sharegpt speakers and chat roles, mapped onto the canonical roles.
ROLE_MAP = {
    "user": "user", "human": "user",
    "assistant": "assistant", "gpt": "assistant", "model": "assistant", "function_call": "assistant",
    "system": "system",
    "tool": "tool", "observation": "tool",
}

# Row keys every layout understands; they never go into `metadata` as extras.
COMMON_KEYS = frozenset({"id", "domain", "source", "metadata"})

# Extra row fields longer than this (as text / JSON) are not copied into metadata: metadata rides
# along with every pair through training, so it must stay small.
METADATA_MAX_CHARS = 1024


class RowProblem(Exception):
    """What is wrong with a row; `pair_from_row` turns it into a DataError naming file and row."""

    def __init__(self, field_name: str | None, reason: str, message: str):
        super().__init__(message)
        self.field, self.reason, self.message = field_name, reason, message


def resolve_format(name: str) -> str:
    """Validate a `format=` argument ("auto", a layout name or an alias) and return the layout name."""
    name = FORMAT_ALIASES.get(name, name)
    if name != "auto" and name not in FORMATS:
        valid = ", ".join(("auto",) + FORMATS + tuple(FORMAT_ALIASES))
        raise ValueError(f"unknown preference-data format {name!r}; expected one of: {valid}")
    return name


def detect_format(row: dict[str, Any]) -> str | None:
    """Guess a row's layout from its keys (cheap: no value is inspected beyond its type)."""
    if "chosen_messages" in row or "rejected_messages" in row:
        return "messages"
    if "conversations" in row:
        return "sharegpt"
    if row.get("prompt") is not None:
        return _explicit_label(row)
    if isinstance(row.get("chosen"), list):
        return "implicit_prompt"
    return None


def _explicit_label(row: dict[str, Any]) -> str:
    """Which of the three explicit-prompt layouts a row with a `prompt` is in."""
    if isinstance(row.get("prompt"), str):
        return "standard"
    return "canonical" if isinstance(row.get("chosen"), str) else "conversational"


def stable_id(prompt: list[Message], chosen: str, rejected: str) -> str:
    """Content id for rows without one: sha1 of the canonical JSON of [prompt, chosen, rejected]."""
    blob = json.dumps([prompt, chosen, rejected], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:16]


# --------------------------------------------------------------------------- messages and texts


def _text(content: Any, where: str) -> str:
    """A message's content as text: a string, or a list of text parts ({"type": "text", "text"|"value"})."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if isinstance(part, str):
                parts.append(part)
                continue
            text = part.get("text", part.get("value")) if isinstance(part, dict) else None
            if not isinstance(text, str) or part.get("type", "text") != "text":
                raise RowProblem(f"{where}[{i}]", "wrong_type", "only text content parts are supported")
            parts.append(text)
        # Chat templates concatenate text parts without a separator, so do the same.
        return "".join(parts)
    if content is None:
        raise RowProblem(where, "wrong_type", "the message has no content")
    raise RowProblem(where, "wrong_type", f"expected text, got {type(content).__name__}")


def _message(msg: Any, where: str) -> Message:
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
    return {"role": canonical, "content": _text(msg[key], f"{where}.{key}")}


def _messages(value: Any, field: str) -> list[Message]:
    """A list of chat messages in canonical form."""
    if value is None:
        raise RowProblem(field, "missing_field", f"the row has no '{field}'")
    if not isinstance(value, list):
        raise RowProblem(field, "wrong_type", f"expected a list of messages, got {type(value).__name__}")
    return [_message(m, f"{field}[{i}]") for i, m in enumerate(value)]


def _reply(value: Any, field: str, prompt: list[Message] | None = None) -> str:
    """A response as text: a string, one assistant message, or a one-message list.

    A list that repeats `prompt` before the reply (full conversation plus explicit prompt) is accepted.
    """
    if isinstance(value, str):
        return value
    if value is None:
        raise RowProblem(field, "missing_field", f"the row has no '{field}'")
    if isinstance(value, dict):
        msgs = [_message(value, field)]
    elif isinstance(value, list):
        msgs = _messages(value, field)
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


def _split_conversation(value: Any, field: str) -> tuple[list[Message], str]:
    """A full conversation -> (everything before the final assistant turn, that turn's text)."""
    msgs = _messages(value, field)
    if not msgs:
        raise RowProblem(field, "empty_response", "the conversation is empty")
    if msgs[-1]["role"] != "assistant":
        raise RowProblem(field, "missing_field",
                         f"the conversation does not end with an assistant reply (last role: {msgs[-1]['role']})")
    return msgs[:-1], msgs[-1]["content"]


# --------------------------------------------------------------------------- layouts

Converted = tuple[list[Message], str, str, frozenset]  # prompt, chosen, rejected, keys consumed


def _from_explicit(row: dict[str, Any], fmt: str) -> Converted:
    """standard / conversational / canonical: an explicit `prompt` plus two responses."""
    value = row.get("prompt")
    if value is None:
        raise RowProblem("prompt", "missing_field", "the row has no 'prompt'")
    label = _explicit_label(row)
    if label != fmt:  # only reachable when the caller forced a format
        field = "prompt" if (fmt == "standard") != (label == "standard") else "chosen"
        raise RowProblem(field, "wrong_type", f"format={fmt!r} was requested but the row looks like {label!r}")
    prompt = [{"role": "user", "content": value}] if isinstance(value, str) else _messages(value, "prompt")
    chosen = _reply(row.get("chosen"), "chosen", prompt)
    rejected = _reply(row.get("rejected"), "rejected", prompt)
    return prompt, chosen, rejected, frozenset({"prompt", "chosen", "rejected"})


def _from_full_conversations(row: dict[str, Any], chosen_key: str, rejected_key: str) -> Converted:
    """Two full conversations sharing a prefix: the prefix is the prompt, the last turns the replies."""
    chosen_prompt, chosen = _split_conversation(row.get(chosen_key), chosen_key)
    rejected_prompt, rejected = _split_conversation(row.get(rejected_key), rejected_key)
    if chosen_prompt != rejected_prompt:
        raise RowProblem(rejected_key, "prompt_mismatch",
                         f"'{chosen_key}' and '{rejected_key}' differ before their final assistant turns")
    return chosen_prompt, chosen, rejected, frozenset({chosen_key, rejected_key})


def _from_implicit(row: dict[str, Any], fmt: str) -> Converted:
    return _from_full_conversations(row, "chosen", "rejected")


def _from_messages(row: dict[str, Any], fmt: str) -> Converted:
    return _from_full_conversations(row, "chosen_messages", "rejected_messages")


def _from_sharegpt(row: dict[str, Any], fmt: str) -> Converted:
    """LLaMA-Factory sharegpt: `conversations` is the prompt, `chosen`/`rejected` one gpt turn each."""
    prompt = _messages(row.get("conversations"), "conversations")
    system = row.get("system")
    # As in LLaMA-Factory, a leading system turn in the conversation wins over the `system` column.
    if system is not None and not (prompt and prompt[0]["role"] == "system"):
        if not isinstance(system, str):
            raise RowProblem("system", "wrong_type", f"expected a string, got {type(system).__name__}")
        if system.strip():
            prompt.insert(0, {"role": "system", "content": system})
    chosen = _reply(row.get("chosen"), "chosen")
    rejected = _reply(row.get("rejected"), "rejected")
    return prompt, chosen, rejected, frozenset({"conversations", "system", "chosen", "rejected"})


CONVERTERS: dict[str, Callable[[dict[str, Any], str], Converted]] = {
    "standard": _from_explicit,
    "conversational": _from_explicit,
    "canonical": _from_explicit,
    "implicit_prompt": _from_implicit,
    "sharegpt": _from_sharegpt,
    "messages": _from_messages,
}


# --------------------------------------------------------------------------- validation and assembly


def _check(prompt: list[Message], chosen: str, rejected: str) -> None:
    """The checks every layout shares, once the row is in canonical form."""
    if not prompt:
        raise RowProblem("prompt", "empty_prompt", "the prompt has no messages")
    if prompt[-1]["role"] != "user":
        raise RowProblem("prompt", "bad_prompt",
                         f"the prompt's last message must be from the user, not the {prompt[-1]['role']}")
    if not prompt[-1]["content"].strip():
        raise RowProblem("prompt", "empty_prompt", "the last user message is empty")
    for name, text in (("chosen", chosen), ("rejected", rejected)):
        if not text.strip():
            raise RowProblem(name, "empty_response", "the response is empty or whitespace only")
    if chosen.strip() == rejected.strip():
        raise RowProblem("rejected", "identical_responses", "chosen and rejected are the same text")


def _small(value: Any, chosen: str, rejected: str) -> bool:
    """Whether an extra row field is small enough, and not a response copy, to keep in metadata."""
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, str):
        return len(value) <= METADATA_MAX_CHARS and value != chosen and value != rejected
    if isinstance(value, (list, dict)):
        try:
            return len(json.dumps(value, ensure_ascii=False)) <= METADATA_MAX_CHARS
        except (TypeError, ValueError):
            return False
    return False  # images, bytes, dates...: not JSON, would break pairs.jsonl


def _metadata(row: dict[str, Any], consumed: frozenset, chosen: str, rejected: str) -> dict[str, Any]:
    """The row's own `metadata` plus its unknown small extra fields."""
    base = row.get("metadata")
    meta = dict(base) if isinstance(base, dict) else {}
    if base is not None and not isinstance(base, dict) and _small(base, chosen, rejected):
        meta["metadata"] = base
    for key, value in row.items():
        if key in consumed or key in COMMON_KEYS:
            continue
        if key not in meta and _small(value, chosen, rejected):
            meta[key] = value
    return meta


def _optional_str(value: Any, fallback: str | None) -> str | None:
    if value is None or value == "":
        return fallback
    return value if isinstance(value, str) else str(value)


def convert_row(row: Any, fmt: str = "auto", source_name: str | None = None,
                domain: str | None = None) -> tuple[PreferencePair, str]:
    """Convert and validate one row -> (pair, layout name). Raises RowProblem; `fmt` is resolved."""
    if not isinstance(row, dict):
        raise RowProblem(None, "not_an_object", f"expected a JSON object, got {type(row).__name__}")
    layout = detect_format(row) if fmt == "auto" else fmt
    if layout is None:
        missing = "chosen" if row.get("chosen") is None else "rejected" if row.get("rejected") is None else "prompt"
        raise RowProblem(missing, "missing_field",
                         f"unrecognised layout (keys: {sorted(row)[:12]}); no '{missing}'. Expected one of: "
                         + ", ".join(FORMATS))
    prompt, chosen, rejected, consumed = CONVERTERS[layout](row, layout)
    _check(prompt, chosen, rejected)
    raw_id = row.get("id")
    if raw_id is None or raw_id == "":
        raw_id = row.get("pair_id")
        consumed = consumed | {"pair_id"}  # it becomes the id, no need to keep a copy
    pair = PreferencePair(
        id=stable_id(prompt, chosen, rejected) if raw_id is None or raw_id == "" else str(raw_id),
        prompt=prompt,
        chosen=chosen,
        rejected=rejected,
        domain=_optional_str(row.get("domain"), domain),
        source=_optional_str(row.get("source"), source_name),
        metadata=_metadata(row, consumed, chosen, rejected),
    )
    return pair, layout


def pair_from_row(row: Any, *, format: str = "auto", path: str = "<memory>", index: int = 0,
                  source_name: str | None = None, domain: str | None = None) -> PreferencePair:
    """Convert and validate one raw row into a PreferencePair; raises DataError naming path and row."""
    fmt = resolve_format(format)
    try:
        return convert_row(row, fmt, source_name, domain)[0]
    except RowProblem as problem:
        raise DataError(path, index, problem.field, problem.reason, problem.message) from None
