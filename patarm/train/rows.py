"""GRPO's rows: each preference pair as two judge prompts (chosen, rejected) sharing a `pair_id`. Kept apart from
`patarm.train.grpo` (which imports TRL's trainer, ~10 s on 2 cores) so servers, benchmarks and tests that only
build rows start fast."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from patarm.config import import_object
from patarm.data import PreferencePair
from patarm.judge import JudgeTemplate, load_template, render_pointwise


def load_prompt_builder(spec: str) -> Callable[[PreferencePair, str, JudgeTemplate], list]:
    """The function named by 'package.module:function' (or 'package.module.function')."""
    return import_object(spec, "prompt_builder")


def pairs_to_judge_rows(
    pairs: Iterable[PreferencePair],
    template: JudgeTemplate | str | None = None,
    rubric_mode: str | None = None,
    build: Callable[[PreferencePair, str, JudgeTemplate], list] | None = None,
) -> list[dict[str, Any]]:
    """Each pair as two conversational GRPO rows (chosen first) sharing a `pair_id`, so the pair-preserving
    sampler and the PAR reward can put them back together. `build` makes each prompt instead of the template."""
    template = load_template(template or "pointwise", rubric_mode=rubric_mode)
    build = build or (lambda pair, response, t: render_pointwise(pair.prompt, response, t, domain=pair.domain))
    return [{"prompt": build(pair, response, template),
             "pair_id": pair.id, "side": side, "domain": pair.domain or "", "response": response}
            for pair in pairs for side, response in (("chosen", pair.chosen), ("rejected", pair.rejected))]
