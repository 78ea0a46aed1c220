"""Teacher-judged corpora from preference pairs (PaTaRM Appendix C).

- pointwise SFT corpus: the teacher scores chosen and rejected separately; a pair is kept when the
  score margin exceeds `min_margin` (the paper: 2) and both judgments become SFT rows;
- pairwise SFT corpus: teacher A/B decisions kept only where they agree with the label;
- RL set: the judge is rolled out n times per side; rollout i is correct when the i-th chosen score
  beats the i-th rejected score (both valid); a pair is kept when its correct rate is in [low, high], or
  (`keep_rewards`) when GRPO's other rewards score one side's rollouts unequally.

A teacher is any `patarm.backends` backend (local transformers, vLLM, an HTTP endpoint, or the demo's
rule teacher); `metadata` tells rule-based teachers which pair and side a prompt is about. `render` builds
each judge prompt from (pair, response, template) — by default the template alone; a recipe may pass its
own (e.g. a skill prompt with the pair's per-sample resources mounted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from patarm.data.schema import Manifest, PreferencePair
from patarm.judge import load_template, parse_judgment, render_pairwise, render_pointwise
from patarm.judge.templates import JudgeTemplate

Render = Callable[[PreferencePair, str, JudgeTemplate], list]  # (pair, response, template) -> chat messages


def template_prompt(pair: PreferencePair, response: str, template: JudgeTemplate) -> list:
    """The default judge prompt of one side: the template rendered with the pair's prompt and domain."""
    return render_pointwise(pair.prompt, response, template, domain=pair.domain)


def _side_metadata(pairs: Sequence[PreferencePair]) -> list[dict]:
    return [{"pair": p, "side": s} for p in pairs for s in ("chosen", "rejected")]


def pointwise_corpus(pairs: Sequence[PreferencePair], teacher: Any, template: JudgeTemplate | str | None = None,
                     min_margin: float = 2.0, seed: int | None = None,
                     render: Render = template_prompt) -> tuple[list[dict], Manifest]:
    """SFT rows (judge prompt + teacher judgment) for pairs whose teacher margin is > `min_margin`."""
    template = load_template(template or "pointwise")
    prompts = [render(p, getattr(p, s), template) for p in pairs for s in ("chosen", "rejected")]
    outputs = teacher.generate(prompts, num_samples=1, seed=seed, metadata=_side_metadata(pairs))
    manifest, rows = Manifest(rows_in=len(pairs)), []
    for k, pair in enumerate(pairs):
        texts = (outputs[2 * k][0], outputs[2 * k + 1][0])
        jc, jr = (parse_judgment(t, template) for t in texts)
        if jc.score is None or jr.score is None or not (jc.tags_ok and jr.tags_ok):
            manifest.drop("teacher_format_invalid", f"pair {pair.id}")
            continue
        if jc.score - jr.score <= min_margin:
            manifest.drop("margin_too_small", f"pair {pair.id}: {jc.score:g} vs {jr.score:g}")
            continue
        for side, text, prompt in (("chosen", texts[0], prompts[2 * k]), ("rejected", texts[1], prompts[2 * k + 1])):
            rows.append({"messages": [*prompt, {"role": "assistant", "content": text}], "pair_id": pair.id,
                         "side": side, "kind": "pointwise", "domain": pair.domain, "template": template.name,
                         "rubric_mode": template.rubric_mode})
        manifest.rows_out += 1
    manifest.extra["sft_rows"] = len(rows)
    return rows, manifest


