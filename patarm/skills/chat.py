"""Tool-calling chat backends for the agentic skill judge.

Both return an `AssistantTurn` (text plus parsed tool calls):

- `HFChat`: a local transformers model; prompts are rendered through the model's own chat template
  with the tool schemas (``apply_chat_template(..., tools=...)``), tool calls are parsed from the
  generated text in the Hermes/Qwen format ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``.
- `OpenAIChat`: any OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, SGLang, …) with
  native ``tools`` and ``tool_choice``; stdlib HTTP only.
"""

from __future__ import annotations

import json
import re
import urllib.request
from dataclasses import dataclass, field
from typing import Any

_TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S)


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


def _parse_arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if raw in (None, ""):
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("arguments must be a JSON object")
    return value


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Tool calls in generated text; malformed ones come back with `error` set (never raises)."""
    calls = []
    for i, body in enumerate(_TOOL_CALL_RE.findall(text)):
        try:
            data = json.loads(body)
            if not isinstance(data, dict) or not isinstance(data.get("name"), str):
                raise ValueError('expected {"name": ..., "arguments": {...}}')
            calls.append(ToolCall(data["name"], _parse_arguments(data.get("arguments")), f"call_{i}"))
        except (ValueError, TypeError) as err:
            calls.append(ToolCall("", {}, f"call_{i}", f"malformed tool call: {err}"))
    return calls


class HFChat:
    """A transformers causal LM as a tool-calling chat model (greedy by default)."""

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int = 512, temperature: float = 0.0):
        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens, self.temperature = max_new_tokens, temperature

    def __call__(self, messages: list[dict], tools: list[dict], force: str | None = None) -> AssistantTurn:
        import torch

        text = self.tokenizer.apply_chat_template(messages, tools=[{"type": "function", "function": t} for t in tools],
                                                  tokenize=False, add_generation_prompt=True)
        if force:  # no constrained decoding here: open the forced call so the model completes it
            text += f'<tool_call>\n{{"name": "{force}", "arguments": '
        enc = self.tokenizer(text, return_tensors="pt", add_special_tokens=False).to(self.model.device)
        sample = self.temperature > 0
        with torch.no_grad():
            out = self.model.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=sample,
                                      temperature=self.temperature if sample else None, top_p=None, top_k=None,
                                      pad_token_id=self.tokenizer.pad_token_id)
        completion = self.tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        if force:
            completion = f'<tool_call>\n{{"name": "{force}", "arguments": ' + completion
        content = _TOOL_CALL_RE.sub("", completion).strip()
        return AssistantTurn(content, parse_tool_calls(completion))


class OpenAIChat:
    """An OpenAI-compatible chat-completions endpoint with native tool calling."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, max_tokens: int = 1024,
                 temperature: float = 0.0, timeout_s: float = 300.0):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key = model, api_key
        self.max_tokens, self.temperature, self.timeout_s = max_tokens, temperature, timeout_s

    def _post(self, payload: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, json.dumps(payload).encode(), headers)
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            return json.loads(response.read())

    def __call__(self, messages: list[dict], tools: list[dict], force: str | None = None) -> AssistantTurn:
        wire = []
        for m in messages:  # the wire format wants arguments as JSON strings
            m = dict(m)
            if "tool_calls" in m:
                m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"])}}
                                   for c in m["tool_calls"]]
            wire.append(m)
        payload = {"model": self.model, "messages": wire, "max_tokens": self.max_tokens,
                   "temperature": self.temperature, "tools": [{"type": "function", "function": t} for t in tools]}
        if force:
            payload["tool_choice"] = {"type": "function", "function": {"name": force}}
        message = self._post(payload)["choices"][0]["message"]
        calls = []
        for i, call in enumerate(message.get("tool_calls") or []):
            fn = call.get("function", {})
            try:
                calls.append(ToolCall(fn.get("name", ""), _parse_arguments(fn.get("arguments")), call.get("id", f"call_{i}")))
            except (ValueError, TypeError) as err:
                calls.append(ToolCall(fn.get("name", ""), {}, call.get("id", f"call_{i}"), f"malformed arguments: {err}"))
        content = message.get("content") or ""
        if not calls and "<tool_call>" in content:  # some servers leave Hermes-style calls in the text
            calls = parse_tool_calls(content)
        return AssistantTurn(content, calls)
