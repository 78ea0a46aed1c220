"""Generation backends behind one interface (`patarm.backends.base.Backend`), and one cache.

* `HFBackend`     — a local transformers model (batched; also tool-calling chat turns).
* `VLLMBackend`   — vLLM offline on local GPUs (optional; imported only when used).
* `OpenAIBackend` — any OpenAI-compatible HTTP endpoint (concurrent, retries; tool calls).
* `CachedBackend` — any of them behind a `GenerationCache` (SQLite, stored as completions finish).
* the rule teacher of the bundled demo task (`kind: rule`), and any `module:Class` of your own.

`make_backend(spec)` builds one from a model spec string or a config mapping.
"""

from __future__ import annotations

import os
from dataclasses import fields
from typing import Any

from patarm.backends.base import (
    AssistantTurn,
    Backend,
    BackendError,
    GenerationOptions,
    ToolCall,
    parse_tool_calls,
)
from patarm.backends.cache import CachedBackend, GenerationCache, cache_key
from patarm.config import import_object

__all__ = ["AssistantTurn", "Backend", "BackendError", "CachedBackend", "GenerationCache", "GenerationOptions",
           "KINDS", "ToolCall", "cache_key", "make_backend", "parse_tool_calls"]

# kind -> "module:Class". Strings, not imports: a kind's module is imported only when it is used.
KINDS = {
    "hf": "patarm.backends.hf:HFBackend",
    "vllm": "patarm.backends.vllm:VLLMBackend",
    "openai": "patarm.backends.openai:OpenAIBackend",
    "rule": "patarm.demo.teacher:RuleTeacher",  # the bundled demo task's rule-backed teacher (CPU runs, tests)
}
_OPTION_FIELDS = {f.name for f in fields(GenerationOptions)}


def _import(target: str) -> Any:
    return import_object(target, "backend kind", f"; known kinds: {sorted(KINDS)}")


def parse_spec(spec: str) -> dict[str, Any]:
    """A model spec string as a config mapping: `http(s)://host:port/v1#MODEL` (an OpenAI-compatible
    endpoint), `vllm:PATH_OR_ID`, or anything `patarm.models` resolves (a folder, a hub id, `tiny`...)."""
    if spec.startswith(("http://", "https://")):
        url, _, name = spec.partition("#")
        if not name:
            raise ValueError(f"model {spec!r}: name the served model after '#', e.g. "
                             "http://127.0.0.1:8000/v1#Qwen/Qwen3-8B")
        return {"kind": "openai", "model": name, "base_url": url}
    if spec.startswith("vllm:"):
        return {"kind": "vllm", "model": spec[len("vllm:"):]}
    return {"kind": "hf", "model": spec}


def make_backend(spec: str | dict[str, Any], options: GenerationOptions | None = None, *,
                 cache: GenerationCache | str | os.PathLike | None = None, progress: bool = True,
                 name: str = "backend") -> Any:
    """A backend from a spec string or mapping (`kind` plus that class's keyword arguments).

    `options` gives the sampling settings of a spec string (a mapping may set them inline). Model-backed
    backends are wrapped in a `CachedBackend` (caching to `cache` when given, else only counting).
    """
    spec = parse_spec(spec) if isinstance(spec, str) else dict(spec)
    kind = spec.pop("kind", None)
    # HTTP calls are stored one by one as they finish: no need to chunk (it would idle workers at chunk ends)
    chunk_size = spec.pop("chunk_size", {"openai": 1 << 30, "vllm": 4096}.get(kind, 256))
    if not kind:
        raise ValueError(f"{name}: a backend spec needs a `kind` ({sorted(KINDS)} or 'module:Class')")
    cls = _import(KINDS.get(kind, kind))
    if kind == "rule" or (kind not in KINDS and "model" not in spec):
        return cls(**spec)  # rule-like backends: cheap and deterministic, nothing to cache
    model = spec.pop("model", None)
    if not model:
        raise ValueError(f"{name} ({kind}): `model` is required")
    inline = {k: spec.pop(k) for k in list(spec) if k in _OPTION_FIELDS}
    if kind == "openai":
        opts = options or GenerationOptions()
        spec.setdefault("temperature", inline.get("temperature", opts.temperature))
        spec.setdefault("top_p", inline.get("top_p", opts.top_p))
        spec.setdefault("max_tokens", inline.get("max_new_tokens", opts.max_new_tokens))
        spec.setdefault("progress", False)
        backend = cls(model, **spec)
    else:
        opts = GenerationOptions(**{**(vars(options) if options else {}), **inline})
        backend = cls.from_pretrained(model, opts, **spec) if kind == "hf" else cls(model, opts, **spec)
    return CachedBackend(backend, cache, chunk_size=chunk_size, progress=progress, desc=name)
