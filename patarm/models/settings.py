"""What a trained judge was trained with, read back from `patarm_config.json` beside its weights, so
judge / eval / bon / serve use the same template, rubric mode, score range and judgment length; and
`JudgeOptions`, the options those commands share (fields, help texts and checks written once)."""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patarm.config import check_positive

logger = logging.getLogger("patarm.judge")
RUN_CONFIG_FILE = "patarm_config.json"  # written by every training stage, copied by `patarm export`


def read_run_config(model: str | Path) -> dict[str, Any]:
    """The training config saved with a judge folder ({} for a hub id, a spec, or a folder without one)."""
    path = Path(model) / RUN_CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def judge_settings(model: str | Path) -> dict[str, Any]:
    """{template, rubric_mode, score_range, max_new_tokens, enable_thinking, max_prompt_tokens} the judge was
    trained with, where recorded."""
    config = read_run_config(model)
    data, training = config.get("data") or {}, config.get("training") or {}
    settings = {
        "template": data.get("judge_template"),
        "rubric_mode": data.get("rubric_mode"),
        "score_range": data.get("score_range"),
        "max_new_tokens": training.get("max_completion_length") or data.get("max_judgment_tokens"),
        "enable_thinking": data.get("enable_thinking"),
        "max_prompt_tokens": _trained_prompt_tokens(data, training),
    }
    return {k: v for k, v in settings.items() if v is not None}


def _trained_prompt_tokens(data: dict[str, Any], training: dict[str, Any]) -> int | None:
    """The longest judge prompt (tokens) the judge saw in training: GRPO's `max_prompt_length`, else SFT's
    `max_length` less the judgment length. Longer prompts reach positions a small judge never trained on."""
    if data.get("max_prompt_length"):
        return int(data["max_prompt_length"])
    total, judgment = training.get("max_length"), data.get("max_judgment_tokens")
    return int(total - judgment) if total and judgment and total > judgment else None


@dataclass
class JudgeOptions:
    """How to prompt and decode a judge, shared by `patarm judge`, `eval`, `serve` and `skill bon`. None means:
    what the judge was trained with (its `patarm_config.json`), else the default (`resolve_judge_options`).
    A command declares the ones it offers as flags with `judge_field(name)`; `score_range` and
    `enable_thinking` are not flags: they always come from the judge's training config."""

    template: str | None = field(default=None, metadata={"help": "judge template (default: the judge's own)"})
    rubric_mode: str | None = field(default=None, metadata={
        "help": "primary | generated | adaptive (default: the judge's own)"})
    temperature: float | None = field(default=None, metadata={
        "help": "sampling temperature (default 0 for n=1, else 0.7)"})
    max_new_tokens: int | None = field(default=None, metadata={
        "help": "judgment length limit (default: the judge's own, else 512)"})
    max_prompt_tokens: int | None = field(default=None, metadata={
        "help": "prompt tokens per judgment; longer prompts are shortened (default: the longest the judge was "
                "trained on, else its window)"})
    score_range: list[float] | None = None
    enable_thinking: bool | None = None

    def __post_init__(self) -> None:
        check_positive(self, "max_new_tokens", "max_prompt_tokens")
        if self.temperature is not None and self.temperature < 0:
            raise ValueError(f"--temperature must be >= 0, got {self.temperature}")

    @classmethod
    def of(cls, args: Any) -> JudgeOptions:
        """The judge options among a command's arguments (checked; the ones it lacks are None)."""
        return cls(**{f.name: getattr(args, f.name, None) for f in dataclasses.fields(cls)})


def judge_field(name: str, **metadata: Any) -> Any:
    """A command's dataclass field for the judge option `name`, with JudgeOptions' default and help
    (`metadata` adds to it, e.g. a different help where the command means more)."""
    spec = {f.name: f for f in dataclasses.fields(JudgeOptions)}[name]
    return field(default=spec.default, metadata={**spec.metadata, **metadata})


def resolve_judge_options(model: str, options: JudgeOptions, default_template: str,
                          num_samples: int = 1) -> tuple[dict[str, Any], dict[str, str]]:
    """Template, rubric mode, score range, judgment length, thinking switch, prompt length and temperature for
    judging with `model`: the options first, then what the judge was trained with, then defaults. Returns the
    values and where each came from (logged, so a run says why it used what it used)."""
    from patarm.models import check_model

    check_model(model)
    trained = judge_settings(model)
    values, sources = {}, {}
    for key, fallback in (("template", default_template), ("rubric_mode", "adaptive"), ("score_range", None),
                          ("max_new_tokens", 512), ("enable_thinking", False), ("max_prompt_tokens", None)):
        flag = getattr(options, key)
        value, source = ((flag, "flag") if flag is not None else (trained[key], "the judge's training config")
                         if key in trained else (fallback, "default"))
        values[key], sources[key] = value, source
    if values["template"] and "pairwise" not in str(values["template"]) and default_template == "pairwise":
        values["template"], sources["template"] = "pairwise", "default (pairwise mode)"
    n = num_samples
    temperature = options.temperature if options.temperature is not None else (0.0 if n == 1 else 0.7)
    if n > 1 and temperature <= 0:
        raise ValueError(f"--num_samples {n} with temperature {temperature}: greedy decoding gives {n} identical "
                         "judgments; set --temperature > 0 (e.g. 0.7)")
    values["temperature"] = temperature
    sources["temperature"] = "flag" if options.temperature is not None else "default"
    logger.info("judging with %s", ", ".join(f"{k}={values[k]} ({sources[k]})" for k in values))
    return values, sources
