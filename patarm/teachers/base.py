"""The teacher interface and the cached, chunked generation loop that local backends share.

A teacher is anything with

    generate(prompts: list[messages], num_samples=1, seed=None, metadata=None) -> list[list[str]]

returning `num_samples` completion texts per prompt, in prompt order. `metadata[i]` is optional
per-prompt context (e.g. {"pair": PreferencePair, "side": "chosen"}) that only rule-based teachers
read; model-backed teachers ignore it. `patarm.judge.backends.HFBackend` fits the same shape.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

from tqdm.auto import tqdm

from patarm.teachers.cache import TeacherCache, cache_key

Messages = list[dict[str, str]]


class TeacherError(RuntimeError):
    """A teacher could not produce completions (gave up after retries, bad request, missing metadata)."""


class Teacher(Protocol):
    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None) -> list[list[str]]: ...


RunChunk = Callable[[list[Messages], int, "int | None"], list[list[str]]]


def cached_generate(prompts: Sequence[Messages], num_samples: int, seed: int | None, *, run: RunChunk,
                    model_id: str, params: dict[str, Any], cache: TeacherCache | None, chunk_size: int,
                    desc: str = "teacher") -> list[list[str]]:
    """Generate through `run(prompts, num_samples, seed)` in chunks of prompts, skipping prompts whose
    samples are all cached and caching each finished chunk, so a killed run loses at most one chunk."""
    params = {**params, "seed": seed}
    keys = [[cache_key(model_id, p, params, s) for s in range(num_samples)] for p in prompts]
    found = cache.get_many(k for ks in keys for k in ks) if cache is not None else {}
    out: list[list[str] | None] = [[found[k] for k in ks] if all(k in found for k in ks) else None for ks in keys]
    todo = [i for i, texts in enumerate(out) if texts is None]
    with tqdm(total=len(prompts), initial=len(prompts) - len(todo), desc=desc, unit="prompt",
              disable=len(todo) == 0) as bar:
        for start in range(0, len(todo), chunk_size):
            chunk = todo[start:start + chunk_size]
            texts = run([prompts[i] for i in chunk], num_samples, seed)
            if len(texts) != len(chunk) or any(len(t) != num_samples for t in texts):
                raise TeacherError(f"{desc}: backend returned {len(texts)} prompts' completions for {len(chunk)}")
            if cache is not None:
                cache.put_many(((keys[i][s], t[s]) for i, t in zip(chunk, texts) for s in range(num_samples)),
                               model=model_id)
            for i, t in zip(chunk, texts):
                out[i] = list(t)
            bar.update(len(chunk))
    return out  # type: ignore[return-value]
