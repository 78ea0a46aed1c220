"""vLLM offline inference (`LLM.chat`) on local GPUs as a backend. vLLM is imported only when one is built."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from patarm.backends.base import GenerationOptions, OnResult
from patarm.data.schema import Messages


class VLLMBackend:
    """Chat completions from a vLLM engine; `llm` lets callers share one engine (loading takes minutes)."""

    def __init__(self, model: str, options: GenerationOptions | None = None, *, llm: Any = None, **llm_kwargs: Any):
        try:
            import vllm
        except ImportError as err:
            raise ImportError(
                "the vLLM backend needs vLLM, which is GPU-only and not installed: `pip install 'patarm[vllm]'` on a "
                "GPU machine, or serve the model with `vllm serve` and use the OpenAI-compatible backend "
                "(`http://host:port/v1#MODEL`)."
            ) from err
        self._vllm = vllm
        self.model_id = model
        self.options = options or GenerationOptions()
        self.llm = llm if llm is not None else vllm.LLM(model=model, **llm_kwargs)

    @functools.cached_property
    def cache_id(self) -> str:
        """What a generation cache keys this model on (`model_cache_id`), computed when a cache first asks."""
        from patarm.backends.cache import model_cache_id

        return model_cache_id(self.model_id)

    def sampling(self) -> dict[str, Any]:
        return self.options.sampling()

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None, on_result: OnResult | None = None) -> list[list[str]]:
        opts = self.options
        params = self._vllm.SamplingParams(n=num_samples, seed=seed, temperature=opts.temperature, top_p=opts.top_p,
                                           max_tokens=opts.max_new_tokens)
        outputs = self.llm.chat(list(prompts), params, use_tqdm=False,
                                chat_template_kwargs={"enable_thinking": opts.enable_thinking})
        texts = [[c.text for c in out.outputs] for out in outputs]
        if on_result is not None:
            on_result([(i, s, t) for i, row in enumerate(texts) for s, t in enumerate(row)])
        return texts
