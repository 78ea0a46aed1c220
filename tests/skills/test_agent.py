"""The agentic loop: tool calls, error observations, forced final answer, and a transformers backend."""

import json

from patarm.backends.base import AssistantTurn, ToolCall, parse_tool_calls
from patarm.skills.agent import TOOLS, run_agent
from patarm.skills.package import find_skill
from patarm.skills.session import mount

SKILL = find_skill("reward-judge")
SAMPLE = {"prompt": "Janet has 16 eggs, eats 7 and sells the rest at $2. Earnings?", "domain": "math",
          "candidates": ["16 - 7 = <<16-7=9>>9 eggs. 9 * 2 = <<9*2=18>>18\nA: 18",
                         "16 - 7 = <<16-7=9>>9 eggs. 9 * 2 = <<9*2=20>>20\nA: 20"]}


class Scripted:
    """A chat model that replays turns and records the `force` argument it was called with."""

    def __init__(self, turns):
        self.turns, self.forced = list(turns), []

    def __call__(self, messages, tools, force=None):
        self.forced.append(force)
        return self.turns.pop(0) if self.turns else AssistantTurn("I think A is better.")


def test_parse_tool_calls():
    calls = parse_tool_calls(
        'x <tool_call>\n{"name": "view_resource", "arguments": {"id": "math-rubric"}}\n</tool_call>'
        '<tool_call>{"name": broken}</tool_call>'
    )
    assert calls[0].name == "view_resource" and calls[0].arguments == {"id": "math-rubric"} and not calls[0].error
    assert calls[1].error.startswith("malformed")


def test_tool_loop_with_errors_then_final_answer():
    final = {"decision": "A", "evidence": [
        {"candidate": 0, "criterion": "Correctness", "observation": "18 is right", "assessment": "pass"},
        {"candidate": 1, "criterion": "Correctness", "observation": "20: 9*2 is 18", "assessment": "fail"}]}
    chat = Scripted(
        [
            AssistantTurn("", [ToolCall("", {}, "c0", "malformed tool call: bad JSON")]),
            AssistantTurn("thinking, no call"),
            AssistantTurn("", [ToolCall("teleport", {}, "c1")]),
            AssistantTurn(
                "", [ToolCall("list_resources", {}, "c2"), ToolCall("view_resource", {"id": "math-checklist"}, "c3")]
            ),
            AssistantTurn("", [ToolCall("view_resource", {"id": "no-such"}, "c4")]),
            AssistantTurn("", [ToolCall("run_resource", {"id": "calculator-annotations"}, "c5")]),
            AssistantTurn("", [ToolCall("python_sandbox", {"code": "print(9 * 2)"}, "c6")]),
            AssistantTurn("", [ToolCall("final_answer", final, "c7")]),
        ]
    )
    result = run_agent(SKILL, SAMPLE, chat, max_turns=10)
    assert result.finished and not result.forced and result.turns == 8
    tool_msgs = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert tool_msgs[0].startswith("error: malformed") and "unknown tool" in tool_msgs[1]
    assert "error" in tool_msgs[4] and json.loads(tool_msgs[6])["stdout"] == "18\n"
    assert any("no tool call" in m["content"] for m in result.messages if m["role"] == "user")
    assert result.decision == "A" and result.index == 0
    assert result.judgments[1].score == 1.0  # calculator fail + correctness fail
    assert {e.criterion for e in result.judgments[0].evidence} == {"calculator-annotations", "Correctness"}


def test_turn_limit_forces_final_answer_and_falls_back_on_verifier_evidence():
    reference = mount("reference-answer", "reference", "A: 18")
    chat = Scripted([AssistantTurn("", [ToolCall("run_resource", {"id": "reference-match"}, "c0")])])
    result = run_agent(SKILL, SAMPLE, chat, mounted=[reference], max_turns=3)
    assert chat.forced == [None, None, None, "final_answer"]
    assert result.forced and not result.finished and result.turns == 4
    assert result.index == 0 and result.decision == "A"  # read out from the reference-match evidence


def test_transformers_backend_runs_the_loop():
    from patarm.models.tiny import build_tiny_judge

    model, tokenizer = build_tiny_judge([SAMPLE["prompt"], json.dumps(TOOLS)] + SAMPLE["candidates"], vocab_size=400)
    from patarm.backends import GenerationOptions
    from patarm.backends.hf import HFBackend

    chat = HFBackend(model, tokenizer, GenerationOptions(max_new_tokens=8)).chat_turn
    result = run_agent(SKILL, SAMPLE, chat, max_turns=1)
    # A random model cannot call tools: every turn gets an error observation, then the forced call.
    assert result.turns == 2 and result.forced and result.index is None
    rendered = tokenizer.apply_chat_template(
        result.messages[:2],
        tools=[{"type": "function", "function": t} for t in TOOLS],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert "final_answer" in rendered and "<tools>" in rendered


def test_openai_backend_payload(monkeypatch):
    from patarm.backends.openai import OpenAIBackend

    sent = {}

    async def fake_call(self, client, payload, extract):
        sent.update(payload)
        return extract(
            {
                "choices": [
                    {
                        "message": {
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "x1",
                                    "type": "function",
                                    "function": {"name": "final_answer", "arguments": '{"evidence": []}'},
                                }
                            ],
                        }
                    }
                ]
            }
        )

    monkeypatch.setattr(OpenAIBackend, "_call", fake_call)
    chat = OpenAIBackend("judge", "http://localhost:8000/v1").chat_turn
    history = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "list_resources", "arguments": {}}}]}]
    turn = chat(history, TOOLS, force="final_answer")
    assert sent["tool_choice"]["function"]["name"] == "final_answer"
    assert sent["messages"][0]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert turn.tool_calls[0].name == "final_answer" and turn.tool_calls[0].arguments == {"evidence": []}
