"""OpenRLHF's custom reward function backed by `patarm serve`: `--remote_rm_url /path/to/openrlhf.py`.

OpenRLHF can also post to the server directly (`--remote_rm_url http://127.0.0.1:8000/get_reward`), but
its HTTP client sends no bearer token and retries only 5 times, 1 s apart. This file adds both: it reads
the server from $PATARM_SERVE_URL and the token from $PATARM_SERVE_TOKEN, retries with back-off under one
request id, and returns OpenRLHF's dict: `rewards` (the judge's mean score, the lowest score when the
judgment is unparseable), `scores` (the same in [0, 1], for dynamic filtering) and `extra_logs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from patarm.serve.client import JudgeClient

_CLIENT: list[JudgeClient] = []


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict:
    """OpenRLHF's `reward_func(queries, prompts, labels)`: queries are prompt + response as rendered."""
    import torch

    if not _CLIENT:
        _CLIENT.append(JudgeClient())
    answer = _CLIENT[0].get_reward(list(queries), list(prompts) if prompts is not None else None)
    return {"rewards": torch.tensor(answer["rewards"], dtype=torch.float32),
            "scores": torch.tensor(answer["scores"], dtype=torch.float32),
            "extra_logs": {k: torch.tensor(v, dtype=torch.float32) for k, v in answer["extra_logs"].items()}}
