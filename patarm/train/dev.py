"""Judge a dev split of preference pairs while a judge trains: pair accuracy every `dev_eval_steps` steps,
training stopped once it reaches `dev_target`, the weights of the best check restored at the end.

This is transformers' `EarlyStoppingCallback` + `load_best_model_at_end` for a metric a loss cannot give: the
judge *generates* its judgment of each side of every dev pair (greedy, the corpus's template) and a pair counts
when the chosen side's score beats the rejected side's — the pair accuracy `patarm eval` reports.

Each check appends `{"step", "dev_accuracy", "dev_format_valid", "best"}` to `<output_dir>/dev.jsonl`; a new
best's trainable weights go to `<output_dir>/dev-best.pt` (CPU tensors; its step in `dev-best.json`), so a
resumed run knows its best so far and can still restore it. The main process judges and keeps these files; every
process gets the checks, the decisions and, at the end, the best weights from it (broadcasts), so the stop and the
restore happen on all of them, also where each node has its own output folder. Sharded training (DeepSpeed ZeRO-3,
FSDP), where no process holds the whole model, is refused.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from patarm.backends.base import GenerationOptions
from patarm.data.schema import PreferencePair
from patarm.io import append_jsonl, write_jsonl
from patarm.judge import load_template, parse_judgment, render_pointwise

logger = logging.getLogger(__name__)


def dev_pair_accuracy(model: Any, tokenizer: Any, pairs: Sequence[PreferencePair], template: str,
                      max_new_tokens: int, batch_size: int = 64, enable_thinking: bool = False) -> dict[str, float]:
    """Greedy pointwise judgments of both sides of every pair by `model`: pair accuracy (chosen's score >
    rejected's, a missing score counts as a miss) and the share of judgments with a valid score."""
    import torch

    from patarm.backends.hf import HFBackend

    tmpl = load_template(template)
    prompts = [render_pointwise(p.prompt, getattr(p, side), tmpl, domain=p.domain)
               for p in pairs for side in ("chosen", "rejected")]
    options = GenerationOptions(max_new_tokens=max_new_tokens, temperature=0.0, batch_size=batch_size,
                                enable_thinking=enable_thinking)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            outputs = HFBackend(model, tokenizer, options).generate(prompts, num_samples=1)
    finally:
        model.train(was_training)
    scores = [parse_judgment(out[0], tmpl).score for out in outputs]
    correct = [c is not None and r is not None and c > r for c, r in zip(scores[::2], scores[1::2])]
    return {"dev_accuracy": sum(correct) / max(len(correct), 1),
            "dev_format_valid": sum(s is not None for s in scores) / max(len(scores), 1)}


def best_check(rows: Sequence[dict]) -> dict | None:
    """The check a run ends on: the highest dev accuracy, the latest of equals (None without checks)."""
    return max(rows, key=lambda r: (r["dev_accuracy"], r["step"])) if rows else None


class DevPairsCallback(TrainerCallback):
    """See the module docstring. `target`: stop training at the first check at or above it (None: never);
    `keep_best`: end with the weights of the best check (the latest of equals) rather than the last step's."""

    def __init__(self, pairs: Sequence[PreferencePair], tokenizer: Any, template: str, max_new_tokens: int,
                 eval_steps: int, target: float | None = None, keep_best: bool = True,
                 enable_thinking: bool = False, batch_size: int = 64):
        if eval_steps < 1:
            raise ValueError(f"dev_eval_steps must be >= 1, got {eval_steps}")
        if target is not None and not 0.0 < target <= 1.0:
            raise ValueError(f"dev_target must be in (0, 1], got {target}")
        if not pairs:
            raise ValueError("the dev pairs file holds no pairs")
        self.pairs, self.tokenizer, self.template = list(pairs), tokenizer, template
        self.max_new_tokens, self.eval_steps = max_new_tokens, eval_steps
        self.target, self.keep_best = target, keep_best
        self.enable_thinking, self.batch_size = enable_thinking, batch_size
        self.best: tuple[float, int] | None = None  # (accuracy, step)
        self.last_step = -1
        self.history: list[dict] = []

    # -- bookkeeping ------------------------------------------------------------------------------
    def _paths(self, args) -> tuple[Path, Path]:
        return Path(args.output_dir) / "dev.jsonl", Path(args.output_dir) / "dev-best.pt"

    def on_train_begin(self, args, state, control, **kwargs):
        if getattr(args, "fsdp", None) or _zero3(args):
            raise ValueError("dev_pairs: judging dev pairs during training needs the whole model on each process; "
                             "it is not supported with DeepSpeed ZeRO-3 or FSDP (judge the saved checkpoints with "
                             "`patarm eval` instead)")
        log, best = self._paths(args)
        rows, saved_step = [], None
        if state.is_world_process_zero:  # only the main process's output folder holds the checks (one per node
            # without a shared file system): it reads them, the others get them from it
            if state.global_step > 0 and log.is_file():  # a resumed run keeps the checks up to its checkpoint
                rows = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines() if x.strip()]
                rows = [r for r in rows if r["step"] <= state.global_step]
            if rows:
                write_jsonl(rows, log)
            else:
                for path in (log, best, best.with_suffix(".json")):
                    path.unlink(missing_ok=True)
            saved_step = _saved_step(best)
        rows, saved_step = _from_main(args, (rows, saved_step))
        self.history = rows
        top = best_check(rows)
        self.best = (top["dev_accuracy"], top["step"]) if top else None
        if self.best is not None and self.keep_best and saved_step != self.best[1]:
            # the best check before the checkpoint was overwritten by a later one the resumed run no longer has
            logger.warning("dev pairs: the weights of the best check so far (step %d) are gone; the best is chosen "
                           "among the checks from step %d on", self.best[1], state.global_step + 1)
            self.best = None

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.eval_steps == 0:
            self._check(args, state, control, kwargs["model"])

    def on_train_end(self, args, state, control, **kwargs):
        model = kwargs["model"]
        if self.last_step != state.global_step:
            self._check(args, state, control, model)
        if not self.keep_best or self.best is None or self.best[1] == state.global_step:
            return
        import torch

        _, path = self._paths(args)
        params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        problem = None
        if state.is_world_process_zero:  # the main process holds the file; every process gets the weights from it
            saved = torch.load(path, map_location="cpu", weights_only=True)
            if saved.get("step") != self.best[1]:
                problem = (f"{path} holds the weights of step {saved.get('step')}, not of the best dev check "
                           f"(step {self.best[1]}): the run folder was changed during training")
            else:
                with torch.no_grad():
                    for name, tensor in saved["weights"].items():
                        params[name].copy_(tensor.to(params[name].device, params[name].dtype))
        problem = _from_main(args, problem)
        if problem:
            raise RuntimeError(problem)
        if args.world_size > 1:
            import torch.distributed as dist

            with torch.no_grad():
                for name in sorted(params):  # the same order on every process
                    dist.broadcast(params[name].data, src=0)
        logger.info("dev pairs: restored the weights of step %d (dev accuracy %.3f; the last step's: %.3f)",
                    self.best[1], self.best[0], self.history[-1]["dev_accuracy"])

    # -- one check --------------------------------------------------------------------------------
    def _check(self, args, state, control, model) -> None:
        import torch

        metrics = None
        if state.is_world_process_zero:
            metrics = dev_pair_accuracy(model, self.tokenizer, self.pairs, self.template, self.max_new_tokens,
                                        self.batch_size, self.enable_thinking)
        metrics = _from_main(args, metrics)
        self.last_step = state.global_step
        accuracy = metrics["dev_accuracy"]
        improved = self.best is None or accuracy >= self.best[0]
        if improved:
            self.best = (accuracy, state.global_step)
        row = {"step": state.global_step, **metrics, "best": improved}
        self.history.append(row)
        log, best = self._paths(args)
        if state.is_world_process_zero:
            append_jsonl(row, log)
            if improved and self.keep_best:
                weights = {n: p.detach().to("cpu", copy=True) for n, p in model.named_parameters() if p.requires_grad}
                tmp = best.with_suffix(".tmp")
                torch.save({"step": state.global_step, "weights": weights}, tmp)
                tmp.replace(best)
                best.with_suffix(".json").write_text(json.dumps({"step": state.global_step}), encoding="utf-8")
        if args.world_size > 1:
            from accelerate.utils import wait_for_everyone

            wait_for_everyone()
        logger.info("dev pairs at step %d: accuracy %.3f, format-valid %.3f%s", state.global_step, accuracy,
                    metrics["dev_format_valid"], " (best so far)" if improved else "")
        if self.target is not None and accuracy >= self.target and not control.should_training_stop:
            logger.info("dev pairs: accuracy %.3f >= dev_target %.3f at step %d, training stops", accuracy,
                        self.target, state.global_step)
            control.should_training_stop = True


def _from_main(args: Any, value: Any) -> Any:
    """The main process's `value` on every process (a broadcast; `value` itself with one process)."""
    if args.world_size <= 1:
        return value
    from accelerate.utils import broadcast_object_list

    box = [value]
    broadcast_object_list(box, from_process=0)
    return box[0]


def _saved_step(path: Path) -> int | None:
    """The step whose weights `dev-best.pt` holds (from its `dev-best.json` marker), None if none."""
    marker = path.with_suffix(".json")
    if not (path.is_file() and marker.is_file()):
        return None
    return json.loads(marker.read_text(encoding="utf-8")).get("step")


def _zero3(args: Any) -> bool:
    from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled

    return bool(getattr(args, "deepspeed", None)) and is_deepspeed_zero3_enabled()
