"""The judge-facing interface the server calls: batched, synchronous, run on one worker thread.

A `Scorer` turns items (a conversation, a response, options) into scores and parsed judgments, and
completes chat messages for `/v1/chat/completions`. The server never touches a model: it only calls
`prepare` (validate and render one item; cheap, raises ValueError for a bad option → HTTP 400),
`run` (one batch of prepared items → results) and `complete`. `JudgeScorer` implements it on any
`patarm.backends` backend (`HFBackend`, `VLLMBackend`).
"""

from __future__ import annotations

import copy
import functools
import os
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from patarm.data.schema import Messages
from patarm.judge.judgment import Judgment, mean_score
from patarm.judge.parse import parse_judgment
from patarm.judge.templates import PROMPT_DIR, JudgeTemplate, load_template, render_pointwise
from patarm.judge.truncate import PromptFitter

# The template a skill's static-routing prompt answers in: <eval> evidence lines, then <score>.
SKILL_TEMPLATE = ("pointwise-compact", "primary")
DEMO_PAIRS = Path(__file__).resolve().parents[1] / "demo" / "assets" / "if_pairs_demo.jsonl"  # a tiny tokenizer's text


@dataclass
class ScoreItem:
    """One response to judge. `prompt` is text or chat messages; `resources` are mounted skill resources
    (dicts with id, type, content[, description]); `n` judge rollouts are averaged."""

    prompt: str | Messages
    response: str
    domain: str | None = None
    template: str | None = None
    rubric_mode: str | None = None
    skill: str | None = None
    resources: Sequence[dict[str, str]] = ()
    n: int = 1


@dataclass
class ScoreResult:
    """`scores` of the n rollouts (None where the judge's output had no valid score), their valid mean."""

    scores: list[float | None]
    mean: float | None
    judgments: list[Judgment] = field(default_factory=list)

    @property
    def parse_failures(self) -> int:
        return sum(s is None for s in self.scores)


@dataclass(frozen=True)
class Sampling:
    """Generation settings of one chat-completion request (max_tokens in tokens)."""

    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1


@dataclass
class Prepared:
    """An item rendered into judge messages, with the template its output is parsed under."""

    messages: Messages
    template: JudgeTemplate
    n: int
    skill: bool = False


class PromptTooLong(ValueError):
    """An item or conversation does not fit the judge's prompt budget even when shortened (→ HTTP 413)."""



class Scorer:
    """Base class: subclasses implement `run` (and `complete` if they can chat)."""

    name: str = "judge"
    score_range: tuple[float, float] = (1.0, 10.0)

    def prepare(self, item: ScoreItem) -> Any:
        """Validate and render one item (raise ValueError naming the bad field)."""
        return item

    def prepare_chat(self, messages: Messages, sampling: Sampling) -> Messages:
        """Check that chat `messages` fit with room for `sampling.max_tokens` (raise PromptTooLong)."""
        return messages

    def run(self, prepared: Sequence[Any]) -> list[ScoreResult]:
        raise NotImplementedError

    def score(self, items: Sequence[ScoreItem]) -> list[ScoreResult]:
        """Judge `items` in one batch (the in-process path; the server splits prepare and run)."""
        return self.run([self.prepare(item) for item in items])

    def complete(self, messages_batch: Sequence[Messages], sampling: Sampling) -> list[list[str]]:
        """`sampling.n` completions per conversation."""
        raise NotImplementedError(f"{type(self).__name__} does not serve chat completions")


@functools.cache
def _bundled_templates() -> frozenset[str]:
    return frozenset(p.stem for p in PROMPT_DIR.glob("*.yaml"))


@functools.lru_cache(maxsize=32)
def _bank_skill(name: str) -> Any:
    """A skill of the bundled bank by name only: a client must not make the server read other folders."""
    from patarm.skills.package import BANK_DIR, NAME_RE, load_skill

    if not NAME_RE.match(name) or not (BANK_DIR / name / "SKILL.md").is_file():
        names = sorted(p.name for p in BANK_DIR.iterdir() if (p / "SKILL.md").is_file())
        raise ValueError(f"skill {name!r} is not in the bundled bank; available: {names}")
    return load_skill(BANK_DIR / name)


