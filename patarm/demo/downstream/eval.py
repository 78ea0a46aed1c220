"""Measuring a policy on held-out items: responses generated greedily and sampled, then checked by every
measure that applies — the rule verifier, IFEval's official checker, InFoBench-style decomposed questions
(DRFR) — and scored by the reward models, so a reward's score can be read next to verified accuracy.

All accuracies are fractions in [0, 1]; a reward model's figure is its mean score over the responses it
could score (`<name>_valid` says what share that was).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from patarm.demo.downstream.task import answer, verified
from patarm.eval.stats import mean_ci
from patarm.io import append_jsonl, read_jsonl, write_jsonl
from patarm.judge import mean_score

logger = logging.getLogger("patarm.downstream")
Scorer = Callable[..., list]  # a TRL-style reward function: (prompts, completions, **columns) -> scores

# InFoBench's protocol (one yes/no question per turn of one conversation; the first turn carries the
# instruction, the generated text and the rules), with the rules paraphrased here.
INFOBENCH_RULES = (
    "Read the input (if any) and the generated text below, then answer each question with YES or NO. Answer YES "
    "only if the generated text fully meets the condition in the question: any inaccuracy, or a text that gives "
    "nothing to check the condition against, means NO.")


@dataclass
class EvalSettings:
    """How held-out responses are drawn: one greedy response and `samples` at `temperature` per prompt."""

    samples: int = 4
    temperature: float = 1.0
    max_new_tokens: int = 48
    batch_size: int = 64
    seed: int = 0
    enable_thinking: bool = False  # Qwen3's chat-template switch, as the policy is trained with


@dataclass
class Evaluator:
    """Held-out items and everything that measures a response to them."""

    items: list[dict[str, Any]]
    settings: EvalSettings = field(default_factory=EvalSettings)
    scorers: dict[str, Scorer] = field(default_factory=dict)
    infobench_backend: Any = None  # answers the decomposed questions (any patarm backend), when items have them

    def options(self, temperature: float) -> Any:
        from patarm.backends import GenerationOptions

        s = self.settings
        return GenerationOptions(max_new_tokens=s.max_new_tokens, temperature=temperature, batch_size=s.batch_size,
                                 enable_thinking=s.enable_thinking)

    def draw(self, make_backend: Callable[[Any], Any]) -> dict[str, list[list[str]]]:
        """{"greedy": one answer per item, "sampled": `samples` per item} (a leading think block removed);
        `make_backend(options)` gives a patarm backend generating with those options."""
        prompts = [item["prompt"] for item in self.items]
        out = {"greedy": make_backend(self.options(0.0)).generate(prompts, 1)}
        if self.settings.samples:
            out["sampled"] = make_backend(self.options(self.settings.temperature)).generate(
                prompts, self.settings.samples, seed=self.settings.seed)
        return {mode: [[answer(text) for text in texts] for texts in rows] for mode, rows in out.items()}

    def evaluate(self, model: Any, tokenizer: Any, scorer_names: Sequence[str] | None = None) -> dict[str, Any]:
        """A transformers model in memory (e.g. mid-training) measured; scorers limited to `scorer_names`."""
        import torch

        from patarm.backends.hf import HFBackend

        was_training = model.training
        model.eval()
        # fork the RNG: measuring mid-training must not change the rollouts training draws next
        with torch.random.fork_rng(devices=[torch.cuda.current_device()] if torch.cuda.is_available() else []):
            try:
                drawn = self.draw(lambda options: HFBackend(model, tokenizer, options))
            finally:
                model.train(was_training)
        return self.score(drawn, scorer_names)

    def evaluate_folder(self, path: str, backend: str = "hf", scorer_names: Sequence[str] | None = None,
                        dtype: str | None = None) -> dict[str, Any]:
        """A saved policy (folder or model spec) measured, generating with transformers (its weights in `dtype`;
        None: as saved) or vLLM."""
        if backend == "vllm":
            from patarm.backends.vllm import VLLMBackend

            engine = VLLMBackend(path, self.options(0.0))
            drawn = self.draw(lambda options: VLLMBackend(path, options, llm=engine.llm))
        else:
            from patarm.backends.hf import HFBackend
            from patarm.models import load_causal_lm

            model, tokenizer = load_causal_lm(path, dtype=dtype)
            drawn = self.draw(lambda options: HFBackend(model.eval(), tokenizer, options))
        return self.score(drawn, scorer_names)

    def score(self, drawn: dict[str, list[list[str]]], scorer_names: Sequence[str] | None = None) -> dict[str, Any]:
        """Every measure of the drawn responses, per mode, plus a few examples."""
        names = list(self.scorers) if scorer_names is None else [n for n in scorer_names if n in self.scorers]
        names = [n for n in names if n != "rule"]  # the verifier's verdict is measured as `verified` already
        result: dict[str, Any] = {}
        for mode, responses in drawn.items():
            flat = [(item, r) for item, rs in zip(self.items, responses) for r in rs]
            result[mode] = measure(flat, {n: self.scorers[n] for n in names}, self.infobench_backend)
        if any(item.get("benchmark") == "ifeval" for item in self.items):  # for the official scorer's file
            result["greedy_responses"] = [{"prompt": item["ifeval"]["prompt"], "response": rs[0]}
                                          for item, rs in zip(self.items, drawn["greedy"])
                                          if item.get("benchmark") == "ifeval"]
        result["examples"] = [{"prompt": item["prompt"][-1]["content"], "greedy": drawn["greedy"][i][0],
                               "sampled": drawn["sampled"][i][0] if "sampled" in drawn else None}
                              for i, item in enumerate(self.items[:6])]
        return result


def measure(flat: list[tuple[dict[str, Any], str]], scorers: dict[str, Scorer], infobench_backend: Any = None,
            ) -> dict[str, Any]:
    """The measures of (item, response) pairs: mean answer length (words), verified accuracy, IFEval prompt-level
    strict / loose accuracy (and instruction level: `ifeval_inst_*`), InFoBench-style DRFR, each reward model's
    mean score; `n_*` say over how many responses (or instructions) each is taken."""
    out: dict[str, Any] = {"n": len(flat)}
    if flat:  # a policy that games its reward often collapses to short answers: the length shows it
        out["words"] = sum(len(r.split()) for _, r in flat) / len(flat)
    # 95 % intervals resample prompts (a prompt's several sampled responses move together): `<measure>_ci`
    rule = [(id(item), v) for item, r in flat if (v := verified(item, r)) is not None]
    if rule:
        out.update(verified=sum(v for _, v in rule) / len(rule), n_verified=len(rule),
                   verified_ci=list(mean_ci([float(v) for _, v in rule], groups=[g for g, _ in rule])))
    rows = [(id(item), item["ifeval"], r) for item, r in flat if item.get("ifeval")]
    if rows:
        from patarm.verify.ifeval import check_response

        checked = [check_response(row, r) for _, row, r in rows]
        strict, loose = [float(all(c.strict)) for c in checked], [float(all(c.loose)) for c in checked]
        groups = [g for g, _, _ in rows]
        out.update(ifeval_strict=sum(strict) / len(checked), ifeval_loose=sum(loose) / len(checked),
                   n_ifeval=len(checked), ifeval_strict_ci=list(mean_ci(strict, groups=groups)),
                   ifeval_loose_ci=list(mean_ci(loose, groups=groups)))
        # instruction level: every instruction counts once (a prompt's instructions resampled together)
        inst = [(g, float(s), float(lo)) for g, c in zip(groups, checked) for s, lo in zip(c.strict, c.loose)]
        if inst:
            out.update(ifeval_inst_strict=sum(s for _, s, _ in inst) / len(inst),
                       ifeval_inst_loose=sum(lo for _, _, lo in inst) / len(inst), n_ifeval_inst=len(inst),
                       ifeval_inst_strict_ci=list(mean_ci([s for _, s, _ in inst], groups=[g for g, _, _ in inst])))
    questions = [(item, r) for item, r in flat if item.get("questions")]
    if questions and infobench_backend is not None:
        answers = infobench_answers(infobench_backend, questions)
        asked = [a for per_item in answers for a in per_item]
        out.update(drfr=sum(a is True for a in asked) / max(1, len(asked)), n_questions=len(asked),
                   questions_unanswered=sum(a is None for a in asked))
    for name, scorer in scorers.items():
        scores = scorer(prompts=[item["prompt"] for item, _ in flat], completions=[r for _, r in flat],
                        domain=[item.get("domain") for item, _ in flat])
        out[name] = mean_score(scores)
        out[f"{name}_valid"] = sum(s is not None for s in scores) / len(scores) if scores else 0.0
    return out


def yes_no(text: str) -> bool | None:
    """InFoBench's reading of an evaluator answer: it starts with yes/no, else exactly one of YES / NO appears."""
    low = text.strip().lower()
    if low.startswith(("yes", "no")):
        return low.startswith("yes")
    has_yes, has_no = bool(re.search(r"\bYES\b", text)), bool(re.search(r"\bNO\b", text))
    return has_yes if has_yes != has_no else None


