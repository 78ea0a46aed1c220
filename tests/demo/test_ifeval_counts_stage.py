"""The IFEval recipe's judge stage with the counts template (`judge_template: pointwise-counts`) on tiny models."""

from __future__ import annotations

import json

import pytest
from test_ifeval_recipe import _tiny_setup  # the tiny models, prompts and configs of the recipe's end-to-end test

from helpers import run_cli
from patarm.demo.ifeval.prompts import registry


@pytest.mark.slow
def test_the_judge_stage_with_counts_on_tiny_models_states_them_in_training_and_records_its_template(
        tmp_path, bench, monkeypatch):
    """`--judge_template pointwise-counts --until judge`: the SFT corpus, the GRPO-PAR rollouts' prompts and the
    exported judge all carry the counts template, so `patarm serve` renders them for it."""
    from patarm.models.settings import judge_settings

    monkeypatch.setenv("NLTK_DATA", str(bench / "nltk_data"))  # the sentence counter of the counts needs punkt
    s = _tiny_setup(tmp_path)
    run = tmp_path / "run"
    varying = {"keywords:letter_frequency", "punctuation:no_comma", "keywords:frequency", "keywords:forbidden_words"}
    run_cli("downstream", "--recipe", "ifeval", "--until", "judge", "--judge_template", "pointwise-counts",
            "--run_dir", run, "--alpaca_file", s["alpaca"], "--ifeval_file", s["ifeval"], "--nltk_data",
            bench / "nltk_data", "--exclude_ids", *sorted(set(registry()[0]) - varying), "--policy_model", s["tiny"],
            "--judge_base", s["tiny"], "--dev_share", "0.4", "--min_constraints", "2", "--pair_prompts", "40",
            "--dev_pair_prompts", "40", "--pair_samples", "6", "--sample_max_new_tokens", "12", "--sft_pairs", "3",
            "--rl_pool", "3", "--rl_rollouts", "2", "--rl_keep", "0.0", "1.0", "--judge_grpo_steps", "1",
            "--max_prompt_tokens", "512", "--judge_max_new_tokens", "24", "--batch_size", "16", "--dtype", "float32")
    sft = [json.loads(line) for line in (run / "prep" / "pointwise" / "sft.jsonl").open()]
    assert sft and all("\n<counts>\nwords " in r["messages"][0]["content"] for r in sft)
    assert all(r["template"] == "pointwise-counts" for r in sft)
    said = "\n".join(r["messages"][-1]["content"] for r in sft)
    assert "no_comma :: commas " in said or "no_comma" not in said  # the teacher cites the block's words
    assert json.loads((run / "prep" / "pointwise" / "manifest.json").read_text())["judge_template"] == (
        "pointwise-counts")
    for stage in ("sft", "grpo", "export"):  # what `patarm serve` reads to render the judge's prompt
        assert judge_settings(run / stage)["template"] == "pointwise-counts", stage