class JudgeScorer(Scorer):
    """Pointwise judging with a generation backend; `template` / `rubric_mode` are the server defaults."""

    # Rollouts of an item with n > 1 are sampled at least this hot: n greedy rollouts would be n copies.
    VOTING_TEMPERATURE = 0.7

    READOUTS = ("score", "verdict-lines")

    def __init__(self, backend: Any, template: str = "pointwise", rubric_mode: str | None = None,
                 name: str = "judge", readout: str = "score"):
        self.backend, self.name = backend, name
        if readout not in self.READOUTS:
            raise ValueError(f"readout must be one of {self.READOUTS}, got {readout!r}")
        if readout == "verdict-lines":
            if not all(hasattr(backend, a) for a in ("model", "tokenizer", "render")):
                raise ValueError(f"the verdict-lines readout reads the judge's own logits: it needs the hf backend, "
                                 f"not a {type(backend).__name__}")
            from patarm.eval.readout import word_ids

            word_ids(backend.tokenizer)  # at start, not at the first request
        self.readout = readout
        # Every prompt fits the judge's window with room for its judgment. The server prepares items on
        # request threads while the model thread batches: sharing one fast tokenizer between them lets a
        # count reset the padding of a batch being encoded ("Unable to create tensor"), so preparation
        # counts with its own copy, one preparation at a time.
        tokenizer = getattr(backend, "tokenizer", None)
        self.fit = PromptFitter(backend, copy.deepcopy(tokenizer) if tokenizer is not None else None)
        self._prepare_lock = threading.Lock()
        self.default = load_template(template, rubric_mode=rubric_mode)
        if self.default.kind != "pointwise":
            raise ValueError(f"the server scores pointwise; template {template!r} is {self.default.kind}")
        if self.default.facts:  # what counting needs (NLTK's tables) is missing: say so at start, not per request
            from patarm.judge.facts import facts_block

            facts_block(self.default.facts, "A response. It has two sentences.")
        self.score_range = self.default.score_range

    def _template(self, item: ScoreItem) -> JudgeTemplate:
        if item.template is None and item.rubric_mode is None:
            return self.default
        name = item.template or self.default.name
        if name not in _bundled_templates():
            raise ValueError(f"template {name!r} is not bundled; available: {sorted(_bundled_templates())}")
        template = load_template(name, rubric_mode=item.rubric_mode or self.default.rubric_mode)
        if template.kind != "pointwise":
            raise ValueError(f"template {name!r} is {template.kind}; /v1/judge scores single responses")
        return template

    def prepare(self, item: ScoreItem) -> Prepared:
        with self._prepare_lock:
            return self._prepare(item)

    def _prepare(self, item: ScoreItem) -> Prepared:
        if item.domain is not None:  # a name in the rubric registry, never a path (ValueError otherwise)
            from patarm.rubrics import load_primary_rubrics

            load_primary_rubrics(item.domain)
        if item.skill is None:
            if item.resources:
                raise ValueError("resources are mounted into a skill: give `skill` too")
            template = self._template(item)
            messages = self._fit(render_pointwise(item.prompt, item.response, template, domain=item.domain))
            return Prepared(messages, template, item.n)
        from patarm.skills.router import static_prompt
        from patarm.skills.session import mount

        skill = _bank_skill(item.skill)
        mounted = [mount(r["id"], r["type"], r["content"], r.get("description", "")) for r in item.resources]
        messages = static_prompt(skill, item.prompt, item.response, item.domain, mounted, run_verifiers=False)
        return Prepared(self._fit(messages), load_template(SKILL_TEMPLATE[0], rubric_mode=SKILL_TEMPLATE[1]), item.n,
                        skill=True)

    def _fit(self, messages: Messages) -> Messages:
        """Shorten the conversation and response to the prompt budget; refuse what still does not fit."""
        messages, over = self.fit.fitted(messages)
        if over is not None:
            raise PromptTooLong(f"the judge prompt has {over} tokens with its conversation and response shortened "
                                f"to the minimum; this judge's prompt budget is {self.fit.budget} tokens (shorten "
                                "the rubric, resources or system text)")
        return messages

    def prepare_chat(self, messages: Messages, sampling: Sampling) -> Messages:
        window = self.fit.window
        if window is None or self.fit.tokenizer is None:
            return messages
        with self._prepare_lock:
            length = self.fit.length(messages)
        budget = window - sampling.max_tokens
        if length > budget:
            raise PromptTooLong(f"the messages have {length} tokens; this judge's window of {window} tokens less "
                                f"max_tokens {sampling.max_tokens} leaves {budget} for them (shorten the messages or "
                                "lower max_tokens)")
        return messages

    def run(self, prepared: Sequence[Prepared]) -> list[ScoreResult]:
        """One backend call per distinct n (a backend samples the same n for every prompt of a call)."""
        outputs: list[list[str]] = [[] for _ in prepared]
        by_n: dict[int, list[int]] = defaultdict(list)
        for i, p in enumerate(prepared):
            by_n[p.n].append(i)
        for n, indices in by_n.items():
            backend = self.backend
            options = getattr(backend, "options", None)
            if n > 1 and options is not None and options.temperature <= 0:
                backend = with_sampling(
                    backend,
                    Sampling(
                        max_tokens=options.max_new_tokens, temperature=self.VOTING_TEMPERATURE, top_p=options.top_p, n=n
                    ),
                )
            texts = backend.generate([prepared[i].messages for i in indices], num_samples=n)
            for i, t in zip(indices, texts):
                outputs[i] = t
        results = [self._result(p, texts) for p, texts in zip(prepared, outputs)]
        if self.readout == "verdict-lines":
            self._read_verdict_lines(prepared, outputs, results)
        return results

    def _read_verdict_lines(self, prepared: Sequence[Prepared], outputs: list[list[str]],
                            results: list[ScoreResult]) -> None:
        """Each judgment's score replaced by the judge's belief in its verdict lines (`name :: ... :: pass|fail`):
        lo + (hi − lo) × the mean P(pass) over them (`patarm.eval.readout.line_beliefs`, one forward pass a line),
        hi / lo the template's score range; a judgment with no such line, or of a skill, keeps its written score."""
        from patarm.eval.readout import line_beliefs

        where = [(i, j) for i, p in enumerate(prepared) if not p.skill for j in range(len(outputs[i]))]
        if not where:
            return
        heads = {i: self.backend.render(prepared[i].messages) for i, _ in where}
        beliefs = line_beliefs(self.backend.model, self.backend.tokenizer, [heads[i] for i, _ in where],
                               [outputs[i][j] for i, j in where], batch_size=getattr(self.backend.options,
                                                                                     "batch_size", 16))
        for (i, j), said in zip(where, beliefs):
            if said:
                lo, hi = prepared[i].template.score_range
                results[i].scores[j] = lo + (hi - lo) * sum(said.values()) / len(said)
        for r in results:
            r.mean = mean_score(r.scores)

    @staticmethod
    def _result(p: Prepared, texts: Sequence[str]) -> ScoreResult:
        judgments = [parse_judgment(t, p.template) for t in texts]
        if p.skill:
            from patarm.skills.router import parse_evidence

            for j in judgments:
                j.evidence = parse_evidence(j.evaluation)
        scores = [j.score for j in judgments]
        return ScoreResult(scores, mean_score(scores), judgments)

    def complete(self, messages_batch: Sequence[Messages], sampling: Sampling) -> list[list[str]]:
        backend = with_sampling(self.backend, sampling)
        return backend.generate(list(messages_batch), num_samples=sampling.n)


