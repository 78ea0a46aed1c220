"""The judge's prompt: a skill used through static routing (`patarm.skills.router.static_prompt`), with the
reference answer mounted as the sample's own resource when the arm discloses it, and the skill's
`arithmetic-check` verifier run into the prompt when the arm discloses that evidence (the `evidence` arm).

One builder serves every stage — the SFT corpus, the rejection-sampled RL set, GRPO rollouts (the GRPO config
names it: `prompt_builder: patarm.demo.gsm8k.prompts:skill_prompt`) and evaluation — so the judge is always
asked the same way. What it needs travels with the pair: `metadata["reference"]` (the reference final
answer), `metadata["disclose"]` (mount it or not), `metadata["evidence"]` (run the arithmetic check into the
prompt or not), `metadata["peers"]` (the problem's candidates: the evidence arm with `evidence_agreement` also
runs the skill's `answer-agreement` verifier over them, self-consistency as a resource; `metadata["score_rule"]`:
the score rule it enters stated too) and `metadata["skill"]`
(which skill's procedure and routed resources frame the prompt). The template's rubric mode adds the `<rubric>`
request in the adaptive mode.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from patarm.data import PreferencePair

ASSETS = Path(__file__).resolve().parents[1] / "assets"
COMPACT_SKILLS = ("gsm8k-judge", "gsm8k-judge-graded")  # the recipe's own (assets/<name>): no routed resources
DEFAULT_SKILL = "gsm8k-judge"  # the binary teacher's; the graded teacher's is gsm8k-judge-graded (teacher.SKILL_OF)
DOMAIN = "math"
REFERENCE_ID = "reference-answer"
EVIDENCE_ID = "arithmetic-check"  # the skill's verifier whose evidence the `evidence` arm discloses
AGREEMENT_ID = "answer-agreement"  # ... and, given the problem's candidates, the agreement across them
ADAPTIVE_REQUEST = "First <rubric>: this problem's criteria, one per line. Then <eval> and <score>."
# The score rule of the evidence arm's agreement lines (`agreement :: k of n`: k of the n candidates give this final
# answer; `issues :: N`; evidence.score_of), stated after the skill's procedure, whose own rule for an unknown verdict
# (7 - 3 x issues) the agreement replaces: without it the prompt contradicts every judgment the teacher writes
# (`evidence_score_rule`). Kept short, 30 SmolLM2 tokens: the held-out evidence prompts over the 512-token cut
# 17.5 → 27.5 % (a 57-token wording: 41 %)
AGREEMENT_RULE = ("With agreement: agreement :: k of n after unused numbers, then issues :: N; "
                  "unknown 2 + 2 x k - issues.")


@lru_cache(maxsize=8)
def load_judge_skill(name: str = DEFAULT_SKILL) -> Any:
    """The skill by name: one of the recipe's compact skills, a skill of the shipped bank, or a folder."""
    from patarm.skills.package import find_skill, load_skill

    return load_skill(ASSETS / name) if name in COMPACT_SKILLS else find_skill(name)


def judge_prompt(question: str, response: str, reference: str | None, skill: str = DEFAULT_SKILL,
                 evidence: bool = False, rubric_mode: str = "primary", peers: list[str] | None = None,
                 score_rule: bool = False) -> list[dict]:
    """Chat messages asking the judge to score `response`; `reference` (a final answer) is mounted as the
    sample-specific resource `reference-answer` when given. Verifiers are not run into the prompt (the judge
    gathers the evidence itself) except, with `evidence`, the skill's `arithmetic-check`, and with `peers` too (the
    problem's candidates; a near miss in the place of its source, `evidence.among`) its `answer-agreement`, and
    with `score_rule` the system prompt states the score rule the agreement enters (`AGREEMENT_RULE`)."""
    from patarm.demo.gsm8k.evidence import among
    from patarm.skills.router import static_prompt
    from patarm.skills.session import mount

    mounted = [] if reference is None else [mount(REFERENCE_ID, "reference", reference, "the reference final answer")]
    loaded = load_judge_skill(skill)
    verifiers = [EVIDENCE_ID, AGREEMENT_ID] if peers else [EVIDENCE_ID]
    missing = [v for v in verifiers if v not in loaded.resources]
    if evidence and missing:
        raise ValueError(f"the evidence arm runs the skill's {' and '.join(map(repr, missing))} verifier, which skill "
                         f"{skill!r} does not have: use skill gsm8k-judge-graded (teacher: graded)")
    candidates, index = among(response, peers) if evidence and peers else (None, 0)
    messages = static_prompt(
        loaded, question, response, DOMAIN, mounted, run_verifiers=verifiers if evidence else False,
        candidates=candidates, index=index,
    )
    if candidates is not None and score_rule:
        messages[0] = {**messages[0], "content": f"{messages[0]['content']}\n\n{AGREEMENT_RULE}"}
    if rubric_mode == "adaptive":
        messages[-1] = {**messages[-1], "content": messages[-1]["content"] + "\n" + ADAPTIVE_REQUEST}
    return messages


def skill_prompt(pair: PreferencePair, response: str, template: Any = None) -> list[dict]:
    """The prompt builder of every stage: (pair, one of its responses, template) → chat messages. The template
    fixes the output contract (`<eval>` then `<score>`, a `<rubric>` first in its adaptive rubric mode), which
    the skill prompt states itself."""
    meta = pair.metadata
    reference = meta.get("reference") if meta.get("disclose") else None
    return judge_prompt(pair.question, response, None if reference is None else str(reference),
                        meta.get("skill", DEFAULT_SKILL), bool(meta.get("evidence")),
                        getattr(template, "rubric_mode", None) or "primary", meta.get("peers"),
                        bool(meta.get("score_rule")))
