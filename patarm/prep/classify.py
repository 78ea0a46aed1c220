"""Domain classification of pairs: math / code / chat / safety / instruction-following.

By a teacher LLM (the paper used Qwen2.5-32B-Instruct) with the prompt in `prompts/classify.yaml`,
falling back to a fast keyword heuristic when the teacher's answer is not one of the labels (or when
no teacher is used at all). The manifest counts how each label was decided.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from patarm.data import Manifest, PreferencePair
from patarm.judge.templates import neutralize, render_conversation

CLASSIFY_PROMPTS = Path(__file__).parent / "prompts"
DOMAINS = ("math", "code", "chat", "safety", "instruction-following")

# Checked in this order on the user turns; the first family with a hit wins. Safety first: a harmful
# request stays a safety case even when it asks for code.
_HEURISTICS = (
    ("safety", re.compile(
        r"\b(kill|murder|bomb|explosives?|weapons?|poison|suicide|self-harm|hack(?:ing)? into|steal|illegal|"
        r"drugs?|meth|racist|terroris[mt]|malware|ransomware|phishing|launder)\b", re.I)),
    ("code", re.compile(
        r"```|\b(def |class \w+|import \w+|function\s*\(|console\.log|#include|public static|"
        r"python|javascript|typescript|c\+\+|c#|rust|golang|sql|regex|bash|compile|debug|stack trace|"
        r"code|coding|programming|script|algorithm|java(?= code| program| class| method))\b", re.I)),
    ("math", re.compile(
        r"\\frac|\\sqrt|\$[^$\n]+\$|\b(solve|equations?|calculat\w*|math\w*|arithmetic|integral|derivative|"
        r"probability|theorem|prove|how many|compute|sum of|remainder|prime|polynomial|geometry|triangle)\b|"
        r"\b\d+\s*[+*/^×÷]\s*\d+\b", re.I)),
    ("instruction-following", re.compile(
        r"\b(exactly \d+ words|in \d+ words|lowercase|uppercase|all capital|do not use|without using|"
        r"start (?:your|the) (?:answer|response) with|end (?:your|the) (?:answer|response) with|"
        r"bullet points|in json format|at least \d+|no more than \d+|wrap your entire)\b", re.I)),
)
# In the chosen reply only unambiguous markers count (prose replies mention numbers and "code" freely).
_REPLY_MARKERS = (("code", re.compile(r"```|^\s*(def |class |#include|import )", re.M)),
                  ("math", re.compile(r"\\frac|\\sqrt|\\boxed|\$\$")))


def heuristic_domain(pair: PreferencePair) -> str:
    """A label from keywords of the user turns, else from code/LaTeX markers in the chosen reply."""
    request = "\n".join(m["content"] for m in pair.prompt if m["role"] == "user")
    for label, pattern in _HEURISTICS:
        if pattern.search(request):
            return label
    for label, pattern in _REPLY_MARKERS:
        if pattern.search(pair.chosen[:4000]):
            return label
    return "chat"


@functools.cache
def load_prompt(name_or_path: str = "classify") -> dict[str, Any]:
    """The classification prompt: a bundled name under patarm/prep/prompts/ or a YAML path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = CLASSIFY_PROMPTS / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ValueError(f"classification prompt {name_or_path!r} not found (bundled: "
                         f"{sorted(p.stem for p in CLASSIFY_PROMPTS.glob('*.yaml'))}, or give a YAML path)")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    missing = {"labels", "user"} - set(data)
    if missing:
        raise ValueError(f"{path}: classification prompt is missing {sorted(missing)}")
    return data


def render_classify(pair: PreferencePair, prompt: dict[str, Any]) -> list[dict[str, str]]:
    """Chat messages asking the teacher for one label."""
    response = neutralize(pair.chosen[: int(prompt.get("response_chars", 1500))])
    user = prompt["user"].format(conversation=render_conversation(pair.prompt), response=response,
                                 labels=", ".join(prompt["labels"]))
    system = (prompt.get("system") or "").strip()
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user.strip()}]


def parse_label(text: str, labels: Sequence[str]) -> str | None:
    """The label inside <domain></domain> (or the whole answer when it is just a label), else None."""
    match = re.search(r"<domain>\s*(.*?)\s*</domain>", text or "", re.S)
    answer = (match.group(1) if match else (text or "")).strip().strip(".").lower()
    by_name = {label.lower(): label for label in labels}
    return by_name.get(answer)


def classify_pairs(pairs: Sequence[PreferencePair], teacher: Any = None, prompt: str = "classify",
                   keep_existing: bool = False, seed: int | None = None) -> tuple[list[PreferencePair], Manifest]:
    """Pairs with `domain` set. Without a teacher every label is heuristic; with one, an answer that
    is not a label falls back to the heuristic. `keep_existing` leaves pairs that have a domain alone."""
    spec = load_prompt(prompt)
    labels = tuple(spec["labels"])
    todo = [i for i, p in enumerate(pairs) if not (keep_existing and p.domain)]
    answers: dict[int, str | None] = {}
    if teacher is not None and todo:
        messages = [render_classify(pairs[i], spec) for i in todo]
        meta = [{"task": "classify", "pair": pairs[i]} for i in todo]
        texts = teacher.generate(messages, num_samples=1, seed=seed, metadata=meta)
        answers = {i: parse_label(t[0], labels) for i, t in zip(todo, texts)}
    how: Counter = Counter()
    out = list(pairs)
    for i in todo:
        label = answers.get(i)
        how["teacher" if label else ("heuristic_fallback" if teacher is not None else "heuristic")] += 1
        out[i] = replace(pairs[i], domain=label or heuristic_domain(pairs[i]))
    how["kept_existing"] = len(pairs) - len(todo)
    manifest = Manifest(rows_in=len(pairs), rows_out=len(out))
    manifest.extra.update(domains=dict(Counter(p.domain for p in out)), decided_by=dict(how))
    return out, manifest
