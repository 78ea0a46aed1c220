"""Backends behind one interface as teachers: rule, local transformers (tiny model), vLLM glue, the cache
wrapper, the factory."""

from __future__ import annotations

import sys
import types

import pytest

from patarm.backends import BackendError, CachedBackend, GenerationCache, GenerationOptions, make_backend
from patarm.backends.hf import HFBackend
from patarm.backends.vllm import VLLMBackend
from patarm.demo.synthetic import make_pairs
from patarm.demo.teacher import RuleTeacher
from patarm.judge import parse_judgment, render_pairwise, render_pointwise

PAIRS = make_pairs(12, seed=3)


def side_prompts(pairs):
    prompts = [render_pointwise(p.prompt, getattr(p, s)) for p in pairs for s in ("chosen", "rejected")]
    return prompts, [{"pair": p, "side": s} for p in pairs for s in ("chosen", "rejected")]


def test_rule_teacher_pointwise_pairwise_and_errors():
    prompts, meta = side_prompts(PAIRS)
    texts = RuleTeacher().generate(prompts, num_samples=2, metadata=meta)
    scores = [[parse_judgment(t).score for t in ts] for ts in texts]
    assert all(c[0] > r[0] for c, r in zip(scores[::2], scores[1::2]))
    pair_prompts = [render_pairwise(p.prompt, p.rejected, p.chosen) for p in PAIRS]
    decisions = RuleTeacher().generate(pair_prompts, metadata=[{"pair": p, "swapped": True} for p in PAIRS])
    assert {parse_judgment(t[0], "pairwise").decision for t in decisions} == {"B"}
    noisy = RuleTeacher(error_rate=0.5, seed=1)
    once, again = noisy.generate(prompts, 4, metadata=meta), noisy.generate(prompts, 4, metadata=meta)
    assert once == again and once != texts  # seeded: the same call always gets the same answer
    with pytest.raises(BackendError, match="metadata"):
        RuleTeacher().generate(prompts)
    plain = PAIRS[0].__class__(id="x", prompt=PAIRS[0].prompt, chosen="a", rejected="b")
    with pytest.raises(BackendError, match="synthetic"):
        RuleTeacher().generate(prompts[:1], metadata=[{"pair": plain, "side": "chosen"}])


class CountingBackend:
    """A backend stand-in that counts the prompts it is asked to complete."""

    model_id = "counting"

    def __init__(self):
        self.calls = 0

    def sampling(self):
        return {"temperature": 1.0}

    def generate(self, prompts, num_samples=1, seed=None, metadata=None, on_result=None):
        self.calls += len(prompts)
        return [[f"{p[-1]['content'][:6]}#{s}" for s in range(num_samples)] for p in prompts]


def test_cached_backend_caches_per_chunk(tmp_path):
    backend = CountingBackend()
    prompts = [[{"role": "user", "content": f"prompt {i}"}] for i in range(10)]
    teacher = CachedBackend(backend, tmp_path / "c.sqlite", chunk_size=3, progress=False)
    first = teacher.generate(prompts[:4], num_samples=2)
    assert backend.calls == 4 and len(GenerationCache(tmp_path / "c.sqlite")) == 8
    texts = teacher.generate(prompts, num_samples=2)  # only the 6 new prompts are generated
    assert backend.calls == 10 and texts[:4] == first and texts[9] == ["prompt#0", "prompt#1"]
    assert teacher.stats.cached == 8 and teacher.stats.generated == 20


def test_hf_teacher_with_a_tiny_local_model(tmp_path):
    from patarm.models.tiny import build_tiny_judge

    model, tokenizer = build_tiny_judge(["judge the response <score>5</score>"] * 8, vocab_size=300)
    teacher = CachedBackend(HFBackend(model, tokenizer, GenerationOptions(max_new_tokens=6), model_id="tiny"),
                            tmp_path / "c.sqlite", progress=False)
    prompts, meta = side_prompts(PAIRS[:2])
    texts = teacher.generate(prompts, num_samples=1, metadata=meta)
    assert len(texts) == 4 and all(len(t) == 1 and isinstance(t[0], str) for t in texts)
    assert teacher.generate(prompts) == texts