def infobench_answers(backend: Any, flat: list[tuple[dict[str, Any], str]]) -> list[list[bool | None]]:
    """Each item's decomposed questions asked one per turn of one conversation (round by round across items,
    so a batch backend batches them); an unreadable answer is None and ends that item's questions, as in
    InFoBench's own evaluation (None counts as NO in DRFR)."""
    conversations: list[list[dict[str, str]]] = [[] for _ in flat]
    answers: list[list[bool | None]] = [[] for _ in flat]
    rounds = max(len(item["questions"]) for item, _ in flat)
    for k in range(rounds):
        live = [i for i, (item, _) in enumerate(flat)
                if k < len(item["questions"]) and (not answers[i] or answers[i][-1] is not None)]
        if not live:
            break
        for i in live:
            item, response = flat[i]
            question = f"{item['questions'][k]}\n"
            if k == 0:
                instruction = item["prompt"][-1]["content"]
                question = (f"{INFOBENCH_RULES}\n\nInput:\n\"{instruction}\"\n\nGenerated Text:\n\"{response}\"\n\n"
                            f"Question:\n{question}")
            conversations[i].append({"role": "user", "content": question})
        texts = backend.generate([conversations[i] for i in live], 1)
        for i, (text,) in zip(live, texts):
            conversations[i].append({"role": "assistant", "content": text})
            answers[i].append(yes_no(text))
    return answers


