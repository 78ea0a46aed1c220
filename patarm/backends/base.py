"""The one generation interface that the judge, eval, prep teachers, skills and the server share.

A backend turns chat prompts into completion texts:

    generate(prompts, num_samples=1, seed=None, metadata=None, on_result=None) -> list[list[str]]

`num_samples` texts per prompt, in prompt order. `metadata[i]` is optional per-prompt context that only
rule-based backends read. `on_result(results)` — when given — is called with `(prompt index, sample
index, text)` tuples as soon as they are finished (per batch for local models, per request for HTTP
endpoints), so a caching wrapper can store them before the whole call returns. `sampling()` names
every setting that changes what is generated (part of a cache key); `model_id` names the model.

Backends that can call tools also offer `chat_turn(messages, tools, force=None) -> AssistantTurn`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from patarm.data.schema import Messages

OnResult = Callable[[list[tuple[int, int, str]]], None]


class BackendError(RuntimeError):
    """A backend could not produce completions (gave up after retries, bad request, missing metadata)."""


@dataclass
class GenerationOptions:
    """Sampling settings shared by every backend. `temperature` 0 means greedy decoding."""

    max_new_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    batch_size: int = 32  # prompts per forward batch (local models); does not change the texts
    enable_thinking: bool = False  # Qwen3's chat-template switch; other templates ignore it
    # local models: prefill a prefix that several prompts of a batch share once (n samples of one prompt, one
    # question's candidates); like batch_size, not a sampling setting (greedy texts equal up to rounding)
    share_prefixes: bool = True
    # local models: every this many new tokens, rows that have ended leave their batch, so a batch stops decoding
    # rows that are done (0: never). None: 16 on a CPU, 0 elsewhere (each pause restarts `generate`). Like
    # batch_size, not a sampling setting: greedy texts equal up to rounding.
    drop_finished_every: int | None = None
    # prompt tokens a judge is given (prompts are fitted by patarm.judge.truncate.PromptFitter); None: the
    # model's window less max_new_tokens. Not a sampling setting: a fitted prompt is a different prompt.
    max_prompt_tokens: int | None = None

    def sampling(self) -> dict[str, Any]:
        """The settings that change the generated texts (everything but the batch size)."""
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "enable_thinking": self.enable_thinking}


class Backend(Protocol):
    model_id: str

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None, on_result: OnResult | None = None) -> list[list[str]]: ...

    def sampling(self) -> dict[str, Any]: ...


# ----------------------------------------------------------------------------- tool calling


@dataclass
class ToolCall:
    """One requested call; `error` is set when the request could not be parsed."""

    name: str
    arguments: dict[str, Any]
    id: str = ""
    error: str = ""


@dataclass
class AssistantTurn:
    """What the model said: free text and the tool calls it asked for."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation (OpenAI/transformers layout)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        good = [c for c in self.tool_calls if not c.error]
        if good:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}} for c in good]
        return message


TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S)


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict (they arrive as a dict or a JSON object string)."""
    if isinstance(raw, dict):
        return raw
    if raw in (None, ""):
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("arguments must be a JSON object")
    return value


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Hermes/Qwen-style `<tool_call>{"name": …, "arguments": {…}}</tool_call>` calls in generated text;
    malformed ones come back with `error` set (never raises)."""
    calls = []
    for i, body in enumerate(TOOL_CALL_RE.findall(text)):
        try:
            data = json.loads(body)
            if not isinstance(data, dict) or not isinstance(data.get("name"), str):
                raise ValueError('expected {"name": ..., "arguments": {...}}')
            calls.append(ToolCall(data["name"], parse_arguments(data.get("arguments")), f"call_{i}"))
        except (ValueError, TypeError) as err:
            calls.append(ToolCall("", {}, f"call_{i}", f"malformed tool call: {err}"))
    return calls
