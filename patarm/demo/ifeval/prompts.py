"""Verifiable instruction prompts: Alpaca instructions (those without an input), each with one to three
constraints drawn from IFEval's own instruction registry (`if_verifiable.ifeval.instructions_registry`) —
the same instruction ids, kwargs drawn from the same ranges by the registry's own `build_description`, phrased
as the registry phrases them, and checked by the same checkers (`patarm.verify.ifeval.check_response`).

Every row is an IFEval input row (`key`, `prompt`, `instruction_id_list`, `kwargs`) plus the Alpaca instruction,
so a response to it is scored exactly as a response to an official IFEval prompt is. Drawing is deterministic:
each instruction's constraints come from `random.Random(f"{seed}:{instruction}")` (the registry draws from the
`random` module, whose state is set for the draw and restored afterwards). The split into train and dev is by
instruction text (a stable hash), and no prompt shares its instruction with one of the 541 test prompts.

Conflicting constraints are never drawn together (the registry's own conflict table, made symmetric as its
`conflict_make` does); a draw whose kwargs the checker would redraw when it rebuilds itself (e.g.
`nth_paragraph` beyond `num_paragraphs`) is redrawn, so the checked constraint is the phrased one. The manifest
counts every instruction skipped, and why, and every redraw.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from patarm.data.schema import Manifest
from patarm.io import DataError, read_jsonl

DOMAIN = "instruction-following"
REPEAT = "combination:repeat_prompt"  # phrased last: its kwarg is the request before it, word for word
_MAX_REDRAWS = 20


@dataclass
class PromptSettings:
    """How constraints are drawn: `min_constraints`..`max_constraints` per instruction, ids from the registry
    minus `exclude_ids`, the dev share of instructions, the seed."""

    seed: int = 0
    min_constraints: int = 1
    max_constraints: int = 3
    dev_share: float = 0.1
    exclude_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= self.min_constraints <= self.max_constraints:
            raise ValueError(f"constraints per prompt: need 1 <= min ({self.min_constraints}) <= max "
                             f"({self.max_constraints})")
        if not 0.0 < self.dev_share < 1.0:
            raise ValueError(f"dev_share must be in (0, 1), got {self.dev_share}")


@lru_cache(maxsize=1)
def registry() -> tuple[dict[str, Any], dict[str, set[str]]]:
    """IFEval's instruction classes by id, and the symmetric conflict table (every id conflicts with itself);
    read-only (cached)."""
    from if_verifiable.ifeval import instructions_registry as reg

    conflicts = copy.deepcopy(reg.INSTRUCTION_CONFLICTS)
    for key in list(conflicts):
        for other in list(conflicts[key]):
            conflicts.setdefault(other, set()).add(key)
        conflicts[key].add(key)
    return dict(reg.INSTRUCTION_DICT), conflicts


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def alpaca_instructions(path: str | Path, manifest: Manifest) -> list[str]:
    """Distinct Alpaca instructions without an input, in file order; the rest counted in `manifest`."""
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(str(path), None, None, "unreadable",
                        f"cannot read the Alpaca file ({err}); expected a JSON list of {{instruction, input, output}}, "
                        "e.g. ../shared/benchmarks/alpaca/alpaca_5000.json (--alpaca_file)") from None
    if not isinstance(rows, list):
        raise DataError(str(path), None, None, "not_a_list",
                        f"expected a JSON list of {{instruction, input, output}} rows, got a {type(rows).__name__}")
    seen: set[str] = set()
    out = []
    for i, row in enumerate(rows):
        manifest.rows_in += 1
        if not isinstance(row, dict) or not isinstance(row.get("instruction"), str):
            fields = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise DataError(str(path), i, "instruction", "missing_instruction",
                            f"no 'instruction' text (fields: {fields}); expected {{instruction, input, output}} rows")
        text = row["instruction"].strip()
        if row.get("input"):
            manifest.drop("has_input", f"row {i}")
        elif not text:
            manifest.drop("empty_instruction", f"row {i}")
        elif _norm(text) in seen:
            manifest.drop("duplicate_instruction", f"row {i}: {text[:60]}")
        else:
            seen.add(_norm(text))
            out.append(text)
    return out


def test_prompts(path: str | Path) -> list[str]:
    """The official IFEval prompt texts (input_data.jsonl), normalised."""
    rows = read_jsonl(path)
    if not rows or any(not isinstance(r, dict) or "prompt" not in r for r in rows):
        bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict) or "prompt" not in r), None)
        raise DataError(str(path), None, "prompt", "not_ifeval_input",
                        "not IFEval's input_data.jsonl: " + ("the file has no rows" if bad is None else
                                                            f"line {bad + 1} has no 'prompt'")
                        + "; pass the official file (--ifeval_file, e.g. ../shared/benchmarks/ifeval/input_data.jsonl)")
    return [_norm(r["prompt"]) for r in rows]


def draw_constraints(instruction: str, settings: PromptSettings, manifest: Manifest | None = None,
                     ) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """(instruction ids, their kwargs, their descriptions) for one instruction, drawn deterministically."""
    classes, conflicts = registry()
    rng = random.Random(f"{settings.seed}:{instruction}")
    ids = sorted(i for i in classes if i not in settings.exclude_ids)
    k = rng.randint(settings.min_constraints, settings.max_constraints)
    chosen: list[str] = []
    for candidate in rng.sample(ids, len(ids)):
        if len(chosen) == k:
            break
        if not any(candidate in conflicts.get(c, {c}) or c in conflicts.get(candidate, {candidate}) for c in chosen):
            chosen.append(candidate)
    if manifest is not None and len(chosen) < k:
        manifest.extra.setdefault("fewer_constraints_than_drawn", 0)
        manifest.extra["fewer_constraints_than_drawn"] += 1  # every remaining id conflicted
    chosen.sort(key=lambda i: i == REPEAT)  # the repeat instruction goes last (it repeats what precedes it)
    kwargs, descriptions = [], []
    saved = random.getstate()
    try:
        random.seed(rng.random())
        for iid in chosen:
            if iid == REPEAT:
                request = _join([instruction, *descriptions])
                checker = classes[iid](iid)
                descriptions.append(checker.build_description(prompt_to_repeat=request))
                kwargs.append({"prompt_to_repeat": request})
                continue
            for _attempt in range(_MAX_REDRAWS):
                checker = classes[iid](iid)
                text = checker.build_description()
                args = {k: v for k, v in (checker.get_instruction_args() or {}).items() if v is not None}
                if _stable(classes[iid], iid, args):
                    break
                if manifest is not None:
                    manifest.extra.setdefault("redrawn_kwargs", Counter())[iid] += 1
            else:
                raise RuntimeError(f"{iid}: no stable kwargs in {_MAX_REDRAWS} draws")
            kwargs.append(args)
            descriptions.append(text)
    finally:
        random.setstate(saved)
    return chosen, kwargs, descriptions


def _stable(cls: Any, iid: str, args: dict[str, Any]) -> bool:
    """Whether the checker rebuilt from `args` (as the scorer rebuilds it) keeps exactly these kwargs and draws
    nothing at random (a draw means it replaced one of them, even when the redrawn value happens to be equal)."""
    state = random.getstate()
    try:
        rebuilt = cls(iid)
        rebuilt.build_description(**args)
        drew = random.getstate() != state
        again = {k: v for k, v in (rebuilt.get_instruction_args() or {}).items() if v is not None}
    finally:
        random.setstate(state)
    return not drew and again == args


def _join(parts: list[str]) -> str:
    """Sentences joined by a space, or by a line break after a part that does not end a sentence (the bullet
    list's description ends with an example bullet)."""
    out = parts[0].strip()
    for part in parts[1:]:
        out += (" " if re.search(r"[.?!:)\]\"']$", out) else "\n") + part.strip()
    return out


def prompt_text(instruction: str, ids: list[str], descriptions: list[str]) -> str:
    """The instruction, then its constraints as the registry phrases them (the repeat instruction on its own
    line, as IFEval writes it)."""
    head = _join([instruction, *(d for i, d in zip(ids, descriptions) if i != REPEAT)])
    tail = [d for i, d in zip(ids, descriptions) if i == REPEAT]
    return "\n".join([head, *tail])


def build_prompts(alpaca_file: str | Path, ifeval_file: str | Path, settings: PromptSettings,
                  ) -> tuple[list[dict], list[dict], Manifest]:
    """(train rows, dev rows, manifest). A row: `id`, `prompt` (chat messages), `domain`, `instruction` and
    `ifeval_row`: the IFEval input row that checks a response, as JSON text (the GRPO data set's column that the
    checker reward reads; text, because Arrow would merge every row's kwargs into one struct)."""
    from patarm.demo.downstream.task import is_heldout

    unknown = sorted(set(settings.exclude_ids) - set(registry()[0]))
    if unknown:
        raise ValueError(f"exclude_ids {unknown}: not IFEval instruction ids; choose from {sorted(registry()[0])}")
    manifest = Manifest()
    instructions = alpaca_instructions(alpaca_file, manifest)
    tests = test_prompts(ifeval_file)
    test_set = set(tests)
    train, dev = [], []
    per_id: Counter = Counter()
    per_count: Counter = Counter()
    for n, instruction in enumerate(instructions):
        norm = _norm(instruction)
        if norm in test_set or (len(norm) >= 20 and any(norm in t for t in tests)):
            manifest.drop("in_an_ifeval_test_prompt", instruction[:80])
            continue
        ids, kwargs, descriptions = draw_constraints(instruction, settings, manifest)
        text = prompt_text(instruction, ids, descriptions)
        if _norm(text) in test_set:
            manifest.drop("equals_an_ifeval_test_prompt", instruction[:80])
            continue
        key = f"alpaca-{n}"
        ifeval = {"key": key, "prompt": text, "instruction_id_list": ids, "kwargs": kwargs}
        row = {"id": key, "prompt": [{"role": "user", "content": text}], "domain": DOMAIN,
               "instruction": instruction, "ifeval_row": json.dumps(ifeval)}
        (dev if is_heldout(instruction, settings.dev_share) else train).append(row)
        manifest.rows_out += 1
        per_id.update(ids)
        per_count[len(ids)] += 1
    redrawn = manifest.extra.pop("redrawn_kwargs", Counter())
    manifest.extra.update(train=len(train), dev=len(dev), constraints_per_prompt=dict(sorted(per_count.items())),
                          instruction_ids=dict(sorted(per_id.items())), redrawn_kwargs=dict(redrawn),
                          settings={"seed": settings.seed, "min_constraints": settings.min_constraints,
                                    "max_constraints": settings.max_constraints, "dev_share": settings.dev_share,
                                    "exclude_ids": list(settings.exclude_ids)})
    if not train or not dev:
        raise DataError(str(alpaca_file), None, None, "too_few_prompts",
                        f"{len(train)} train and {len(dev)} dev prompts ({manifest.to_dict()['dropped']} dropped): "
                        "give more instructions or another dev_share")
    return train, dev, manifest
