"""Export a trained judge to the Hugging Face format: safetensors weights (LoRA merged), tokenizer
with its chat template, generation config, and a model card with the training config, rubric mode,
margin function and, when given, evaluation results.

    patarm export [--checkpoint {run_dir}/grpo] [--output {run_dir}/export] [--push_to_hub REPO]

It reads only what training wrote: the saved judge and its `patarm_config.json`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patarm.config import RunArguments
from patarm.io import output_apart, write_json
from patarm.models.settings import RUN_CONFIG_FILE, read_run_config


@dataclass
class ExportArguments(RunArguments):
    """Export a trained judge to the Hugging Face format."""

    checkpoint: str = field(default="{run_dir}/grpo", metadata={"path": "input", "help":
                            "the trained judge folder (a stage's output_dir or a checkpoint-N inside it)"})
    output: str = field(default="{run_dir}/export", metadata={"help": "the export folder"})
    overwrite: bool = field(default=False, metadata={"help": "replace an existing, non-empty output folder"})
    push_to_hub: str | None = field(default=None, metadata={"help": "also push to this hub repo id"})
    eval_results: str | None = field(default=None, metadata={"path": "input", "help":
                                     "a metrics.json (e.g. of `patarm eval`) to put in the model card"})


def _load(checkpoint: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not checkpoint.is_dir():
        raise FileNotFoundError(f"checkpoint {checkpoint} is not a folder; export a trained judge folder "
                                "(e.g. {run_dir}/grpo, written by `patarm grpo`)")
    if not any((checkpoint / name).is_file() for name in ("config.json", "adapter_config.json")):
        raise FileNotFoundError(f"{checkpoint} holds no saved model (no config.json or adapter_config.json)")
    if (checkpoint / "adapter_config.json").is_file():
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(str(checkpoint)).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(str(checkpoint))
    return model, AutoTokenizer.from_pretrained(str(checkpoint))


def model_card(config: dict[str, Any], eval_results: dict[str, Any] | None) -> str:
    """The README.md of an exported judge."""
    data = config.get("data", {})
    lines = [
        "---", "library_name: transformers", "tags: [patarm, reward-model, generative-reward-model, llm-judge]", "---",
        "", "# PaTaRM judge", "",
        "A pointwise generative reward model trained with PaTaRM (Preference-Aware Reward + task-adaptive rubrics).",
        "It reads a conversation and one response and writes `<rubric>`, `<eval>` and `<score>` tags.", "",
        "| setting | value |", "|---|---|",
        f"| training stage | {config.get('stage', 'unknown')} |",
        f"| judge template | {data.get('judge_template', 'pointwise')} |",
        f"| rubric mode | {data.get('rubric_mode', 'adaptive')} |",
        f"| margin function f(δ) | {data.get('margin', 'graded')} |",
        f"| base model | {config.get('model_name_or_path', 'unknown')} |", "",
        "## Latest evaluation results", "",
    ]
    if eval_results:
        lines += ["```json", json.dumps(eval_results, indent=2, sort_keys=True), "```"]
    else:
        lines.append("No evaluation results were recorded for this checkpoint.")
    lines += [
        "",
        "## Training configuration",
        "",
        "```json",
        json.dumps(config, indent=2, sort_keys=True, default=str),
        "```",
        "",
    ]
    return "\n".join(lines)


def export(checkpoint: str | Path, out: str | Path, push_to_hub: str | None = None,
           eval_results: dict[str, Any] | None = None, overwrite: bool = False) -> Path:
    """Write the export to `out` (built in a temporary folder, then moved into place). An existing,
    non-empty `out` is replaced only with `overwrite`."""
    checkpoint, out = Path(checkpoint), Path(out)
    output_apart(out, [checkpoint])
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise FileExistsError(f"export folder {out} exists and is not empty; pass --overwrite to replace it, "
                              "or choose another --output")
    model, tokenizer = _load(checkpoint)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Built in a fresh hidden folder beside `out`, then moved into place; removed whatever happens.
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if model.generation_config is not None:
            model.generation_config.save_pretrained(tmp)
        config = read_run_config(checkpoint) or read_run_config(checkpoint.parent)  # checkpoint-N: its run's
        write_json(config, tmp / RUN_CONFIG_FILE)
        (tmp / "README.md").write_text(model_card(config, eval_results))
        if out.is_dir():
            shutil.rmtree(out)
        elif out.exists():  # --overwrite of a file
            out.unlink()
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if push_to_hub:
        model.push_to_hub(push_to_hub)
        tokenizer.push_to_hub(push_to_hub)
        from huggingface_hub import upload_file

        upload_file(path_or_fileobj=str(out / "README.md"), path_in_repo="README.md", repo_id=push_to_hub)
    return out



def main(args: ExportArguments) -> Path:
    """`patarm export` on parsed arguments."""
    from patarm.io import read_json

    results = read_json(args.eval_results) if args.eval_results else None
    return export(args.checkpoint, args.output, args.push_to_hub, results, overwrite=args.overwrite)
