"""Judge prompt templates: YAML data files rendered into chat messages (and through a tokenizer's
chat template into a prompt string).

Responses are placed inside delimiter tags and any tag-like text inside them is neutralised, so a
response cannot close its own block, pose as instructions, or smuggle in an output tag.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from patarm.config import nearest
from patarm.rubrics import check_rubric_mode, load_primary_rubrics, render_primary_rubrics

PROMPT_DIR = Path(__file__).parent / "prompts"
DEFAULT_TEMPLATE = "pointwise"
DEFAULT_RUBRIC_MODE = "adaptive"
# Every tag a prompt or an output uses; any of them inside user-supplied text is escaped.
RESERVED_TAGS = ("think", "rubric", "eval", "score", "decision", "conversation", "response",
                 "response_a", "response_b", "counts")
_RESERVED_RE = re.compile(r"<(\s*/?\s*)(" + "|".join(RESERVED_TAGS) + r")(\s*)>", re.IGNORECASE)


@dataclass(frozen=True)
class JudgeTemplate:
    """A judge prompt and its output contract, loaded from `patarm/judge/prompts/<name>.yaml`."""

    name: str
    kind: str  # "pointwise" | "pairwise"
    system: str
    user: str
    tags: tuple[str, ...]
    optional_tags: tuple[str, ...]
    required_by_mode: dict[str, tuple[str, ...]]
    rubric_instruction: dict[str, str]
    output_format: dict[str, str]
    rubric_mode: str = DEFAULT_RUBRIC_MODE
    score_range: tuple[float, float] = (1, 10)
    decisions: tuple[str, ...] = ("A", "B", "tie")
    rubric_dirs: tuple[str, ...] = field(default_factory=tuple)
    facts: tuple[str, ...] = ()  # fact sets (patarm.judge.facts) stated in the prompt's `{facts}` field

    @property
    def required_tags(self) -> tuple[str, ...]:
        return self.required_by_mode[self.rubric_mode]

    @property
    def answer_tag(self) -> str:
        return "score" if self.kind == "pointwise" else "decision"

    def with_options(self, **kwargs: Any) -> JudgeTemplate:
        """A copy with e.g. another `rubric_mode` or `score_range`."""
        if kwargs.get("rubric_mode") is not None:
            check_rubric_mode(kwargs["rubric_mode"])
        if kwargs.get("score_range") is not None:
            lo, hi = kwargs["score_range"]
            if not lo < hi:
                raise ValueError(f"score_range must be (low, high) with low < high, got {kwargs['score_range']}")
            kwargs["score_range"] = (float(lo), float(hi))
        return replace(self, **{k: v for k, v in kwargs.items() if v is not None})


@functools.cache
def _read_template(path: str) -> dict:
    return yaml.safe_load(Path(path).read_text(encoding="utf-8"))


def load_template(name_or_path: str | JudgeTemplate = DEFAULT_TEMPLATE, *, rubric_mode: str | None = None,
                  score_range: Sequence[float] | None = None, rubric_dirs: Sequence[str] = ()) -> JudgeTemplate:
    """Load a bundled template by name (`pointwise`, `pairwise`, `pointwise-compact`, `pointwise-counts`) or a YAML
    path."""
    if isinstance(name_or_path, JudgeTemplate):
        return name_or_path.with_options(rubric_mode=rubric_mode, score_range=score_range)
    path = Path(name_or_path)
    if not path.suffix:
        path = PROMPT_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        bundled = sorted(p.stem for p in PROMPT_DIR.glob("*.yaml"))
        raise ValueError(
            f"judge template {name_or_path!r} not found{nearest(str(name_or_path), bundled)}; bundled: {bundled}, "
            "or give a YAML path"
        )
    data = _read_template(str(path))
    try:
        template = JudgeTemplate(
            name=data["name"], kind=data["kind"], system=data.get("system") or "", user=data["user"],
            tags=tuple(data["tags"]), optional_tags=tuple(data.get("optional_tags", ())),
            required_by_mode={m: tuple(t) for m, t in data["required_tags"].items()},
            rubric_instruction=data["rubric_instruction"], output_format=data["output_format"],
            score_range=tuple(float(x) for x in data.get("score_range", (1, 10))),
            decisions=tuple(data.get("decisions", ("A", "B", "tie"))), rubric_dirs=tuple(rubric_dirs),
            facts=tuple(data.get("facts") or ()),
        )
    except KeyError as err:
        raise ValueError(f"{path}: judge template is missing the field {err}") from err
    _check_facts(template, path)
    return template.with_options(rubric_mode=rubric_mode or DEFAULT_RUBRIC_MODE, score_range=score_range)


def _check_facts(template: JudgeTemplate, path: Path) -> None:
    from patarm.judge.facts import check_fact_sets

    check_fact_sets(template.facts, f"{path}: `facts`")
    if template.facts and template.kind != "pointwise":
        raise ValueError(f"{path}: `facts` are stated about one response: a {template.kind} template cannot have them")
    if bool(template.facts) != ("{facts}" in template.user):
        raise ValueError(f"{path}: a template with `facts` states them in its user text's {{facts}} field, and only "
                         "such a template has that field")


def neutralize(text: str) -> str:
    """Escape reserved tags inside untrusted text so it cannot open or close a prompt/output block."""
    return _RESERVED_RE.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}{m.group(3)}&gt;", text)


def render_conversation(prompt: Sequence[dict[str, str]] | str) -> str:
    """The conversation being judged as plain text; a single user turn is shown as-is."""
    if isinstance(prompt, str):
        return neutralize(prompt)
    if len(prompt) == 1 and prompt[0]["role"] == "user":
        return neutralize(prompt[0]["content"])
    return "\n\n".join(f"[{m['role']}]\n{neutralize(m['content'])}" for m in prompt)


def _fill(template: JudgeTemplate, domain: str | None, **values: str) -> list[dict[str, str]]:
    mode = template.rubric_mode
    lo, hi = template.score_range
    rubric_values = {}
    if mode != "generated":
        rubric_values = {
            "primary_rubric": render_primary_rubrics(domain, template.rubric_dirs),
            "primary_rubric_names": ", ".join(r.name for r in load_primary_rubrics(domain, template.rubric_dirs)),
        }
    instruction = template.rubric_instruction[mode].format(**rubric_values).strip("\n")
    fmt = {"min_score": f"{lo:g}", "max_score": f"{hi:g}", "rubric_instruction": instruction,
           "output_format": template.output_format[mode], **values}
    messages = [{"role": "system", "content": template.system.strip()}] if template.system.strip() else []
    messages.append({"role": "user", "content": template.user.format(**fmt).strip()})
    return messages


def render_pointwise(prompt: Sequence[dict[str, str]] | str, response: str, template: JudgeTemplate | str | None = None,
                     domain: str | None = None) -> list[dict[str, str]]:
    """Judge-prompt chat messages asking for a score of one `response` to `prompt`."""
    template = load_template(template or DEFAULT_TEMPLATE)
    if template.kind != "pointwise":
        raise ValueError(f"template {template.name!r} is {template.kind}, not pointwise")
    facts = {}
    if template.facts:
        from patarm.judge.facts import facts_block

        facts["facts"] = facts_block(template.facts, response)
    return _fill(template, domain, conversation=render_conversation(prompt), response=neutralize(response), **facts)


def render_pairwise(prompt: Sequence[dict[str, str]] | str, response_a: str, response_b: str,
                    template: JudgeTemplate | str | None = None, domain: str | None = None) -> list[dict[str, str]]:
    """Judge-prompt chat messages asking which of two responses is better (A, B or tie)."""
    template = load_template(template or "pairwise")
    if template.kind != "pairwise":
        raise ValueError(f"template {template.name!r} is {template.kind}, not pairwise")
    return _fill(template, domain, conversation=render_conversation(prompt),
                 response_a=neutralize(response_a), response_b=neutralize(response_b))


def to_prompt_text(messages: list[dict[str, str]], tokenizer: Any, enable_thinking: bool = False) -> str:
    """Render judge messages through the tokenizer's chat template, ready for generation."""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                         enable_thinking=enable_thinking)