class HeldoutCallback(TrainerCallback):
    """Every `every` optimizer steps, measures the policy on the held-out items (scored by `scorer_names`
    only: the reward it is trained on) and appends the row to `path`. With `subset` (the evaluator holds only the
    first N held-out items) the rows say so (`subset: N`) and the policy is also measured before the first step,
    so the curve starts on the same prompts."""

    def __init__(self, evaluator: Evaluator, every: int, path: str, scorer_names: Sequence[str] = (),
                 subset: bool = False):
        self.evaluator, self.every, self.path, self.scorer_names = evaluator, every, path, list(scorer_names)
        self.subset = subset

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        path = Path(self.path)
        if state.global_step > 0 and state.is_world_process_zero and path.is_file():  # resumed: drop later rows
            write_jsonl([r for r in read_jsonl(path) if r.get("step", 0) <= state.global_step], path)
        if self.subset and self.every > 0 and state.global_step == 0 and state.is_world_process_zero:
            self._measure(state.global_step, model, processing_class)

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        if self.every <= 0 or state.global_step % self.every or state.global_step >= state.max_steps:
            return  # the final step is measured in full after training
        if not state.is_world_process_zero:
            return
        self._measure(state.global_step, model, processing_class)

    def _measure(self, step: int, model: Any, tokenizer: Any) -> None:
        result = self.evaluator.evaluate(model, tokenizer, self.scorer_names)
        kept = {k: v for k, v in result.items() if k not in ("examples", "greedy_responses")}
        subset = {"subset": len(self.evaluator.items)} if self.subset else {}
        append_jsonl({"step": step, **subset, **kept}, self.path)
        logger.info("step %d: held-out%s %s", step, f" (first {len(self.evaluator.items)} prompts)" if subset else "",
                    brief(result))


def brief(result: dict[str, Any]) -> str:
    """One line: the headline measures of an evaluation."""
    parts = []
    for mode in ("sampled", "greedy"):
        m = result.get(mode) or {}
        for key in ("verified", "ifeval_strict", "ifeval_inst_strict", "drfr", "judge", "bt"):
            if m.get(key) is not None:
                parts.append(f"{mode} {key} {m[key]:.3f}")
    return ", ".join(parts) or "no measure applies"
