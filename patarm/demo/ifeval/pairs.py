"""Preference pairs from the policy's own responses, labelled by the IFEval checkers: several sampled responses
per verifiable prompt, each checked constraint by constraint (strict, `patarm.verify.ifeval.check_response`);
the response that follows the most constraints is chosen, the one that follows the fewest rejected. A prompt
whose responses all follow the same number of constraints gives no pair (counted in the manifest, by why). An
empty response (the policy stopped at once) follows no constraint, but a pair cannot hold it: it is left out of
the candidates and counted (`empty_responses`).

`per_prompt` > 1 (0: no limit) takes more pairs from one prompt's samples at no sampling cost: every two distinct
responses that follow a different number of constraints, the widest gaps first — with 4 samples up to 6 pairs, and
up to twice as many distinct responses for a pointwise judge's corpus as one pair a prompt holds.
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


def label_pairs(rows: Sequence[dict[str, Any]], responses: Sequence[Sequence[str]], per_prompt: int = 1,
                ) -> tuple[list[PreferencePair], list[dict[str, Any]], Manifest]:
    """(pairs, per-prompt sample records, manifest): one pair per prompt whose responses differ in the number of
    constraints followed — chosen the first response with the most, rejected the first with the fewest; with
    `per_prompt` > 1 (0: all) also the other pairs of distinct responses that differ, widest gap first (ids
    `<prompt id>-p<k>` after the first)."""
    if len(rows) != len(responses):
        raise ValueError(f"{len(rows)} prompts but {len(responses)} response lists")
    if per_prompt < 0:
        raise ValueError(f"per_prompt must be >= 0 (0: every pair that differs), got {per_prompt}")
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
        for k, (hi, lo) in enumerate(_ranked(texts, candidates, counts, best, worst, per_prompt)):
            gaps[counts[hi] - counts[lo]] += 1
            pairs.append(PreferencePair(
                id=row["id"] if k == 0 else f"{row['id']}-p{k}", prompt=row["prompt"], chosen=texts[hi],
                rejected=texts[lo], domain=row["domain"], source=SOURCE,
                metadata={"ifeval": ifeval, "followed": [counts[hi], counts[lo]], "constraints": len(checks[hi])}))
        manifest.rows_out += 1  # prompts that gave pairs: each prompt in is either here or dropped, by why
    every = [c for r in records for c in r["followed"]]  # one list of verdicts per sampled response
    manifest.extra.update(
        pairs=len(pairs), pairs_per_prompt=per_prompt, followed_gap=dict(sorted(gaps.items())),
        empty_responses=sum(not t.strip() for r in records for t in r["responses"]),
        samples_constraint_followed=round(sum(map(sum, every)) / max(1, sum(map(len, every))), 4),
        samples_all_followed=round(sum(all(c) for c in every) / max(1, len(every)), 4))
    return pairs, records, manifest


def _ranked(texts: Sequence[str], candidates: list[int], counts: dict[int, int], best: int, worst: int,
            per_prompt: int) -> list[tuple[int, int]]:
    """(chosen, rejected) indices: (best, worst) first, then every other pair of distinct responses that follow a
    different number of constraints, widest gap first (then by position), up to `per_prompt` in all (0: all)."""
    out, seen = [(best, worst)], {frozenset((texts[best], texts[worst]))}
    if per_prompt == 1:
        return out
    others = sorted(((i, j) if counts[i] > counts[j] else (j, i) for n, i in enumerate(candidates)
                     for j in candidates[n + 1:] if counts[i] != counts[j]),
                    key=lambda ij: (counts[ij[1]] - counts[ij[0]], ij))
    for i, j in others:
        key = frozenset((texts[i], texts[j]))
        if texts[i] != texts[j] and key not in seen:
            seen.add(key)
            out.append((i, j))
    return out[:per_prompt] if per_prompt else out


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