def pairwise_corpus(pairs: Sequence[PreferencePair], teacher: Any, template: JudgeTemplate | str | None = None,
                    seed: int | None = None, swap_every: int = 2) -> tuple[list[dict], Manifest]:
    """SFT rows of teacher A/B decisions that agree with the preference label. Every `swap_every`-th
    pair is shown with the chosen response as B, so the corpus does not teach a position bias."""
    template = load_template(template or "pairwise")
    swapped = [swap_every > 0 and k % swap_every == 1 for k in range(len(pairs))]
    prompts = [render_pairwise(p.prompt, *((p.rejected, p.chosen) if sw else (p.chosen, p.rejected)), template,
                               domain=p.domain) for p, sw in zip(pairs, swapped)]
    outputs = teacher.generate(prompts, num_samples=1, seed=seed,
                               metadata=[{"pair": p, "swapped": sw} for p, sw in zip(pairs, swapped)])
    manifest, rows = Manifest(rows_in=len(pairs)), []
    for pair, prompt, out, sw in zip(pairs, prompts, outputs, swapped):
        judgment = parse_judgment(out[0], template)
        if judgment.decision is None or not judgment.tags_ok:
            manifest.drop("teacher_format_invalid", f"pair {pair.id}")
        elif judgment.decision != ("B" if sw else "A"):
            manifest.drop("disagrees_with_label", f"pair {pair.id}: decision {judgment.decision}")
        else:
            rows.append({"messages": [*prompt, {"role": "assistant", "content": out[0]}], "pair_id": pair.id,
                         "kind": "pairwise", "domain": pair.domain, "template": template.name,
                         "rubric_mode": template.rubric_mode})
            manifest.rows_out += 1
    return rows, manifest


def rl_set(pairs: Sequence[PreferencePair], judge: Any, template: JudgeTemplate | str | None = None, n: int = 8,
           low: float = 1 / 8, high: float = 6 / 8, seed: int | None = None,
           render: Render = template_prompt,
           keep_rewards: Sequence[Callable[..., list[float]]] = ()) -> tuple[list[PreferencePair], Manifest]:
    """Rejection sampling: keep pairs whose share of PAR-satisfying rollouts lies in [low, high] —
    hard enough to learn from, not hopeless (the paper: n = 8, [1/8, 6/8]).

    `keep_rewards` (GRPO's other reward functions, TRL's signature): a pair outside the band is still kept when
    their sum differs between the rollouts of one side — GRPO groups a side's rollouts, so that group has a
    non-zero advantage to learn from where PAR alone may give it none (counted as `kept_for_other_rewards`)."""
    template = load_template(template or "pointwise")
    prompts = [render(p, getattr(p, s), template) for p in pairs for s in ("chosen", "rejected")]
    outputs = judge.generate(prompts, num_samples=n, seed=seed, metadata=_side_metadata(pairs))
    manifest, kept, rates = Manifest(rows_in=len(pairs)), [], Counter()
    manifest.extra["kept_for_other_rewards"] = 0
    for k, pair in enumerate(pairs):
        c = [parse_judgment(t, template).score for t in outputs[2 * k]]
        r = [parse_judgment(t, template).score for t in outputs[2 * k + 1]]
        rate = sum(a is not None and b is not None and a > b for a, b in zip(c, r)) / n
        rates[rate] += 1
        if not low <= rate <= high and keep_rewards and any(
                _varies(keep_rewards, prompts[2 * k + j], outputs[2 * k + j]) for j in (0, 1)):
            kept.append(pair)
            manifest.rows_out += 1
            manifest.extra["kept_for_other_rewards"] += 1
        elif rate < low:
            manifest.drop("too_hard", f"pair {pair.id}: rate {rate:.3f}")
        elif rate > high:
            manifest.drop("too_easy", f"pair {pair.id}: rate {rate:.3f}")
        else:
            kept.append(pair)
            manifest.rows_out += 1
    manifest.extra["correct_rate_histogram"] = {f"{k:.4f}": v for k, v in sorted(rates.items())}
    return kept, manifest


def _varies(funcs: Sequence[Callable[..., list[float]]], prompt: list, texts: Sequence[str]) -> bool:
    """Whether the summed rewards of one side's rollouts are not all equal."""
    sums = [sum(v) for v in zip(*(f(prompts=[prompt] * len(texts), completions=list(texts)) for f in funcs))]
    return len(set(sums)) > 1
