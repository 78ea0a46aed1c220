"""Judging the held-out problems: every candidate solution scored once, by a generative judge (greedy, the skill
prompt of the arm) or by the Bradley-Terry scalar model; one record per problem, written as jsonl, from which
`metrics.summarize_scores` reads pair accuracy, format validity and best-of-N.

Generative judging goes through one cached backend (`patarm.backends.make_backend`), so an interrupted
evaluation resumes from the completions already stored in its cache file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from patarm.demo.gsm8k.data import Agreement, Problem
from patarm.demo.gsm8k.prompts import judge_prompt
from patarm.io import read_jsonl, write_jsonl

TEMPLATE = "pointwise-compact"
RUBRIC_MODE = "primary"  # the output contract: <eval> then <score> (adaptive: <rubric> first)


def judge_template(rubric_mode: str = RUBRIC_MODE) -> Any:
    from patarm.judge import load_template

    return load_template(TEMPLATE, rubric_mode=rubric_mode)


def placement(device: str) -> dict:
    """The loading keywords that put a judge on `device` (cpu, or e.g. cuda)."""
    return {} if device == "cpu" else {"device_map": device}


def backend_spec(model: str, dtype: str, device: str = "cpu") -> dict:
    """The generation backend of a judge: transformers on `device` (cpu, or e.g. cuda) in `dtype` weights."""
    return {"kind": "hf", "model": model, "dtype": dtype, **placement(device)}


def fitted_prompts(problems: Sequence[Problem], disclose: bool, skill: str, tokenizer: Any,
                   max_tokens: int, evidence: bool = False, rubric_mode: str = RUBRIC_MODE,
                   agreement: Agreement = None) -> list[list[dict]]:
    """The judge prompt of every candidate (problem order, then source order), cut to `max_tokens` tokens
    (the response's middle goes first; see `patarm.judge.truncate`); with `evidence` and `agreement` the
    problem's candidates are each one's peers (agreement `rule`: the prompt also states the score rule)."""
    from patarm.judge.truncate import truncate_messages

    def prompt(p: Problem, s: str) -> list[dict]:
        peers = list(p.solutions) if evidence and agreement else None
        return judge_prompt(p.question, s, p.answer if disclose else None, skill, evidence, rubric_mode, peers,
                            score_rule=agreement == "rule")

    return [truncate_messages(prompt(p, s), tokenizer, max_tokens)[0] for p in problems for s in p.solutions]


def _records(problems: Sequence[Problem], scores: list, valid: list, texts: list) -> list[dict]:
    out, k = [], 0
    for p in problems:
        n = len(p.solutions)
        out.append({"problem": p.id, "sources": p.sources, "correct": p.correct, "scores": scores[k:k + n],
                    "valid": valid[k:k + n], "texts": texts[k:k + n]})
        k += n
    return out


def judge_problems(model: str, problems: Sequence[Problem], disclose: bool, skill: str, out_file: Path,
                   max_prompt_tokens: int, max_new_tokens: int, batch_size: int, dtype: str,
                   name: str, device: str = "cpu", evidence: bool = False, rubric_mode: str = RUBRIC_MODE,
                   samples: int = 0, temperature: float = 1.0, seed: int = 0,
                   agreement: Agreement = None) -> list[dict]:
    """Score every candidate with the judge `model` (greedy); records are written to `out_file` and returned.
    With `samples` = k > 0, k judgments per candidate are drawn at `temperature` instead (records gain
    `sample_scores`: k per candidate, in draw order, for voting@k; `scores` is then the first draw).
    Completions are cached beside it (`<out_file>.cache.sqlite`) as they finish."""
    from patarm.backends import GenerationOptions, make_backend
    from patarm.judge import parse_judgment

    backend = make_backend(backend_spec(model, dtype, device),
                           GenerationOptions(max_new_tokens=max_new_tokens, temperature=temperature if samples else 0.0,
                                             batch_size=batch_size),
                           cache=out_file.with_suffix(".cache.sqlite"), name=name)
    prompts = fitted_prompts(problems, disclose, skill, backend.tokenizer, max_prompt_tokens, evidence, rubric_mode,
                             agreement)
    outputs = backend.generate(prompts, num_samples=max(samples, 1), seed=seed if samples else None)
    template = judge_template(rubric_mode)
    parsed = [[parse_judgment(t, template) for t in row] for row in outputs]
    judgments = [row[0] for row in parsed]
    records = _records(problems, [j.score for j in judgments], [j.score is not None and j.tags_ok for j in judgments],
                       [row[0] for row in outputs])
    if samples:
        k = 0
        for r in records:
            n = len(r["scores"])
            r["sample_scores"] = [[j.score for j in row] for row in parsed[k:k + n]]
            r["sample_texts"] = [list(row) for row in outputs[k:k + n]]
            k += n
    write_jsonl(records, out_file)
    backend.cache.close()
    return records


def bt_prompt(question: str, reference: str | None) -> list[dict]:
    """The BT model's conversation: the question, with the reference answer appended as the same
    sample-specific block the judge sees when the arm discloses it."""
    from patarm.demo.gsm8k.prompts import REFERENCE_ID

    block = "" if reference is None else f"\n\n### Sample-specific reference ({REFERENCE_ID})\n{reference}"
    return [{"role": "user", "content": question + block}]


def bt_scores(model_dir: str, problems: Sequence[Problem], disclose: bool, out_file: Path, batch_size: int,
              dtype: str, max_length: int) -> list[dict]:
    """Score every candidate with a BT scalar reward model (the conversation + the solution through the chat
    template, as TRL's RewardTrainer tokenises them); records as for a judge, every score valid."""
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForSequenceClassification

    from patarm.models import load_tokenizer

    tokenizer = load_tokenizer(model_dir, padding_side="right")
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=getattr(torch, dtype)).eval()
    model.config.pad_token_id = tokenizer.pad_token_id
    ids = [tokenizer.apply_chat_template(bt_prompt(p.question, p.answer if disclose else None)
                                         + [{"role": "assistant", "content": s}], tokenize=True,
                                         return_dict=True)["input_ids"][:max_length]
           for p in problems for s in p.solutions]
    order = sorted(range(len(ids)), key=lambda k: len(ids[k]))
    scores: list[float] = [0.0] * len(ids)
    for start in tqdm(range(0, len(order), batch_size), desc=f"BT {out_file.parent.parent.name}", unit="batch"):
        batch = order[start:start + batch_size]
        enc = tokenizer.pad({"input_ids": [ids[k] for k in batch]}, return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits[:, 0].float().tolist()
        for k, value in zip(batch, logits):
            scores[k] = value
    records = _records(problems, scores, [True] * len(ids), [""] * len(ids))
    write_jsonl(records, out_file)
    return records


def load_records(path: Path) -> list[dict]:
    return read_jsonl(path)
