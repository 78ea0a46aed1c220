"""Pieces every training stage shares: model loading (a hub id, a local folder, or a tiny local
judge), logging set-up, and checkpoints that are marked complete only after everything is written."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import torch
from transformers import TrainerCallback

COMPLETE_MARKER = "CHECKPOINT_COMPLETE"
_CKPT_RE = re.compile(r"^checkpoint-(\d+)$")


@dataclass
class TinyModelArguments:
    """Used when `model_name_or_path` is `tiny`: a random-init Qwen3 + a BPE trained on the data."""

    tiny_hidden_size: int = field(default=64, metadata={"help": "Hidden size of the tiny Qwen3 (model_name_or_path: tiny)."})
    tiny_num_layers: int = field(default=2, metadata={"help": "Decoder layers of the tiny Qwen3."})
    tiny_num_heads: int = field(default=4, metadata={"help": "Attention heads of the tiny Qwen3."})
    tiny_num_kv_heads: int = field(default=2, metadata={"help": "Key/value heads of the tiny Qwen3."})
    tiny_vocab_size: int = field(default=1024, metadata={"help": "BPE vocabulary of the tiny tokenizer."})


def build_tiny_base(texts: Iterable[str], out_dir: str | os.PathLike, tiny: TinyModelArguments | None = None,
                    seed: int = 0) -> str:
    """Build and save the tiny judge in `out_dir` (so LoRA adapters and exports can point at a real base).
    Only the main process writes; the others wait and then load the same files."""
    from accelerate import PartialState

    from patarm.models.tiny import build_tiny_judge

    tiny = tiny or TinyModelArguments()
    state = PartialState()
    with state.main_process_first():
        if state.is_main_process:
            build_tiny_judge(list(texts), out_dir, vocab_size=tiny.tiny_vocab_size, seed=seed,
                             hidden_size=tiny.tiny_hidden_size, num_layers=tiny.tiny_num_layers,
                             num_heads=tiny.tiny_num_heads, num_kv_heads=tiny.tiny_num_kv_heads)
    return str(out_dir)


def load_model_and_tokenizer(name_or_path: str, texts: Iterable[str] = (), tiny: TinyModelArguments | None = None,
                             seed: int = 0, dtype: str | None = None, output_dir: str | None = None, **model_kwargs: Any):
    """A causal LM and its tokenizer (left padding) from a hub id or folder, or `tiny`: built locally
    from `texts` and saved under `<output_dir>/tiny-base`, then loaded from there."""
    if name_or_path == "tiny":
        name_or_path = build_tiny_base(texts, Path(output_dir or "runs") / "tiny-base", tiny, seed)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name_or_path, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if dtype not in (None, "auto"):
        model_kwargs["dtype"] = getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(name_or_path, **model_kwargs)
    return model, tokenizer


def setup_logging(report_to: Any) -> None:
    """wandb runs offline when no API key is configured, instead of failing or prompting."""
    targets = [report_to] if isinstance(report_to, str) else list(report_to or [])
    if "wandb" in targets or "all" in targets:
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
            raise FileNotFoundError(f"no complete checkpoint (with {COMPLETE_MARKER}) under {output_dir} to resume from")
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
    """Appends every log line (loss, rewards, PAR metrics) to `<output_dir>/metrics.jsonl` on the main process."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            import json

            Path(args.output_dir).mkdir(parents=True, exist_ok=True)
            with open(Path(args.output_dir) / "metrics.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"step": state.global_step, **logs}) + "\n")


def write_run_config(output_dir: str, stage: str, data: Any, args: Any, model_args: Any, trainer: Any) -> None:
    """`patarm_config.json` beside the saved judge: what `patarm export` puts in the model card."""
    if not trainer.accelerator.is_main_process:
        return
    import json
    from dataclasses import asdict

    config = {"stage": stage, "model_name_or_path": model_args.model_name_or_path, "data": asdict(data),
              "training": {k: v for k, v in args.to_dict().items() if not k.startswith("_")}}
    Path(output_dir, "patarm_config.json").write_text(json.dumps(config, indent=2, default=str))


def train_and_save(trainer: Any, stage: str, data: Any, args: Any, model_args: Any) -> Any:
    """The tail every stage shares: train (resuming from the newest complete checkpoint when asked),
    save the model, and write `patarm_config.json` beside it."""
    trainer.train(resume_from_checkpoint=resolve_resume(args.resume_from_checkpoint, args.output_dir))
    trainer.save_model(args.output_dir)
    write_run_config(args.output_dir, stage, data, args, model_args, trainer)
    return trainer
