"""Preference pairs from the policy's own responses, labelled by the IFEval checkers: several sampled responses
per verifiable prompt, each checked constraint by constraint (strict, `patarm.verify.ifeval.check_response`);
the response that follows the most constraints is chosen, the one that follows the fewest rejected. A prompt
whose responses all follow the same number of constraints gives no pair (counted in the manifest, by why). An
empty response (the policy stopped at once) follows no constraint, but a pair cannot hold it: it is left out of
the candidates and counted (`empty_responses`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from patarm.data import PreferencePair
from patarm.data.schema import Manifest

SOURCE = "policy-samples"


def followed(row: dict[str, Any], response: str) -> list[bool]:
    """Per constraint of the IFEval input `row`: whether `response` follows it (strict)."""
    from patarm.verify.ifeval import check_response

    return list(check_response(row, response).strict)


def label_pairs(rows: Sequence[dict[str, Any]], responses: Sequence[Sequence[str]],
                ) -> tuple[list[PreferencePair], list[dict[str, Any]], Manifest]:
    """(pairs, per-prompt sample records, manifest): one pair per prompt whose responses differ in the number of
    constraints followed — chosen the first response with the most, rejected the first with the fewest."""
    if len(rows) != len(responses):
        raise ValueError(f"{len(rows)} prompts but {len(responses)} response lists")
    manifest, pairs, records = Manifest(rows_in=len(rows)), [], []
    gaps: Counter = Counter()
    for row, texts in zip(rows, responses):
        ifeval = json.loads(row["ifeval_row"])
        checks = [followed(ifeval, t) for t in texts]  # an empty response fails every constraint
        records.append({"id": row["id"], "responses": list(texts), "followed": checks})
        candidates = [k for k, t in enumerate(texts) if t.strip()]
        if len(candidates) < 2:
            manifest.drop("fewer_than_two_nonempty_responses", row["id"])
            continue
        counts = {k: sum(checks[k]) for k in candidates}
        best, worst = max(candidates, key=lambda k: counts[k]), min(candidates, key=lambda k: counts[k])
        if counts[best] == counts[worst]:
            reason = "all_follow_every_constraint" if counts[best] == len(checks[best]) else "all_follow_equally"
            manifest.drop(reason, row["id"])
            continue
        gaps[counts[best] - counts[worst]] += 1
        pairs.append(PreferencePair(
            id=row["id"], prompt=row["prompt"], chosen=texts[best], rejected=texts[worst], domain=row["domain"],
            source=SOURCE, metadata={"ifeval": ifeval, "followed": [counts[best], counts[worst]],
                                     "constraints": len(checks[best])}))
        manifest.rows_out += 1
    every = [c for r in records for c in r["followed"]]  # one list of verdicts per sampled response
    manifest.extra.update(
        followed_gap=dict(sorted(gaps.items())),
        empty_responses=sum(not t.strip() for r in records for t in r["responses"]),
        samples_constraint_followed=round(sum(map(sum, every)) / max(1, sum(map(len, every))), 4),
        samples_all_followed=round(sum(all(c) for c in every) / max(1, len(every)), 4))
    return pairs, records, manifest


def sample_responses(policy: str, rows: Sequence[dict[str, Any]], samples: int, max_new_tokens: int,
                     temperature: float, batch_size: int, seed: int, cache: Path, dtype: str = "float32",
                     device: str = "cpu") -> list[list[str]]:
    """`samples` responses per row from the policy (its chat template), through one cached backend, so a
    stopped run resumes from the responses already drawn."""
    from patarm.backends import GenerationOptions, make_backend
    from patarm.demo.downstream.task import answer

    spec = {"kind": "hf", "model": policy, "dtype": dtype, **({} if device == "cpu" else {"device_map": device})}
    backend = make_backend(spec, GenerationOptions(max_new_tokens=max_new_tokens, temperature=temperature,
                                                   batch_size=batch_size),
                           cache=cache, name=f"policy samples ({cache.parent.name})")
    try:
        out = backend.generate([row["prompt"] for row in rows], samples, seed=seed)
    finally:
        backend.cache.close()
    return [[answer(t) for t in texts] for texts in out]
