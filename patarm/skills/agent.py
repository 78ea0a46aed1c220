"""The agentic skill judge: a tool-calling loop over a SkillSession.

Tools: ``list_resources``, ``view_resource``, ``run_resource``, ``python_sandbox`` and
``final_answer`` (evidence items per candidate plus a decision). A malformed or failing call is
answered with an error observation; a turn without any tool call gets a reminder; after
`max_turns` the model is asked once more with ``final_answer`` forced. Whatever happens, the
result is read out deterministically (A(τ)) from all evidence gathered: verifier evidence from
run resources plus the items given in ``final_answer``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from patarm.backends.base import AssistantTurn, ToolCall
from patarm.judge.judgment import EvidenceItem, Judgment
from patarm.skills.package import Resource, Skill
from patarm.skills.session import SkillSession

ChatFn = Callable[[list[dict], list[dict], str | None], AssistantTurn]
MAX_OBSERVATION_CHARS = 4000  # keep tool output from flooding the context
_STR = {"type": "string"}
TOOLS: list[dict[str, Any]] = [
    {"name": "list_resources", "description": "Names, types and descriptions of the resources for this sample.",
     "parameters": {"type": "object", "properties": {}}},
    {"name": "view_resource", "description": "Read a view resource (rubric, checklist, constraint, reference, ...).",
     "parameters": {"type": "object", "properties": {"id": _STR}, "required": ["id"]}},
    {"name": "run_resource", "description": "Run a verifier or tool resource on the candidates.",
     "parameters": {"type": "object", "properties": {"id": _STR, "arguments": {"type": "object"}}, "required": ["id"]}},
    {"name": "python_sandbox", "description": "Run Python code in an isolated sandbox; returns stdout/stderr.",
     "parameters": {"type": "object", "properties": {"code": _STR}, "required": ["code"]}},
    {"name": "final_answer", "description": "Finish: evidence items per candidate and the decision.",
     "parameters": {"type": "object", "required": ["evidence"], "properties": {
         "evidence": {"type": "array", "items": {"type": "object", "properties": {
             "candidate": {"type": "integer"}, "criterion": _STR, "observation": _STR,
             "assessment": {"type": ["string", "number"]}}, "required": ["candidate", "criterion", "assessment"]}},
         "decision": _STR}}},
]


@dataclass
class AgentResult:
    """The outcome of one agentic judgment (K candidates)."""

    judgments: list[Judgment]
    index: int | None  # best-of-N / pairwise winner index (None when nothing could be read out)
    decision: str | None  # pairwise "A" / "B" / "tie" for K = 2
    turns: int
    forced: bool
    finished: bool
    messages: list[dict] = field(default_factory=list)
    trace: list[dict] = field(default_factory=list)


def _task_message(sample: dict[str, Any]) -> str:
    cands = sample["candidates"]
    body = "\n\n".join(f"<candidate index={i}>\n{c}\n</candidate>" for i, c in enumerate(cands))
    goal = (
        "score the single candidate"
        if len(cands) == 1
        else "decide which of the two candidates is better"
        if len(cands) == 2
        else f"select the best of {len(cands)} candidates"
    )
    return (
        f"Domain: {sample.get('domain') or 'unknown'}. Task: {goal}.\n\n"
        f"<prompt>\n{sample.get('prompt', '')}\n</prompt>\n\n"
        f"{body}\n\nUse the tools to gather evidence, then call final_answer."
    )


def _execute(session: SkillSession, call: ToolCall, final: list[dict]) -> str:
    """Run one tool call; return the observation text (errors are observations too)."""
    if call.error:
        return f"error: {call.error}"
    try:
        if call.name == "list_resources":
            return json.dumps(session.list_resources())
        if call.name == "view_resource":
            return session.view_resource(str(call.arguments["id"]))
        if call.name == "run_resource":
            return json.dumps(
                session.run_resource(str(call.arguments["id"]), **dict(call.arguments.get("arguments") or {}))
            )
        if call.name == "python_sandbox":
            from patarm.verify.sandbox import run_python

            return json.dumps(run_python(str(call.arguments["code"])).to_dict())
        if call.name == "final_answer":
            items = call.arguments.get("evidence")
            if not isinstance(items, list) or not all(isinstance(e, dict) and "criterion" in e for e in items):
                return "error: final_answer needs evidence: [{candidate, criterion, observation, assessment}]"
            final.append(call.arguments)
            return "ok"
        return f"error: unknown tool {call.name!r}; tools: {', '.join(t['name'] for t in TOOLS)}"
    except KeyError as err:
        return f"error: missing or unknown argument/resource {err}"
    except (ValueError, TypeError) as err:
        return f"error: {err}"


def _record_final(session: SkillSession, final: dict) -> None:
    for row in final.get("evidence", []):
        try:
            i = int(row.get("candidate", 0))
        except (TypeError, ValueError):
            continue
        if 0 <= i < len(session.evidence):
            session.add_evidence(
                i, EvidenceItem(str(row["criterion"]), str(row.get("observation", "")), row.get("assessment"))
            )


def _decision_fallback(stated: str, k: int, decision: str | None) -> tuple[int | None, str | None]:
    """(index, pairwise decision) from final_answer's decision field: "A"/"B"/"tie" or an index."""
    stated = stated.strip()
    if stated.upper() in ("A", "B") and k == 2:
        return "AB".index(stated.upper()), stated.upper()
    if stated.isdigit() and int(stated) < k:
        return int(stated), decision
    return None, decision


def run_agent(skill: Skill, sample: dict[str, Any], chat: ChatFn, mounted: Sequence[Resource] = (),
              max_turns: int = 8, rules_id: str | None = None) -> AgentResult:
    """Judge `sample` ({prompt, candidates, domain}) with `skill` through tool calls of `chat`."""
    session = SkillSession(skill, sample, mounted)
    listing = "\n".join(
        f"- {r['id']} ({r['type']}, {r['action']}): {r['description']}" for r in session.list_resources()
    )
    messages: list[dict] = [
        {
            "role": "system",
            "content": f"{skill.procedure}\n\nResources (names only; view or run on demand):\n{listing}",
        },
        {"role": "user", "content": _task_message(sample)},
    ]
    final: list[dict] = []
    turns, forced = 0, False
    while not final and turns <= max_turns:
        forced = turns == max_turns
        if forced:
            messages.append(
                {"role": "user", "content": "Turn limit reached: call final_answer now with your evidence."}
            )
        turn = chat(messages, TOOLS, "final_answer" if forced else None)
        turns += 1
        messages.append(turn.as_message())
        if not turn.tool_calls:
            messages.append({"role": "user", "content": "error: no tool call found; call a tool (or final_answer)."})
            continue
        for call in turn.tool_calls:
            observation = _execute(session, call, final)
            messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                             "content": observation[:MAX_OBSERVATION_CHARS]})
    if final:
        _record_final(session, final[0])
    rules = session.rules(rules_id)
    judgments = session.pointwise(rules)
    index, _ = session.best_of_n(rules)
    decision = session.pairwise(rules) if len(judgments) == 2 else None
    if index is None and final:  # no usable evidence: fall back on the stated decision d
        index, decision = _decision_fallback(str(final[0].get("decision", "")), len(judgments), decision)
    return AgentResult(judgments, index, decision, turns, forced, bool(final), messages, session.trace)
