"""Eval harness overhead and adaptive-voting savings (a benchmark that prints figures; not a timed test).

    .venv/bin/python bench/eval_overhead.py [--items 48] [--max-new-tokens 32] [--batch-size 32]

1. eval_vs_generate_ratio: judged items/s of the harness (render → batched HFBackend generation through the
   cache → parse → records → metrics) divided by items/s of raw batched `model.generate` on the same
   rendered prompts, same batch size and generation length, with a tiny random Qwen3 on the CPU. Time is
   process CPU time on one torch thread (best of several interleaved rounds): on a shared, oversubscribed
   CPU, wall-clock time mostly measures the neighbours. The wall-clock ratio is printed as well.
2. adaptive_calls_saved / adaptive_accuracy_delta: pairwise JudgeBench judging (both orders, up to 8
   samples per order) replayed from a *recorded* set of judgments: a judgments cache filled beforehand,
   so fixed voting@8 and adaptive voting read the very same samples and the backend is never called.
   The recorded judgments are simulated (this machine has no trained judge): per pair, a judge accuracy
   drawn from an easy / medium / hard mixture, a small position bias and 10% ties or unparseable answers.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from patarm.backends import CachedBackend, GenerationCache  # noqa: E402
from patarm.eval import judgebench, registry  # noqa: E402
from patarm.eval.harness import judge_items  # noqa: E402
from patarm.eval.judging import JudgingPlan  # noqa: E402
from patarm.judge import load_template, render_pairwise, render_pointwise  # noqa: E402

WORDS = ("the answer explains each step clearly and checks the result against the question while a wrong "
         "answer skips a step or states an incorrect value with confidence").split()


def synthetic_rm_items(n: int, seed: int = 0) -> list[dict]:
    """RM-Bench-shaped items with short prompts/responses (the tiny model has 2,048 positions)."""
    rng = random.Random(seed)
    text = lambda k: " ".join(rng.choice(WORDS) for _ in range(k))  # noqa: E731
    return [{"id": i, "domain": "chat", "judge_domain": "chat", "prompt": [{"role": "user", "content": text(20)}],
             "candidates": [text(rng.randint(20, 90)) for _ in range(6)]} for i in range(n)]


def _clock() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    now = _clock()
    return now[0] - start[0], now[1] - start[1]


def time_harness(backend, items, batch_size: int) -> tuple[float, float]:
    """(CPU, wall) seconds for the harness to judge and score `items` pointwise (fresh in-memory cache)."""
    start = _clock()
    judged = judge_items("rmbench", items, CachedBackend(backend, None, progress=False),
                         JudgingPlan(template="pointwise-compact"))
    registry.get("rmbench").score([j.record for j in judged])
    return _since(start)


def time_raw_generate(model, tokenizer, items, batch_size: int, max_new_tokens: int) -> tuple[float, float]:
    """(CPU, wall) seconds for plain batched `model.generate` on the same rendered prompts, sorted by length."""
    import torch

    template = load_template("pointwise-compact")
    texts = [tokenizer.apply_chat_template(render_pointwise(it["prompt"], c, template, domain="chat"),
                                           tokenize=False, add_generation_prompt=True, enable_thinking=False)
             for it in items for c in it["candidates"]]
    texts.sort(key=len)
    start = _clock()
    with torch.no_grad():
        for k in range(0, len(texts), batch_size):
            enc = tokenizer(texts[k:k + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, top_k=None,
                                 pad_token_id=tokenizer.pad_token_id)
            tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return _since(start)


def overhead_ratio(n_items: int, max_new_tokens: int, batch_size: int, repeats: int = 3) -> float:
    """Harness items/s over raw generate items/s: best of `repeats` each, after a full warm-up round, in
    alternating order (on a shared CPU, whichever runs first in a pair is otherwise penalised)."""
    import torch

    from patarm.backends import GenerationOptions
    from patarm.backends.hf import HFBackend
    from patarm.models.tiny import build_tiny_judge

    torch.set_num_threads(1)  # CPU time of one thread: no spin-waiting pool threads in the accounting
    items = synthetic_rm_items(n_items)
    corpus = [c for it in items for c in it["candidates"]] + ["<eval>ok</eval>\n<score>7</score>"] * 20
    model, tokenizer = build_tiny_judge(corpus, vocab_size=600)
    backend = HFBackend(model, tokenizer, GenerationOptions(max_new_tokens=max_new_tokens, batch_size=batch_size))
    run_raw = lambda: time_raw_generate(model, tokenizer, items, batch_size, max_new_tokens)  # noqa: E731
    run_harness = lambda: time_harness(backend, items, batch_size)  # noqa: E731
    run_raw(), run_harness()  # warm-up: allocator, kernels, thread pools
    harness, raw = [], []
    for k in range(repeats):
        for fn, times in ((run_raw, raw), (run_harness, harness))[:: 1 if k % 2 else -1]:
            times.append(fn())
    cpu = min(r[0] for r in raw) / min(h[0] for h in harness)
    wall = min(r[1] for r in raw) / min(h[1] for h in harness)
    print(f"harness {n_items / min(h[0] for h in harness):.2f} items/CPU-s, raw generate "
          f"{n_items / min(r[0] for r in raw):.2f} items/CPU-s ({6 * n_items} judgments of {max_new_tokens} new "
          f"tokens, batch {batch_size}, best of {repeats}); wall-clock ratio {wall:.3f}")
    return cpu


def judgebench_items(n: int = 350, seed: int = 0) -> list[dict]:
    """Real JudgeBench pairs when ../shared/benchmarks is present, else synthetic pairs of the same shape."""
    path = ROOT.parent / "shared" / "benchmarks" / "judgebench"
    if path.is_dir():
        return judgebench.load(path)
    rng = random.Random(seed)
    sources = ["mmlu-pro-law", "livebench-reasoning", "livebench-math", "livecodebench"]
    return [judgebench.to_item({"pair_id": f"p{i}", "question": f"q{i}", "response_A": f"a{i}", "response_B": f"b{i}",
                                "label": rng.choice(["A>B", "B>A"]), "source": rng.choice(sources)})
            for i in range(n)]


def _decision(rng: random.Random, p_correct: float, label_first: bool, bias: float) -> str:
    """One simulated verdict, in the presented order; `label_first`: the better response is shown as A."""
    u = rng.random()
    if u < 0.10:
        return rng.choice(["tie", "garbled"])
    p_a = (p_correct if label_first else 1 - p_correct) + bias
    return "A" if rng.random() < p_a else "B"


class NoBackend:
    """A backend that was 'recorded': every judgment must come from the cache."""

    model_id = "recorded"

    def sampling(self):
        return {"temperature": 1.0}

    def generate(self, *args, **kwargs):
        raise AssertionError("a replay must read every judgment from the recorded cache")


def record_judgments(items: list[dict], n: int, path: Path, seed: int = 0) -> GenerationCache:
    """A judgment cache holding n simulated pairwise samples per order for every item, under the keys the
    harness draws them by (sample k with seed 0 + k)."""
    rng = random.Random(seed)
    template, cache = load_template("pairwise"), GenerationCache(path, durable=False)
    keyer, rows = CachedBackend(NoBackend(), None, progress=False), []
    for it in items:
        p = rng.choices([rng.betavariate(18, 2), rng.betavariate(6, 4), rng.betavariate(3, 7)], [0.6, 0.25, 0.15])[0]
        a, b = it["candidates"]
        ab = render_pairwise(it["prompt"], a, b, template, domain=it["judge_domain"])
        ba = render_pairwise(it["prompt"], b, a, template, domain=it["judge_domain"])
        a_better = it["label"] == "A>B"
        for k in range(n):
            for messages, first_better in ((ab, a_better), (ba, not a_better)):
                d = _decision(rng, p, first_better, bias=0.05)
                rows.append(
                    (keyer._key(messages, k, k), f"<rubric>1. c</rubric>\n<eval>e</eval>\n<decision>{d}</decision>")
                )
    cache.put_many(rows)
    return cache


def replay(items, cache, voting: str, n: int, confidence: float = 1.0) -> tuple[float, int]:
    """(JudgeBench overall accuracy, judge calls used) for one voting rule over the recorded judgments."""
    backend = CachedBackend(NoBackend(), cache, progress=False)
    judged = judge_items("judgebench", items, backend, JudgingPlan(mode="pairwise", num_samples=n, voting=voting,
                                                                   confidence=confidence))
    return judgebench.score([j.record for j in judged])["overall"], backend.stats.used


def adaptive_figures(n: int = 8, confidence: float = 0.97) -> dict[str, float]:
    import tempfile

    items = judgebench_items()
    cache = record_judgments(items, n, Path(tempfile.mkdtemp()) / "recorded.sqlite")
    fixed_acc, fixed_calls = replay(items, cache, "majority", n)
    out = {"items": len(items), "fixed_accuracy": fixed_acc, "fixed_calls": fixed_calls}
    for name, conf in (("exact", 1.0), ("confident", confidence)):
        acc, calls = replay(items, cache, "adaptive", n, conf)
        out[f"{name}_saved"] = 1 - calls / fixed_calls
        out[f"{name}_delta"] = acc - fixed_acc
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=48)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--confidence", type=float, default=0.97, help="adaptive rule reported in the summary")
    args = parser.parse_args()
    ratio = overhead_ratio(args.items, args.max_new_tokens, args.batch_size)
    fig = adaptive_figures(8, args.confidence)
    print(f"JudgeBench pairwise, {fig['items']} pairs, recorded (simulated) judgments: voting@8 accuracy "
          f"{fig['fixed_accuracy']:.2f} with {fig['fixed_calls']} calls")
    print(f"adaptive exact rule (outcome cannot change): calls saved {fig['exact_saved']:.3f}, "
          f"accuracy delta {fig['exact_delta']:+.2f} points")
    print(f"adaptive confidence {args.confidence}: calls saved {fig['confident_saved']:.3f}, "
          f"accuracy delta {fig['confident_delta']:+.2f} points")
    print(f"eval_vs_generate_ratio={ratio:.3f}")
    print(f"adaptive_calls_saved={fig['confident_saved']:.3f}")
    print(f"adaptive_accuracy_delta={fig['confident_delta']:.2f}")


if __name__ == "__main__":
    main()
