"""Export a trained judge to the Hugging Face format: safetensors weights (LoRA merged), tokenizer
with its chat template, generation config, and a model card with the training config, rubric mode,
margin function and the latest evaluation results.

    patarm export CHECKPOINT OUT [--push-to-hub REPO] [--eval-results metrics.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

CONFIG_FILE = "patarm_config.json"


def _load(checkpoint: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

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
    lines += ["", "## Training configuration", "", "```json", json.dumps(config, indent=2, sort_keys=True, default=str), "```", ""]
    return "\n".join(lines)


def export(checkpoint: str | Path, out: str | Path, push_to_hub: str | None = None,
           eval_results: dict[str, Any] | None = None) -> Path:
    """Write the export to `out` (built in a temporary folder, then moved into place)."""
    checkpoint, out = Path(checkpoint), Path(out)
    model, tokenizer = _load(checkpoint)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    if model.generation_config is not None:
        model.generation_config.save_pretrained(tmp)
    config_path = checkpoint / CONFIG_FILE
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    if eval_results is None and (checkpoint / "eval_results.json").is_file():
        eval_results = json.loads((checkpoint / "eval_results.json").read_text())
    (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2, default=str))
    (tmp / "README.md").write_text(model_card(config, eval_results))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    if push_to_hub:
        model.push_to_hub(push_to_hub)
        tokenizer.push_to_hub(push_to_hub)
        from huggingface_hub import upload_file

        upload_file(path_or_fileobj=str(out / "README.md"), path_in_repo="README.md", repo_id=push_to_hub)
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="patarm export", description="Export a judge checkpoint to the HF format.")
    parser.add_argument("checkpoint")
    parser.add_argument("out")
    parser.add_argument("--push-to-hub", metavar="REPO", default=None)
    parser.add_argument("--eval-results", metavar="JSON", default=None, help="metrics.json to put in the model card")
    ns = parser.parse_args(argv)
    results = json.loads(Path(ns.eval_results).read_text()) if ns.eval_results else None
    print(export(ns.checkpoint, ns.out, ns.push_to_hub, results))
