"""Teacher backends behind one interface: `generate(prompts, num_samples, seed, metadata) -> texts`.

* `OpenAITeacher` — any OpenAI-compatible HTTP endpoint; async, bounded concurrency, retries, cache.
* `HFTeacher`     — a local transformers model (batched), cached per chunk.
* `VLLMTeacher`   — vLLM offline on local GPUs (optional import), cached per chunk.
* `RuleTeacher`   — the rule-verifiable synthetic task, for CPU runs and tests.

`make_teacher(spec)` builds one from a config mapping such as
{"kind": "openai", "model": "Qwen/Qwen2.5-72B-Instruct", "base_url": "http://host:8000/v1"}.
"""

from __future__ import annotations

import os
from typing import Any

from patarm.teachers.base import Teacher, TeacherError, cached_generate
from patarm.teachers.cache import TeacherCache, cache_key
from patarm.teachers.local import HFTeacher, VLLMTeacher
from patarm.teachers.openai import OpenAITeacher
from patarm.teachers.rule import RuleTeacher

KINDS = ("openai", "hf", "vllm", "rule")

__all__ = ["Teacher", "TeacherError", "TeacherCache", "cache_key", "cached_generate", "OpenAITeacher",
           "HFTeacher", "VLLMTeacher", "RuleTeacher", "make_teacher", "KINDS"]


def make_teacher(spec: dict[str, Any], cache_dir: str | os.PathLike | None = None, name: str = "teacher") -> Any:
    """A teacher from a config mapping: `kind` plus that class's keyword arguments.

    Model-backed teachers cache to `cache` when the spec names one, else to `cache_dir/<name>.sqlite`.
    For kind "hf", `model` is a local path or hub id and `generation` holds GenerationOptions fields.
    """
    spec = dict(spec)
    kind = spec.pop("kind", None)
    if kind not in KINDS:
        raise ValueError(f"teacher {name!r}: kind must be one of {KINDS}, got {kind!r}")
    if kind == "rule":
        return RuleTeacher(**spec)
    if "cache" not in spec and cache_dir is not None:
        spec["cache"] = os.path.join(cache_dir, f"{name}.sqlite")
    model = spec.pop("model", None)
    if not model:
        raise ValueError(f"teacher {name!r} ({kind}): `model` is required")
    if kind == "openai":
        return OpenAITeacher(model, **spec)
    if kind == "vllm":
        return VLLMTeacher(model, **spec)
    return HFTeacher.from_pretrained(model, spec.pop("generation", None), **spec)
