"""The policy's task for the downstream RLHF loop: prompts, the policy's SFT corpus, and the held-out items
its instruction following is measured on.

An *item* is a dict: `prompt` (chat messages), `domain`, and the checks that apply to it —
`constraint` (a `patarm.demo.synthetic` constraint, as JSON text: the rule verifier), `ifeval` (an IFEval
input row: the official checker), `questions` (InFoBench-style decomposed yes/no questions). The bundled
synthetic task fills `constraint` and, where the instruction maps onto an IFEval instruction, `ifeval`;
the paper-sized run reads its items from IFEval's and InFoBench's own files.

Held-out prompts are split from the training ones by prompt text (a stable hash), so no held-out prompt
text is ever seen in the policy's SFT or RL data. The synthetic task has few distinct prompts (3 request
phrasings × 43 topics × 2 case instructions = 258): each held-out prompt is sampled several times.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

from patarm.demo.synthetic import Constraint, check, constraint_of, make_pairs
from patarm.io import read_jsonl

DOMAIN = "instruction-following"
# Synthetic constraint kind → (IFEval instruction id, its kwargs), where the two mean the same thing.
# (IFEval's case checkers also require the text to be detected as English by langdetect.)
IFEVAL_OF_KIND = {
    "lowercase": ("change_case:english_lowercase", {}),
    "uppercase": ("change_case:english_capital", {}),
    "no_letter_e": ("keywords:letter_frequency", {"letter": "e", "let_frequency": 1, "let_relation": "less than"}),
}


def is_heldout(prompt_text: str, share: float) -> bool:
    """Whether a prompt text belongs to the held-out split (a stable hash of the text, not Python's hash)."""
    digest = int(hashlib.sha256(prompt_text.encode("utf-8")).hexdigest()[:8], 16)
    return digest / 0xFFFFFFFF < share


def ifeval_row(key: int, prompt_text: str, kind: str) -> dict[str, Any] | None:
    """The IFEval input row that checks `kind` on `prompt_text`, or None when no IFEval instruction maps."""
    if kind not in IFEVAL_OF_KIND:
        return None
    instruction, kwargs = IFEVAL_OF_KIND[kind]
    return {"key": key, "prompt": prompt_text, "instruction_id_list": [instruction], "kwargs": [dict(kwargs)]}


def synthetic_split(pool: int, seed: int, kinds: list[str], heldout_share: float, heldout_prompts: int,
                    ) -> tuple[list, list[dict[str, Any]]]:
    """`pool` synthetic pairs split by prompt text: (training pairs, held-out items — one per distinct
    held-out prompt, at most `heldout_prompts`, in a seeded order)."""
    pairs = make_pairs(pool, seed=seed, kinds=kinds)
    train = [p for p in pairs if not is_heldout(p.question, heldout_share)]
    seen: dict[str, Any] = {}
    for p in pairs:
        if is_heldout(p.question, heldout_share):
            seen.setdefault(p.question, p)
    held = sorted(seen.values(), key=lambda p: p.question)
    random.Random(seed).shuffle(held)
    items = []
    for i, pair in enumerate(held[:heldout_prompts]):
        constraint = constraint_of(pair)
        items.append({"prompt": pair.prompt, "domain": DOMAIN, "constraint": json.dumps(constraint.to_dict()),
                      "ifeval": ifeval_row(i, pair.question, constraint.kind),
                      "reference": pair.chosen, "reference_rejected": pair.rejected})
    return train, items


def policy_sft_rows(pairs: list, n: int, violation_rate: float, seed: int) -> tuple[list[dict], dict[str, int]]:
    """The policy's SFT corpus: `n` (prompt, response) conversations from the training pairs, the response
    being the pair's rejected one (which breaks the instruction) with probability `violation_rate`, else the
    chosen one — so the starting policy sometimes breaks the instruction, as a real SFT policy does.
    Returns the rows and their counts by kind of response."""
    if not pairs:
        raise ValueError("no training pairs for the policy's SFT corpus: the held-out share took every prompt")
    rng = random.Random(seed)
    rows, counts = [], {"follows": 0, "breaks": 0}
    for i in range(n):
        pair = pairs[i % len(pairs)]
        breaks = rng.random() < violation_rate
        counts["breaks" if breaks else "follows"] += 1
        response = pair.rejected if breaks else pair.chosen
        rows.append({"messages": [*pair.prompt, {"role": "assistant", "content": response}], "pair_id": pair.id})
    return rows, counts


def rl_rows(pairs: list, n: int, offset: int = 0) -> list[dict[str, Any]]:
    """`n` GRPO prompt rows (`prompt`, `domain`, `constraint`) from the training pairs, starting at `offset`
    (past the pairs the SFT corpus used, where the pool allows)."""
    if not pairs:
        raise ValueError("no training pairs for the RL prompts")
    picked = [pairs[(offset + i) % len(pairs)] for i in range(n)]
    return [{"prompt": p.prompt, "domain": DOMAIN, "constraint": json.dumps(constraint_of(p).to_dict())}
            for p in picked]


_THINK = re.compile(r"\A\s*<think>.*?</think>\s*", re.S)


def answer(text: str) -> str:
    """The answer part of a policy's response: a leading `<think>…</think>` block removed (Qwen3 chat templates
    open every assistant turn with one); an unclosed think block leaves no answer."""
    if text.lstrip().startswith("<think>") and "</think>" not in text:
        return ""
    return _THINK.sub("", text, count=1)


def verified(item: dict[str, Any], response: str) -> bool | None:
    """The rule verifier's verdict on `response`: the synthetic task's `constraint`, else the IFEval checkers on the
    item's IFEval input row (`ifeval_row` as JSON text, or `ifeval`): every instruction followed, strict — IFEval's
    prompt-level strict accuracy. None when the item has neither."""
    if item.get("constraint"):
        return check(Constraint.from_dict(json.loads(item["constraint"])), response).passed
    row = item.get("ifeval_row") or item.get("ifeval")
    if row:
        from patarm.verify.ifeval import check_response

        return all(check_response(json.loads(row) if isinstance(row, str) else row, response).strict)
    return None


# ------------------------------------------------------------------------------ items from files


def _messages(value: Any, where: str) -> list[dict[str, str]]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if isinstance(value, list) and value and all(isinstance(m, dict) and "content" in m for m in value):
        return value
    raise ValueError(f"{where}: 'prompt' must be text or a list of chat messages")


def prompts_from_file(path: str | Path, n: int | None = None) -> list[dict[str, Any]]:
    """RL prompt rows from a jsonl file of `{"prompt": text or messages}` (other columns kept, e.g. `domain`)."""
    rows = []
    for i, row in enumerate(read_jsonl(path)):
        if not isinstance(row, dict) or "prompt" not in row:
            raise ValueError(f"{path}: line {i + 1} has no 'prompt' field (expected {{\"prompt\": ...}})")
        rows.append({**row, "prompt": _messages(row["prompt"], f"{path}: line {i + 1}"),
                     "domain": row.get("domain") or DOMAIN})
    return rows[:n] if n else rows


def ifeval_items(path: str | Path, n: int | None = None) -> list[dict[str, Any]]:
    """Held-out items from IFEval's input_data.jsonl (the official checker scores them)."""
    items = []
    for i, row in enumerate(read_jsonl(path)):
        if not isinstance(row, dict) or not {"key", "prompt", "instruction_id_list", "kwargs"} <= set(row):
            raise ValueError(f"{path}: line {i + 1} is not an IFEval input row (key, prompt, instruction_id_list, "
                             "kwargs)")
        items.append({"prompt": [{"role": "user", "content": row["prompt"]}], "domain": DOMAIN, "ifeval": row,
                      "benchmark": "ifeval"})
    return items[:n] if n else items


def infobench_items(path: str | Path, n: int | None = None) -> list[dict[str, Any]]:
    """Held-out items from an InFoBench-style jsonl: `instruction`, optional `input`, `decomposed_questions`
    (the yes/no questions whose "yes" share is the DRFR metric)."""
    items = []
    for i, row in enumerate(read_jsonl(path)):
        questions = row.get("decomposed_questions") if isinstance(row, dict) else None
        if not isinstance(questions, list) or not questions or "instruction" not in row:
            raise ValueError(f"{path}: line {i + 1} needs 'instruction' and a non-empty 'decomposed_questions' list")
        text = row["instruction"] + (f"\n\n{row['input']}" if row.get("input") else "")
        items.append({"prompt": [{"role": "user", "content": text}], "domain": DOMAIN, "questions": questions,
                      "benchmark": "infobench", "id": row.get("id", i)})
    return items[:n] if n else items
