"""Which stages an IFEval recipe run builds: only what its rewards need and where `--until` stops it."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("rewards, until, stages", [
    (["rule"], "all", ["start"]),                   # the checkers' reward alone: no pairs, no judge
    (["bt", "rule"], "all", ["start", "pairs"]),    # BT trains on the pairs, no judge is trained
    (["judge", "rule"], "all", ["start", "pairs", "judge"]),
    (["judge", "--judge_model", "j"], "all", ["start"]),  # a judge given: nothing to train, no pairs
    (["judge", "bt", "--judge_model", "j"], "all", ["start", "pairs"]),  # BT still trained on the pairs
    (["judge", "bt", "--judge_model", "j", "--bt_model", "b"], "all", ["start"]),
    (["rule"], "start", ["start"]),
    (["rule"], "pairs", ["pairs"]),                 # the reward models' stages never measure the start policy
    (["rule"], "judge", ["pairs", "judge"]),        # asked to stop there: built as asked
    (["rule"], "reward_models", ["pairs", "judge", "bt", "measured"]),  # both reward models, then their accuracy
])
def test_a_run_builds_only_the_stages_its_rewards_need(rewards, until, stages, tmp_path, monkeypatch):
    from patarm.demo.downstream import loop, reward_models
    from patarm.demo.ifeval import judge, recipe

    ran: list[str] = []
    monkeypatch.setattr(recipe, "stage_prompts", lambda *a: {})
    monkeypatch.setattr(recipe, "stage_start", lambda *a: ran.append("start") or {})
    monkeypatch.setattr(loop, "stage_task", lambda *a: None)
    monkeypatch.setattr(recipe, "stage_pairs", lambda *a: ran.append("pairs") or ([], []))
    monkeypatch.setattr(judge, "stage_judge", lambda *a: ran.append("judge") or {})
    monkeypatch.setattr(loop, "stage_bt", lambda *a: ran.append("bt") or "bt-folder")
    accuracy = {"judge": {"accuracy": 0.5, "right": [1.0, 1.0, 0.0, 0.0]}, "bt": {"accuracy": 0.25,
                                                                              "right": [0.0, 1.0, 0.0, 0.0]}}
    monkeypatch.setattr(reward_models, "reward_model_accuracy", lambda args, bt: ran.append("measured") or accuracy)
    monkeypatch.setattr(loop, "run", lambda args: ran.append("policies") or {})
    heldout = tmp_path / "prep" / "heldout"  # the dev pairs: the chosen side longer in the first two
    heldout.mkdir(parents=True)
    heldout.joinpath("pairs.jsonl").write_text("".join(json.dumps({"chosen": c, "rejected": r}) + "\n" for c, r in [
        ("a b c", "a"), ("a b", "a"), ("a", "a b"), ("a", "a b c")]))
    report = recipe.run(recipe.parse_args(["--run_dir", str(tmp_path), "--nltk_data", "", "--rewards", *rewards,
                                           "--until", until]))
    assert ran == stages + (["policies"] if until == "all" else [])
    if until == "reward_models":  # both accuracies, and the two compared on the same pairs
        paired = {"judge vs bt": {"difference": 0.25, "pairs": 4, "judge alone right": 1, "bt alone right": 0,
                                  "p_value": 1.0}}
        by_length = {"judge": {"chosen longer": {"pairs": 2, "accuracy": 1.0}, "chosen shorter": {"pairs": 2,
                     "accuracy": 0.0}, "equal length": 0, "p_value": pytest.approx(1 / 3)},
                     "bt": {"chosen longer": {"pairs": 2, "accuracy": 0.5}, "chosen shorter": {"pairs": 2,
                            "accuracy": 0.0}, "equal length": 0, "p_value": pytest.approx(1.0)}}
        assert report["reward_models"] == {"accuracy": accuracy, "paired": paired, "by_length": by_length}
        assert json.loads((tmp_path / "eval" / "reward_models_paired.json").read_text()) == paired
        assert json.loads((tmp_path / "eval" / "reward_models_length.json").read_text()) == by_length
