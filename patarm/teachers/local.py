"""Teachers that run a model in this process: transformers (`HFTeacher`) and vLLM offline (`VLLMTeacher`).

Both generate in chunks of prompts and cache every finished chunk on disk (when given a cache), so a
long labelling run that is interrupted resumes at the first unfinished chunk.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any, Sequence

from patarm.teachers.base import Messages, cached_generate
from patarm.teachers.cache import TeacherCache, open_cache


class HFTeacher:
    """A transformers model through `patarm.judge.backends.HFBackend` (batched, length-sorted)."""

    def __init__(self, backend: Any, *, cache: TeacherCache | str | os.PathLike | None = None,
                 model_id: str | None = None, chunk_size: int = 256):
        self.backend, self.cache, self.chunk_size = backend, open_cache(cache), chunk_size
        self.model_id = model_id or getattr(backend.model.config, "_name_or_path", None) or "hf-model"

    @classmethod
    def from_pretrained(cls, path: str, options: Any = None, *, cache: Any = None, chunk_size: int = 256,
                        **model_kwargs: Any) -> "HFTeacher":
        from patarm.judge.backends import GenerationOptions, HFBackend

        if isinstance(options, dict):
            options = GenerationOptions(**options)
        return cls(HFBackend.from_pretrained(path, options, **model_kwargs), cache=cache, model_id=path,
                   chunk_size=chunk_size)

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None) -> list[list[str]]:
        params = asdict(self.backend.options)
        params.pop("batch_size", None)  # batching does not change the completions
        return cached_generate(prompts, num_samples, seed, run=self.backend.generate, model_id=self.model_id,
                               params=params, cache=self.cache, chunk_size=self.chunk_size,
                               desc=f"teacher {self.model_id}")


class VLLMTeacher:
    """vLLM offline inference (`LLM.chat`) on local GPUs. vLLM is imported only when this is built."""

    def __init__(self, model: str, *, temperature: float = 0.0, top_p: float = 1.0, max_tokens: int = 2048,
                 cache: TeacherCache | str | os.PathLike | None = None, chunk_size: int = 4096,
                 llm: Any = None, **llm_kwargs: Any):
        try:
            import vllm
        except ImportError as err:
            raise ImportError(
                "VLLMTeacher needs vLLM, which is GPU-only and not installed: `pip install 'patarm[vllm]'` on a "
                "GPU machine, or serve the model with `vllm serve` and use the OpenAI-compatible teacher "
                "(kind: openai)."
            ) from err
        self._vllm = vllm
        self.model_id, self.cache, self.chunk_size = model, open_cache(cache), chunk_size
        self.params = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
        # `llm` lets a caller share one engine between teachers (loading a 72B model takes minutes).
        self.llm = llm if llm is not None else vllm.LLM(model=model, **llm_kwargs)

    def _run(self, prompts: list[Messages], num_samples: int, seed: int | None) -> list[list[str]]:
        sampling = self._vllm.SamplingParams(n=num_samples, seed=seed, **self.params)
        outputs = self.llm.chat(prompts, sampling, use_tqdm=False)
        return [[c.text for c in out.outputs] for out in outputs]

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None) -> list[list[str]]:
        return cached_generate(prompts, num_samples, seed, run=self._run, model_id=self.model_id,
                               params=self.params, cache=self.cache, chunk_size=self.chunk_size,
                               desc=f"teacher {self.model_id}")