def with_sampling(backend: Any, sampling: Sampling) -> Any:
    """A view of `backend` generating with `sampling` (shares the loaded model)."""
    options = getattr(backend, "options", None)
    if options is None:
        raise NotImplementedError(f"cannot change the sampling of a {type(backend).__name__}")
    options = replace(options, max_new_tokens=sampling.max_tokens, temperature=sampling.temperature,
                      top_p=sampling.top_p)
    from patarm.backends.hf import HFBackend

    if isinstance(backend, HFBackend):
        return HFBackend(backend.model, backend.tokenizer, options, model_id=backend.model_id)
    from patarm.backends.vllm import VLLMBackend

    return VLLMBackend(backend.model_id, options, llm=backend.llm)


def load_scorer(model: str, backend: str = "hf", *, max_new_tokens: int = 512, temperature: float = 0.0,
                batch_size: int = 32, template: str = "pointwise", rubric_mode: str | None = None,
                work_dir: str | os.PathLike | None = None, enable_thinking: bool = False,
                max_prompt_tokens: int | None = None, dtype: str | None = None, readout: str = "score") -> JudgeScorer:
    """A JudgeScorer for a model spec (a folder, a hub id, `tiny[:...]`, a GGUF spec) on the `hf` or `vllm`
    backend; `dtype` (hf): the weights' dtype (None: as saved; auto: bfloat16 where the device computes in it);
    `readout`: how a judgment becomes its score (`JudgeScorer.READOUTS`; verdict-lines: hf only)."""
    from patarm.backends import GenerationOptions
    from patarm.models import parse_tiny_spec, resolve_model

    path = model
    if parse_tiny_spec(model) is not None:  # a random tiny judge: for smoke tests of the server itself
        from patarm.data import load_pairs

        texts = [m["content"] for p in load_pairs(DEMO_PAIRS).pairs for side in (p.chosen, p.rejected)
                 for m in render_pointwise(p.prompt, side, template)]
        path = resolve_model(model, texts=texts, output_dir=work_dir or os.path.join("runs", "serve"))
    options = GenerationOptions(max_new_tokens=max_new_tokens, temperature=temperature, batch_size=batch_size,
                                enable_thinking=enable_thinking, max_prompt_tokens=max_prompt_tokens)
    if backend == "vllm":
        from patarm.backends.vllm import VLLMBackend

        engine: Any = VLLMBackend(path, options)
    elif backend == "hf":
        from patarm.backends.hf import HFBackend

        kwargs = {}
        if dtype:
            import torch

            from patarm.train.common import auto_dtype

            kwargs["dtype"] = auto_dtype(dtype, "cuda" if torch.cuda.is_available() else "cpu")
        engine = HFBackend.from_pretrained(path, options, **kwargs)
    else:
        raise ValueError(f"backend must be 'hf' or 'vllm', got {backend!r}")
    name = os.path.basename(str(model).rstrip("/"))
    return JudgeScorer(engine, template=template, rubric_mode=rubric_mode, name=name, readout=readout)