def test_vllm_teacher_needs_vllm_and_uses_llm_chat(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(ImportError, match="OpenAI-compatible"):
        VLLMBackend("some/model")
    seen = {}

    class FakeLLM:
        def __init__(self, model, **kwargs):
            seen["model"] = model

        def chat(self, prompts, sampling, use_tqdm=False, chat_template_kwargs=None):
            seen["n"] = sampling.n
            out = types.SimpleNamespace
            return [out(outputs=[out(text=f"{p[-1]['content']}-{i}") for i in range(sampling.n)]) for p in prompts]

    fake = types.SimpleNamespace(LLM=FakeLLM, SamplingParams=lambda **kw: types.SimpleNamespace(**kw))
    monkeypatch.setitem(sys.modules, "vllm", fake)
    teacher = make_backend({"kind": "vllm", "model": "some/model", "tensor_parallel_size": 1},
                           cache=tmp_path / "v.sqlite", progress=False)
    texts = teacher.generate([[{"role": "user", "content": "q"}]], num_samples=3, seed=1)
    assert texts == [["q-0", "q-1", "q-2"]] and seen == {"model": "some/model", "n": 3}


def test_make_backend(tmp_path):
    assert isinstance(make_backend({"kind": "rule", "error_rate": 0.1}), RuleTeacher)
    teacher = make_backend({"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"},
                           cache=tmp_path / "judge.sqlite")
    assert teacher.cache.path == tmp_path / "judge.sqlite" and teacher.backend.url.endswith("/v1/chat/completions")
    with pytest.raises(ValueError, match="kind"):
        make_backend({"kind": "gpt"})
    with pytest.raises(ValueError, match="model"):
        make_backend({"kind": "openai"})


def test_the_cache_keys_a_saved_model_on_its_content_not_its_path(tmp_path):
    """The same weights under another path (a run that links or copies another run's judge) find their completions;
    new weights saved under the same path do not find the old ones."""
    import json
    import shutil

    import torch

    from patarm.backends.cache import model_cache_id
    from patarm.models.tiny import build_tiny_judge

    model, tokenizer = build_tiny_judge(["judge the response <score>5</score>"] * 8, vocab_size=300)
    first = tmp_path / "run-a" / "sft"
    model.save_pretrained(first)
    tokenizer.save_pretrained(first)
    copy = shutil.copytree(first, tmp_path / "run-b" / "sft")
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "_name_or_path": "elsewhere"}))  # where it came from
    (copy / "trainer_state.json").write_text("{}")  # a training artifact: not what it generates
    assert model_cache_id(str(first)) == model_cache_id(str(copy)) and model_cache_id(str(first)).startswith("sha256:")
    assert model_cache_id("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"

    prompts, meta = side_prompts(PAIRS[:2])
    opts = GenerationOptions(max_new_tokens=6, temperature=1.0)

    def generate(folder):
        judge = make_backend({"kind": "hf", "model": str(folder)}, opts, cache=tmp_path / "c.sqlite", progress=False)
        texts = judge.generate(prompts, num_samples=2, seed=3, metadata=meta)
        judge.cache.close()
        return texts, judge.stats

    texts, stats = generate(first)
    assert stats.generated == 8 and stats.cached == 0
    again, stats = generate(copy)  # another path, the same model: every completion from the cache
    assert again == texts and stats.generated == 0 and stats.cached == 8
    with torch.no_grad():
        model.lm_head.weight.add_(0.5)
    model.save_pretrained(copy)  # retrained in place: the old completions are not its own
    _, stats = generate(copy)
    assert stats.generated == 8 and stats.cached == 0
