"""A TRL reward function backed by a PaTaRM judge: served over HTTP, or loaded in this process.

    from patarm.serve.adapters.trl import JudgeReward
    trainer = GRPOTrainer(model=..., reward_funcs=[JudgeReward("http://127.0.0.1:8000")], ...)

TRL calls it with `prompts`, `completions` (text or chat messages) and every extra dataset column as
keyword arguments; a `domain` column picks each row's rubric. The reward is the mean valid judge score
(1–10 with the bundled templates); a completion the judge could not score gets `invalid` (default
None, which TRL turns into NaN and leaves out of the advantage).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from patarm.rewards import completion_text
from patarm.serve.client import JudgeClient


class JudgeReward:
    """`JudgeReward(url)` for a running `patarm serve`, or `JudgeReward(model=PATH)` to judge in-process.

    `n` judge rollouts per completion; `domain`, `template`, `rubric_mode` apply to every row (a `domain`
    dataset column overrides `domain` per row). `client_kwargs` go to `JudgeClient` (token, timeout_s,
    max_retries, ...); `scorer_kwargs` to `load_scorer` (max_new_tokens, temperature, ...).
    """

    def __init__(self, url: str | None = None, *, model: str | None = None, n: int = 1, domain: str | None = None,
                 template: str | None = None, rubric_mode: str | None = None, invalid: float | None = None,
                 name: str = "patarm_judge", client_kwargs: dict[str, Any] | None = None,
                 scorer_kwargs: dict[str, Any] | None = None):
        if (url is None) == (model is None):
            raise ValueError("give exactly one of `url` (a running patarm serve) or `model` (judge in-process)")
        self.__name__ = name  # TRL names the reward's logged metrics after it
        self.n, self.domain, self.template, self.rubric_mode, self.invalid = n, domain, template, rubric_mode, invalid
        self.client = JudgeClient(url, **(client_kwargs or {})) if url is not None else None
        self.model, self.scorer_kwargs = model, scorer_kwargs or {}
        self._scorer: Any = None

    def close(self) -> None:
        """Close the HTTP connections (the judge in-process, if any, is simply dropped)."""
        if self.client is not None:
            self.client.close()
        self._scorer = None

    def __getstate__(self) -> dict:  # picklable: a local model is reloaded where it is unpickled
        return {**self.__dict__, "_scorer": None}

    def items(self, prompts: Sequence[Any], completions: Sequence[Any], domain: Sequence[str | None] | None = None
              ) -> list[dict[str, Any]]:
        """The judge items of one TRL call."""
        domains = list(domain) if domain is not None else [self.domain] * len(prompts)
        out = []
        for prompt, completion, d in zip(prompts, completions, domains):
            item: dict[str, Any] = {"prompt": prompt, "response": completion_text(completion), "n": self.n,
                                    "domain": d or self.domain, "template": self.template,
                                    "rubric_mode": self.rubric_mode}
            out.append({k: v for k, v in item.items() if v is not None})
        return out

    def means(self, items: list[dict[str, Any]]) -> list[float | None]:
        """The mean valid score of each item (None where no rollout gave a valid score)."""
        if self.client is not None:
            return [r["mean"] for r in self.client.judge(items)]
        from patarm.serve.scorer import ScoreItem, load_scorer

        if self._scorer is None:
            self._scorer = load_scorer(self.model, **self.scorer_kwargs)
        return [r.mean for r in self._scorer.score([ScoreItem(**item) for item in items])]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        means = self.means(self.items(prompts, completions, kwargs.get("domain")))
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and means:
            log_metric(f"{self.__name__}/valid", sum(m is not None for m in means) / len(means))
        return [m if m is not None else self.invalid for m in means]
