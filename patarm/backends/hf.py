"""A local transformers causal LM as a backend: batched generation (prompts that start alike prefilled once,
`patarm.backends.prefix`; batches of like length to limit padding) and tool-calling chat turns through the model's
own chat template."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from patarm.backends.base import TOOL_CALL_RE, AssistantTurn, GenerationOptions, OnResult, parse_tool_calls
from patarm.data.schema import Messages


class HFBackend:
    """Generation with a transformers model and its tokenizer (left padding)."""

    def __init__(self, model: Any, tokenizer: Any, options: GenerationOptions | None = None,
                 model_id: str | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.options = options or GenerationOptions()
        self.model_id = model_id or getattr(getattr(model, "config", None), "_name_or_path", None) or "hf-model"
        if tokenizer.pad_token_id is None:  # batches need one: the training stages' rule picks it
            from patarm.models import ensure_pad_token

            ensure_pad_token(tokenizer, self.model_id)
        if tokenizer.pad_token_id is None:
            raise ValueError(f"{self.model_id}: the tokenizer has no pad token and no token to pad with")
        from patarm.models.attention import install_cpu_decode_attention

        install_cpu_decode_attention()

    @classmethod
    def from_pretrained(cls, spec: str, options: GenerationOptions | None = None, **model_kwargs: Any) -> HFBackend:
        """Load a model spec (a folder, a hub id, or any spec `patarm.models` resolves)."""
        from patarm.models import load_causal_lm

        model, tokenizer = load_causal_lm(spec, **model_kwargs)
        return cls(model.eval(), tokenizer, options, model_id=spec)

    @functools.cached_property
    def cache_id(self) -> str:
        """What a generation cache keys this model on (`model_cache_id`: a saved folder's content hash), computed
        when a cache first asks."""
        from patarm.backends.cache import model_cache_id

        return model_cache_id(self.model_id)

    def sampling(self) -> dict[str, Any]:
        return self.options.sampling()

    def render(self, messages: Messages) -> str:
        """The prompt text of chat `messages`, ready for generation."""
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                  enable_thinking=self.options.enable_thinking)

    def generate(self, prompts: Sequence[Messages], num_samples: int = 1, seed: int | None = None,
                 metadata: Sequence[dict] | None = None, on_result: OnResult | None = None) -> list[list[str]]:
        """`num_samples` completions for each prompt (greedy when temperature is 0)."""
        import torch

        from patarm.backends.prefix import generate_batch, plan_batches

        texts = [self.render(p) for p in prompts]
        tokens = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        jobs = [(i, s) for i in range(len(texts)) for s in range(num_samples)]
        out: list[list[str | None]] = [[None] * num_samples for _ in texts]
        if seed is not None:
            torch.manual_seed(seed)
        opts = self.options
        sample = opts.temperature > 0
        job_tokens = [tokens[i] for i, _ in jobs]
        drop = opts.drop_finished_every
        drop = (16 if self.model.device.type == "cpu" else 0) if drop is None else drop
        for batch in plan_batches(job_tokens, opts.batch_size, share=opts.share_prefixes):
            with torch.no_grad():
                rows, new = generate_batch(
                    self.model, job_tokens, batch, self.tokenizer.pad_token_id, drop_every=drop,
                    max_new_tokens=opts.max_new_tokens,
                    do_sample=sample, temperature=opts.temperature if sample else None,
                    top_p=opts.top_p if sample else None, top_k=None,
                )
            completions = self.tokenizer.batch_decode(new, skip_special_tokens=True)
            done = [(*jobs[r], c) for r, c in zip(rows, completions)]
            for i, s, c in done:
                out[i][s] = c
            if on_result is not None:
                on_result(done)
        return out  # type: ignore[return-value]

    def chat_turn(self, messages: list[dict], tools: list[dict], force: str | None = None) -> AssistantTurn:
        """One assistant turn that may call `tools` (JSON schemas); `force` opens a call to that tool."""
        import torch

        text = self.tokenizer.apply_chat_template(messages, tools=[{"type": "function", "function": t} for t in tools],
                                                  tokenize=False, add_generation_prompt=True)
        if force:  # no constrained decoding here: open the forced call so the model completes it
            text += f'<tool_call>\n{{"name": "{force}", "arguments": '
        enc = self.tokenizer(text, return_tensors="pt", add_special_tokens=False).to(self.model.device)
        opts = self.options
        sample = opts.temperature > 0
        with torch.no_grad():
            out = self.model.generate(**enc, max_new_tokens=opts.max_new_tokens, do_sample=sample,
                                      temperature=opts.temperature if sample else None, top_p=None, top_k=None,
                                      pad_token_id=self.tokenizer.pad_token_id)
        completion = self.tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        if force:
            completion = f'<tool_call>\n{{"name": "{force}", "arguments": ' + completion
        return AssistantTurn(TOOL_CALL_RE.sub("", completion).strip(), parse_tool_calls(completion))
