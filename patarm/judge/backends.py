"""Generation backends for judges. `HFBackend` runs any local transformers causal LM in batches.

Backends take chat messages and return completion texts, so the same judge code runs on a local
model, on vLLM, or on an OpenAI-compatible endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

Messages = list[dict[str, str]]


@dataclass
class GenerationOptions:
    max_new_tokens: int = 512
    temperature: float = 0.0  # 0 → greedy
    top_p: float = 1.0
    batch_size: int = 32
    enable_thinking: bool = False


class HFBackend:
    """Batched generation with a transformers model; prompts are sorted by length to limit padding."""

    def __init__(self, model: Any, tokenizer: Any, options: GenerationOptions | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.options = options or GenerationOptions()
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; set tokenizer.pad_token before judging")

    @classmethod
    def from_pretrained(cls, path: str, options: GenerationOptions | None = None, **model_kwargs: Any) -> "HFBackend":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(path, **model_kwargs)
        return cls(model.eval(), tokenizer, options)

    def render(self, messages: Messages) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                  enable_thinking=self.options.enable_thinking)

    @torch.no_grad()
    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None) -> list[list[str]]:
        """`num_samples` completions for each prompt (greedy when temperature is 0)."""
        texts = [self.render(p) for p in prompts]
        jobs = [(i, t) for i, t in enumerate(texts) for _ in range(num_samples)]
        jobs.sort(key=lambda job: len(job[1]))
        out: list[list[str]] = [[] for _ in texts]
        if seed is not None:
            torch.manual_seed(seed)
        opts = self.options
        sample = opts.temperature > 0
        padding_side = self.tokenizer.padding_side
        self.tokenizer.padding_side = "left"
        try:
            for start in range(0, len(jobs), opts.batch_size):
                batch = jobs[start:start + opts.batch_size]
                enc = self.tokenizer([t for _, t in batch], return_tensors="pt", padding=True,
                                     add_special_tokens=False).to(self.model.device)
                gen = self.model.generate(
                    **enc, max_new_tokens=opts.max_new_tokens, do_sample=sample,
                    temperature=opts.temperature if sample else None, top_p=opts.top_p if sample else None,
                    top_k=None, pad_token_id=self.tokenizer.pad_token_id,
                )
                completions = self.tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
                for (i, _), c in zip(batch, completions):
                    out[i].append(c)
        finally:
            self.tokenizer.padding_side = padding_side
        return out
