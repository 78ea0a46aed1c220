"""The judge's prompt: a skill used through static routing (`patarm.skills.router.static_prompt`), with the
reference answer mounted as the sample's own resource when the arm discloses it.

One builder serves every stage — the SFT corpus, the rejection-sampled RL set, GRPO rollouts (the GRPO config
names it: `prompt_builder: patarm.demo.gsm8k.prompts:skill_prompt`) and evaluation — so the judge is always
asked the same way. What it needs travels with the pair: `metadata["reference"]` (the reference final
answer), `metadata["disclose"]` (mount it or not) and `metadata["skill"]` (which skill's procedure and routed
resources frame the prompt).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from patarm.data import PreferencePair

SKILL_DIR = Path(__file__).resolve().parents[1] / "assets" / "gsm8k-judge"
DEFAULT_SKILL = "gsm8k-judge"  # compact: a 3-line procedure, no routed resources (CPU); or e.g. reward-judge
DOMAIN = "math"
REFERENCE_ID = "reference-answer"


@lru_cache(maxsize=8)
def load_judge_skill(name: str = DEFAULT_SKILL) -> Any:
    """The skill by name: the recipe's compact `gsm8k-judge`, a skill of the shipped bank, or a folder."""
    from patarm.skills.package import find_skill, load_skill

    return load_skill(SKILL_DIR) if name == DEFAULT_SKILL else find_skill(name)


def judge_prompt(question: str, response: str, reference: str | None, skill: str = DEFAULT_SKILL) -> list[dict]:
    """Chat messages asking the judge to score `response`; `reference` (a final answer) is mounted as the
    sample-specific resource `reference-answer` when given. Verifiers are not run into the prompt: the judge
    gathers the evidence itself."""
    from patarm.skills.router import static_prompt
    from patarm.skills.session import mount

    mounted = [] if reference is None else [mount(REFERENCE_ID, "reference", reference, "the reference final answer")]
    return static_prompt(load_judge_skill(skill), question, response, DOMAIN, mounted, run_verifiers=False)


def skill_prompt(pair: PreferencePair, response: str, template: Any = None) -> list[dict]:
    """The prompt builder of every stage: (pair, one of its responses, template) → chat messages. The template
    only fixes the output contract (`<eval>` then `<score>`), which the skill prompt states itself."""
    meta = pair.metadata
    reference = meta.get("reference") if meta.get("disclose") else None
    return judge_prompt(pair.question, response, None if reference is None else str(reference),
                        meta.get("skill", DEFAULT_SKILL))
