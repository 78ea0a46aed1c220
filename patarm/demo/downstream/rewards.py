"""The three rewards a policy is trained on in the downstream loop, as TRL reward functions, and the judge
server they reach over HTTP:

* `judge` — the PaTaRM judge, served by `patarm serve` (`served_judge`) and called through the TRL adapter
  `patarm.serve.adapters.trl.JudgeReward`: the reward is its mean score (1–10);
* `bt`    — the Bradley–Terry scalar reward model (`patarm bt`): the reward is its scalar output, computed
  exactly as TRL scores a sequence-classification reward model (chat template, right padding, logit 0);
* `rule`  — the rule verifier of the synthetic task: 1 when the response follows the instruction, else 0; on
  verifiable prompts (an `ifeval_row` column: an IFEval input row) the IFEval checkers: the share of the
  prompt's constraints followed (strict).

`Monitored` wraps any of them and logs, at every step, the share of the rollouts the rule verifier accepts
(`verified/accuracy`), so the reward a policy is trained on can be plotted next to what it actually does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from patarm.demo.downstream.task import answer, verified
from patarm.rewards import completion_text

logger = logging.getLogger("patarm.downstream")
REWARDS = ("judge", "bt", "rule")


class RuleReward:
    """1.0 when the rule verifier accepts the completion for the row's `constraint`, else 0.0; for a row with an
    `ifeval_row` instead, the share of its IFEval constraints the completion follows (strict)."""

    __name__ = "rule"

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], constraint: Sequence[str] | None = None,
                 ifeval_row: Sequence[str] | None = None, **kwargs: Any) -> list[float]:
        if constraint is not None:
            return [float(bool(verified({"constraint": c}, completion_text(x))))
                    for c, x in zip(constraint, completions)]
        if ifeval_row is not None:
            from patarm.verify.ifeval import share_followed

            return [share_followed(row, completion_text(x)) for row, x in zip(ifeval_row, completions)]
        raise ValueError("the rule reward needs a `constraint` column (the synthetic task's rows) or an `ifeval_row` "
                         "column (verifiable prompts: patarm downstream --recipe ifeval)")


class ScalarReward:
    """A sequence-classification reward model's logit for prompt + completion (a `patarm bt` output folder)."""

    __name__ = "bt"

    def __init__(self, path: str | os.PathLike, batch_size: int = 64, device: str | None = None):
        self.path, self.batch_size, self.device = str(path), batch_size, device
        self.facts: tuple[str, ...] = ()  # what the model was trained to read after each response (its config)
        self._model: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        from accelerate import PartialState
        from transformers import AutoModelForSequenceClassification

        from patarm.models import load_tokenizer
        from patarm.models.settings import read_run_config

        self._tokenizer = load_tokenizer(self.path, padding_side="right")
        self._model = AutoModelForSequenceClassification.from_pretrained(self.path).eval()
        self.facts = tuple((read_run_config(self.path).get("data") or {}).get("facts") or ())  # as it was trained
        self.device = self.device or str(PartialState().device)  # this process's device under accelerate
        self._model.to(self.device)

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        import torch

        if self._model is None:
            self._load()
        from patarm.judge.facts import with_facts

        texts = []
        for prompt, completion in zip(prompts, completions):
            messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
            response = with_facts(completion_text(completion), self.facts)
            conversation = [*messages, {"role": "assistant", "content": response}]
            texts.append(self._tokenizer.apply_chat_template(conversation, tokenize=False))
        scores: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            enc = self._tokenizer(texts[start:start + self.batch_size], return_tensors="pt", padding=True,
                                  add_special_tokens=False).to(self.device)
            with torch.inference_mode():
                scores += self._model(**enc).logits[:, 0].float().tolist()
        return scores


class Monitored:
    """A reward function of the policy's *answers* (a leading think block removed from each completion) that
    also logs the rule verifier's acceptance rate of the same answers (`verified/accuracy`) through TRL's
    `log_metric`; the inner reward's values are passed through unchanged."""

    def __init__(self, reward: Any):
        self.reward = reward
        self.__name__ = getattr(reward, "__name__", type(reward).__name__)

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        answers = [answer(completion_text(c)) for c in completions]
        rewards = self.reward(prompts, answers, **kwargs)
        log_metric = kwargs.get("log_metric")
        column = "constraint" if kwargs.get("constraint") is not None else "ifeval_row"
        constraints = kwargs.get(column)
        if callable(log_metric) and constraints is not None:
            checks = [verified({column: c}, x) for c, x in zip(constraints, answers)]
            checks = [c for c in checks if c is not None]
            if checks:
                log_metric("verified/accuracy", sum(checks) / len(checks))
        return rewards


_LISTENING = re.compile(r"listening on (http://\S+)")


@contextlib.contextmanager
def served_judge(model: str, log_path: str | os.PathLike, extra_args: Sequence[str] = (),
                 start_timeout_s: float = 300.0) -> Iterator[str]:
    """`patarm serve --model MODEL --port 0` in a child process, for the duration of the block; yields its URL.
    The server's log goes to `log_path`; leaving the block stops it with SIGTERM (graceful), then SIGKILL."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "patarm", "serve", "--model", str(model), "--port", "0", *map(str, extra_args)]
    with open(log_path, "a", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.PIPE, text=True, env=os.environ.copy(),
                                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        found: dict[str, str] = {}
        ready = threading.Event()

        def pump() -> None:  # copy the server's stderr into its log, and catch the line naming its URL
            for line in proc.stderr:  # type: ignore[union-attr]
                log.write(line)
                log.flush()
                match = _LISTENING.search(line)
                if match and not ready.is_set():
                    found["url"] = match.group(1)
                    ready.set()
            ready.set()

        reader = threading.Thread(target=pump, name="patarm-serve-log", daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + start_timeout_s
            while not ready.wait(1.0):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"patarm serve did not start within {start_timeout_s:g} s (log: {log_path})")
            if "url" not in found:
                raise RuntimeError(f"patarm serve exited with code {proc.wait()} before listening (log: {log_path})")
            _wait_healthy(found["url"], deadline)
            logger.info("judge served at %s (pid %d, log %s)", found["url"], proc.pid, log_path)
            yield found["url"]
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            reader.join(timeout=10)


def _die_with_parent() -> None:
    """In the server's process before it starts (Linux): SIGTERM it when this process dies, even when killed
    without a chance to clean up, so no judge server outlives its run."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _wait_healthy(url: str, deadline: float) -> None:
    import httpx

    while True:
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"patarm serve at {url} never answered /health")
        time.sleep(0.2)
