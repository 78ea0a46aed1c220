"""Pieces every training stage shares: model loading (any `patarm.models` spec), the thinking switch, the
CPU precision choice, logging set-up, per-step metrics to a file, and checkpoints that are marked complete
only after everything is written."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

from patarm.io import append_jsonl, write_json, write_jsonl
from patarm.models.settings import RUN_CONFIG_FILE

logger = logging.getLogger(__name__)

COMPLETE_MARKER = "CHECKPOINT_COMPLETE"
# /proc/cpuinfo flags of CPUs with native bf16 matrix instructions, where bf16 autocast beats fp32.
CPU_BF16_FLAGS = ("amx_bf16", "avx512_bf16")

_CKPT_RE = re.compile(r"^checkpoint-(\d+)$")


def load_model(model_args: Any, texts: Iterable[str], seed: int, output_dir: str) -> tuple[Any, Any]:
    """The causal LM and tokenizer of `model_args.model_name_or_path` (any `patarm.models` spec; a
    `tiny` one is built from `texts` under `<output_dir>/tiny-base`)."""
    from patarm.models import load_causal_lm

    return load_causal_lm(model_args.model_name_or_path, texts=texts, output_dir=output_dir, seed=seed,
                          dtype=model_args.dtype)


def thinking_switch(value: bool | None, model: str) -> bool:
    """The chat template's `enable_thinking` for a stage: `value` when given, else what `model` (a judge
    folder) was trained with, else False (the judge writes its judgment directly)."""
    if value is not None:
        return bool(value)
    from patarm.models.settings import read_run_config

    return bool((read_run_config(model).get("data") or {}).get("enable_thinking", False))


def cpu_bf16(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> tuple[bool, str]:
    """(whether bf16 autocast is the default on this CPU, why): yes when the CPU has native bf16 matrix
    instructions (AMX-BF16 or AVX512-BF16, read from `cpuinfo`'s flags), where autocast runs the matmuls
    in bf16 faster than fp32 (bench/real_model.py measures it); otherwise bf16 is emulated and slower."""
    try:
        flags = set(next((line.split(":", 1)[1].split() for line in Path(cpuinfo).read_text().splitlines()
                          if line.startswith("flags")), []))
    except OSError:
        return False, f"{cpuinfo} is not readable, so bf16 support is unknown"
    found = [f for f in CPU_BF16_FLAGS if f in flags]
    if not found:
        return False, f"the CPU has none of {', '.join(CPU_BF16_FLAGS)} (bf16 would be emulated)"
    capped = kernels_capped()
    if capped:
        return False, f"the CPU has {', '.join(found)}, but {capped} (bf16 would be emulated)"
    return True, f"the CPU has {', '.join(found)}"


# oneDNN's ISA caps (ONEDNN_MAX_CPU_ISA) at or above which it has native bf16 dot products; ATen's (ATEN_CPU_CAPABILITY)
ONEDNN_BF16_ISAS = ("AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX10_1_512", "AVX512_CORE_AMX", "AVX10_1_512_AMX",
                    "AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX_FP16", "DEFAULT", "ALL")


def kernels_capped(env: dict | None = None) -> str:
    """Why the kernels run below the CPU's bf16 instructions, or "" when they do not: another CPU's kernels forced
    through the environment (`ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`, as the README's kernel checks do)
    leave bf16 matmuls emulated, so the precision a run picks follows the kernels, as on that other CPU."""
    env = os.environ if env is None else env
    onednn = env.get("ONEDNN_MAX_CPU_ISA", env.get("DNNL_MAX_CPU_ISA", "")).strip().upper()
    if onednn and onednn not in ONEDNN_BF16_ISAS:
        return f"ONEDNN_MAX_CPU_ISA={onednn} caps oneDNN below AVX512_CORE_BF16"
    aten = env.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    if aten and not aten.startswith("avx512"):
        return f"ATEN_CPU_CAPABILITY={aten} caps ATen below AVX-512"
    return ""


def auto_dtype(value: str, device: str = "cpu") -> str:
    """A weights' dtype for generation: `value` itself unless it is "auto", which means bfloat16 where the device
    computes in it natively (a CUDA GPU with bf16; a CPU per `cpu_bf16`) and float32 elsewhere. On a CPU without
    bf16 instructions bf16 matmuls are emulated: 1.2 against 58 GFLOP/s in fp32 (one thread, 256×576×1536,
    an AVX2-only EPYC)."""
    if value != "auto":
        return value
    if device.startswith("cuda"):
        import torch

        return "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float32"
    return "bfloat16" if cpu_bf16()[0] else "float32"


def precision_sentence(bf16: bool, fast: bool, why: str) -> str:
    """The run log's one sentence on CPU precision: what was chosen and why (the default, or set against it)."""
    chosen, default = ("bf16 autocast" if bf16 else "fp32"), ("bf16 autocast" if fast else "fp32")
    if bf16 == fast:
        return f"CPU training in {chosen}, the default here: {why}"
    return f"CPU training in {chosen}, as set by bf16={str(bf16).lower()} (the default here is {default}: {why})"


def require_input(path: str, what: str, remedy: str) -> None:
    """Fail before any work when a stage's local input file is missing; `remedy` names the command that writes
    it. A hub id (`owner/name`, no file suffix) is left to the loader."""
    if Path(path).suffix and not Path(path).exists():
        raise FileNotFoundError(f"{what} {path} does not exist; {remedy}")


def setup_logging(args: Any) -> None:
    """Trackers write under the run's output folder (not the working directory), and wandb runs offline
    when no API key is configured, instead of failing or prompting. On a CPU the run log says which
    precision it trains in and why."""
    if getattr(args, "use_cpu", False):
        logger.info(precision_sentence(bool(args.bf16), *cpu_bf16()))
    targets = [args.report_to] if isinstance(args.report_to, str) else list(args.report_to or [])
    if "wandb" in targets or "all" in targets:
        os.environ.setdefault("WANDB_DIR", str(args.output_dir))
        Path(args.output_dir).mkdir(parents=True, exist_ok=True)
        if not os.environ.get("WANDB_API_KEY") and not (Path.home() / ".netrc").exists():
            os.environ.setdefault("WANDB_MODE", "offline")


def complete_checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    """Checkpoint folders under `output_dir` that were fully written, oldest first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _CKPT_RE.match(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found) if (p / COMPLETE_MARKER).is_file()]


def resolve_resume(resume: str | bool | None, output_dir: str) -> str | None:
    """`--resume_from_checkpoint true` → the newest *complete* checkpoint (half-written ones are skipped)."""
    if resume in (None, False, "", "false", "False"):
        return None
    if resume in (True, "true", "True", "last"):
        done = complete_checkpoints(output_dir)
        if not done:
            raise FileNotFoundError(
                f"no complete checkpoint (with {COMPLETE_MARKER}) under {output_dir} to resume from"
            )
        return str(done[-1])
    if not (Path(resume) / COMPLETE_MARKER).is_file():
        raise FileNotFoundError(f"{resume} is not a complete checkpoint (no {COMPLETE_MARKER}); it may be half-written")
    return str(resume)


class AtomicCheckpointMixin:
    """Marks a checkpoint complete only after the model, optimizer, RNG and trainer state are all on disk
    (on every process), so a crash mid-save never leaves a checkpoint that looks complete."""

    def _save_checkpoint(self, model, trial):  # noqa: D401 - HF Trainer hook
        super()._save_checkpoint(model, trial)
        self.accelerator.wait_for_everyone()
        if self.args.should_save:
            folder = Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}"
            (folder / COMPLETE_MARKER).write_text(f"step {self.state.global_step}\n")


class JsonlMetricsCallback(TrainerCallback):
    """Appends every log line (loss, rewards, PAR metrics) to `<output_dir>/metrics.jsonl` on the main process.
    A resumed run first drops the rows logged after its checkpoint, so each step appears once; a run from step 0
    starts the file afresh (a stopped run's rows would otherwise precede its own)."""

    def on_train_begin(self, args, state, control, **kwargs):
        path = Path(args.output_dir) / "metrics.jsonl"
        if state.is_world_process_zero and state.global_step == 0:
            path.unlink(missing_ok=True)
        elif state.is_world_process_zero and path.is_file():
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            write_jsonl([r for r in rows if r.get("step", 0) <= state.global_step], path)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            append_jsonl({"step": state.global_step, **logs}, Path(args.output_dir) / "metrics.jsonl")


def weight_fingerprint(named_tensors: Iterable[tuple[str, Any]]) -> dict[str, list]:
    """{name: [sha256 of the fp32 bytes, sum]} of each tensor: equal fingerprints mean bit-equal weights,
    and the sum shows how far apart unequal ones are."""
    import hashlib

    out = {}
    for name, tensor in named_tensors:
        t = tensor.detach().to("cpu", copy=True).float().contiguous()
        out[name] = [hashlib.sha256(t.numpy().tobytes()).hexdigest(), float(t.double().sum())]
    return out


class WeightAuditCallback(TrainerCallback):
    """`PATARM_WEIGHT_AUDIT=DIR`: at the end of training every process writes the fingerprint of its full
    weights (gathered first under DeepSpeed ZeRO-3, where each process holds a shard) to `DIR/rank-<r>.json`,
    so a multi-process or multi-node run can show that its processes ended with the same model."""

    def __init__(self, folder: str):
        self.folder = Path(folder)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        import contextlib

        params = list(model.named_parameters())
        gather = contextlib.nullcontext()
        if any(hasattr(p, "ds_id") for _, p in params):  # ZeRO-3: collective, every process takes part
            import deepspeed

            gather = deepspeed.zero.GatheredParameters([p for _, p in params], modifier_rank=None)
        with gather:
            fingerprint = weight_fingerprint(params)
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json({"rank": args.process_index, "step": state.global_step, "weights": fingerprint},
                   self.folder / f"rank-{args.process_index}.json")


class QuietProgressCallback(ProgressCallback):
    """The training progress bar without the metrics dict it prints at every log step (those go to
    metrics.jsonl and the trackers); the bar shows the latest loss instead."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None and logs:
            # a step whose rollouts got no reward at all (e.g. a judge that parsed none) logs None: skip it
            shown = {k: logs[k] for k in ("loss", "reward", "par/pair_accuracy")
                     if isinstance(logs.get(k), (int, float))}
            if shown:
                self.training_bar.set_postfix({k.split("/")[-1]: f"{v:.3g}" for k, v in shown.items()}, refresh=False)


def write_run_config(output_dir: str, stage: str, data: Any, args: Any, model_args: Any, trainer: Any) -> None:
    """`patarm_config.json` beside the saved judge: what `patarm export` puts in the model card."""
    if not trainer.accelerator.is_main_process:
        return
    from dataclasses import asdict

    config = {"stage": stage, "model_name_or_path": model_args.model_name_or_path, "data": asdict(data),
              "training": {k: v for k, v in args.to_dict().items() if not k.startswith("_")}}
    write_json(config, Path(output_dir, RUN_CONFIG_FILE))


def train_and_save(trainer: Any, stage: str, data: Any, args: Any, model_args: Any) -> Any:
    """The tail every stage shares: train (resuming from the newest complete checkpoint when asked),
    save the model, and write `patarm_config.json` beside it."""
    if any(isinstance(cb, ProgressCallback) for cb in trainer.callback_handler.callbacks):
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(QuietProgressCallback)
    if os.environ.get("PATARM_WEIGHT_AUDIT"):
        trainer.add_callback(WeightAuditCallback(os.environ["PATARM_WEIGHT_AUDIT"]))
    trainer.train(resume_from_checkpoint=resolve_resume(args.resume_from_checkpoint, args.output_dir))
    trainer.save_model(args.output_dir)
    write_run_config(args.output_dir, stage, data, args, model_args, trainer)
    return trainer
