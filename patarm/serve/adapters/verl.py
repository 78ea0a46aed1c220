"""verl custom reward functions backed by `patarm serve` (verl loads this file by path).

    reward_model.reward_manager=batch
    custom_reward_function.path=$(python -c 'import patarm.serve.adapters.verl as m; print(m.__file__)')
    custom_reward_function.name=compute_score_batch
    +custom_reward_function.reward_kwargs.url=http://127.0.0.1:8000

verl gives a reward function the response (`solution_str`), `ground_truth`, `data_source` and the row's
`extra_info`, but not the prompt: put the prompt (text or chat messages) into `extra_info["prompt"]`
(or `"question"`) when preparing the parquet, and optionally `extra_info["domain"]` for the rubric.
The reward is the judge's mean valid score; a response it cannot score gets `invalid` (default 0.0).
The bearer token, when the server has one, is read from $PATARM_SERVE_TOKEN (or `token_env`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from patarm.serve.client import TOKEN_ENV, JudgeClient

PROMPT_KEYS = ("prompt", "question")
_CLIENTS: dict[tuple[str | None, str], JudgeClient] = {}  # one connection pool per worker and server


def _client(url: str | None, token_env: str) -> JudgeClient:
    key = (url, token_env)
    if key not in _CLIENTS:
        _CLIENTS[key] = JudgeClient(url, token=os.environ.get(token_env))
    return _CLIENTS[key]


def _plain(value: Any) -> Any:
    """Parquet rows come back as numpy arrays of dicts: make them lists."""
    return value.tolist() if hasattr(value, "tolist") else value


def judge_item(solution_str: str, extra_info: dict | None, n: int = 1, domain: str | None = None) -> dict[str, Any]:
    """The /v1/judge item of one verl row; ValueError when the row carries no prompt."""
    info = extra_info or {}
    prompt = next((_plain(info[k]) for k in PROMPT_KEYS if info.get(k) is not None), None)
    if prompt is None:
        raise ValueError("the verl row has no extra_info['prompt'] (or 'question'): add the prompt to extra_info "
                         "when building the parquet; the judge needs the conversation it scores the response in")
    item = {"prompt": prompt, "response": solution_str, "n": n}
    if info.get("domain") or domain:
        item["domain"] = info.get("domain") or domain
    return item


def compute_score_batch(data_sources: Sequence[Any], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                        extra_infos: Sequence[dict | None], *, url: str | None = None, token_env: str = TOKEN_ENV,
                        n: int = 1, domain: str | None = None, invalid: float = 0.0, **kwargs: Any) -> list[float]:
    """For `reward_model.reward_manager=batch`: one judge request for the whole batch."""
    items = [judge_item(s, e, n, domain) for s, e in zip(solution_strs, extra_infos)]
    results = _client(url, token_env).judge(items)
    return [float(r["mean"]) if r["mean"] is not None else float(invalid) for r in results]


def compute_score(data_source: Any, solution_str: str, ground_truth: Any = None, extra_info: dict | None = None,
                  **kwargs: Any) -> float:
    """For verl's naive (per-sample) reward manager; prefer `compute_score_batch` for throughput."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]
