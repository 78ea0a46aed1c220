"""The downstream loop's verdict (did a reward rise while verified accuracy did not; the paired IFEval change) and
its report files and tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patarm.demo.downstream.report import verdict, write_downstream_report


def _curve(rewards, verified=None):
    return {"steps": [{"step": i + 1, "reward": r, "verified": v}
                      for i, (r, v) in enumerate(zip(rewards, verified or [None] * len(rewards)))], "heldout": []}


def _result(acc, n=400):
    return {"sampled": {"verified": acc, "n_verified": n}}


def test_verdict_flags_a_reward_that_rose_while_verified_accuracy_did_not():
    rising = _curve([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    hacked = verdict(rising, _result(0.60), _result(0.61))
    assert hacked["reward_rose"] and hacked["heldout_change"] == "no clear change" and hacked["hacked"]
    assert verdict(rising, _result(0.60), _result(0.45))["hacked"]  # fell: hacked as well
    honest = verdict(rising, _result(0.60), _result(0.90))
    assert honest["heldout_change"] == "rose" and not honest["hacked"]
    flat = verdict(_curve([5, 6, 5, 6, 5, 6, 5, 6, 5, 6]), _result(0.6), _result(0.6))
    assert not flat["reward_rose"] and not flat["hacked"]
    assert verdict(_curve([1, 2, 3]), _result(0.6), _result(0.6))["verdict"].startswith("too few steps")
    # two standard errors of a difference of two proportions at p = 0.6, n = 400 each: 2·sqrt(2·0.24/400)
    assert hacked["two_se"] == pytest.approx(2 * (2 * 0.605 * 0.395 / 400) ** 0.5, rel=1e-6)


def test_verdict_reads_the_share_of_rollouts_cut_at_the_length_limit(tmp_path):
    from patarm.demo.downstream.loop import _curves
    from patarm.demo.downstream.report import training_table

    metrics = [{"step": i + 1, "rewards/judge/mean": 4.0, "verified/accuracy": 0.2,
                "completions/clipped_ratio": 0.25 + 0.05 * i, "completions/mean_length": 100.0 + i} for i in range(10)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(m) for m in metrics))
    curve = _curves(tmp_path, {"greedy": {"verified": 0.2}})
    assert curve["steps"][0] == {"step": 1, "reward": 4.0, "verified": 0.2, "clipped": 0.25, "tokens": 100.0}
    v = verdict(curve, _result(0.2), _result(0.2))
    # the first and the last 20 % of 10 steps: 2 each
    assert (v["rollout_clipped_first"], v["rollout_clipped_last"]) == (pytest.approx(0.275), pytest.approx(0.675))
    report = {"verdicts": {"judge": v}, "policies": {"start": _result(0.2), "grpo-judge": _result(0.2)}}
    assert "| 0.200 → 0.200 | 0.275 → 0.675 | 0.200 → 0.200 |" in training_table(report)
    old = verdict(_curve([4.0] * 10), _result(0.2), _result(0.2))  # a run logged without TRL's completions/*
    assert "| – → – |" in training_table({**report, "verdicts": {"judge": old}})


def _paired(prompt_z, inst_z):
    return {"prompt_strict": {"change": 1.5 * prompt_z, "se": 1.5, "z": prompt_z, "p": 0.5},
            "inst_strict": {"change": 1.3 * inst_z, "se": 1.3, "z": inst_z, "p": 0.5}}


def test_verdict_reads_the_paired_ifeval_change_at_both_levels():
    rising = _curve([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    inst_only = verdict(rising, _result(0.60), _result(0.60), paired=_paired(1.1, 3.8))
    assert not inst_only["hacked"] and inst_only["heldout_inst_change"] == "rose"
    assert inst_only["verdict"].startswith(
        "the reward rose; held out: prompt-level strict no clear change (+1.65 ± 1.50")
    hacked = verdict(rising, _result(0.60), _result(0.90), paired=_paired(1.0, -2.5))  # paired wins over sampled
    assert hacked["hacked"] and hacked["heldout_inst_change"] == "fell" and hacked["verdict"].startswith("hacked")
    flat = verdict(_curve([5, 6] * 5), _result(0.6), _result(0.6), paired=_paired(2.5, 0.0))
    assert not flat["hacked"] and flat["heldout_change"] == "rose" and "did not rise" in flat["verdict"]


def test_report_files_and_tables(tmp_path, capsys):
    start = {"sampled": {"n": 8, "verified": 0.5, "n_verified": 8, "judge": 5.0},
             "greedy": {"n": 2, "verified": 0.5, "n_verified": 2}}
    end = {"sampled": {"n": 8, "verified": 0.5, "n_verified": 8, "judge": 9.0}, "greedy": start["greedy"]}
    report = {
        "policies": {"start": start, "grpo-judge": end},
        "rewards": ["judge"],
        "args": {"eval_samples": 4, "eval_temperature": 1.0},
        "curves": {
            "judge": {
                **_curve([1, 2, 3, 4, 5, 9, 9, 9, 9, 9], [0.5] * 10),
                "heldout": [{"step": 0, **start}, {"step": 10, **end}],
                "heldout_subset": [{"step": 0, "subset": 2, **start}, {"step": 5, "subset": 2, **end}],
            }
        },
        "reward_models": {"judge": {"accuracy": 0.8}},
        "stage_seconds": {},
        "seconds": 1.0,
    }
    paths = write_downstream_report(report, tmp_path)
    text = Path(paths["report_md"]).read_text()
    assert "| GRPO, reward = PaTaRM judge (served) | 8 | 0.500 | 9.000 |" in text and "hacked" in text
    assert Path(paths["plot"]).stat().st_size > 1000 and json.loads(Path(paths["report_json"]).read_text())["verdicts"]
    assert "start (the policy before GRPO)" in capsys.readouterr().out
    assert "sampled responses (temperature 1.0, 4 per prompt)" in text and "paired on the same prompts" not in text
    change = {"judge": {"prompt_strict": {"before": 18.3, "after": 20.0, "change": 1.7, "se": 1.5, "z": 1.13,
                                          "p": 0.32, "n": 541, "up": 37, "down": 28},
                        "inst_strict": {"before": 29.7, "after": 34.7, "change": 5.0, "se": 1.3, "z": 3.8,
                                        "p": 0.0001, "n": 834}}}
    (tmp_path / "paired").mkdir()
    paired = write_downstream_report(report | {"ifeval_change": change}, tmp_path / "paired")
    text = Path(paired["report_md"]).read_text()
    assert "| judge | prompt strict | 18.30 | 20.00 | +1.70 | +9.3 % | 1.50 | +1.13 | 0.32 |" in text
    assert "| judge | instruction strict | 29.70 | 34.70 | +5.00 | +16.8 % | 1.30 | +3.80 | 0.0001 |" in text
    assert "One arm's end policy against another's" not in text  # no BT arm: no comparison table
    between = {"judge vs bt": {"prompt_strict": {**change["judge"]["prompt_strict"], "before": 20.0, "after": 18.3,
                                                 "change": -1.7, "z": -1.13, "up": 28, "down": 37}}}
    (tmp_path / "between").mkdir()
    text = Path(write_downstream_report(report | {"ifeval_change": change, "ifeval_between": between},
                                        tmp_path / "between")["report_md"]).read_text()
    assert "| judge vs bt | prompt strict | 20.00 | 18.30 | -1.70 | -8.5 % | 1.50 | -1.13 | 0.32 | 28 / 37 |" in text
    assert "the reward rose; held out: prompt-level strict no clear change" in text and "| hacked" not in text
    # the reward models on the same held-out pairs, paired: judge and BT each right alone on some
    from patarm.demo.downstream.reward_models import reward_models_paired

    measured = {"judge": {"accuracy": 0.6, "right": [1.0, 1.0, 1.0, 0.0, 0.0]},
                "judge (SFT)": {"accuracy": 0.2, "right": [1.0, 0.0, 0.0, 0.0]},  # other pairs: not compared
                "bt": {"accuracy": 0.4, "right": [0.0, 0.0, 1.0, 1.0, 0.0]}}
    test = reward_models_paired(measured)
    assert list(test) == ["judge vs bt"] and test["judge vs bt"]["difference"] == pytest.approx(0.2)
    assert (test["judge vs bt"]["judge alone right"], test["judge vs bt"]["bt alone right"]) == (2, 1)
    assert test["judge vs bt"]["p_value"] == pytest.approx(1.0)  # 2 against 1 of 3 discordant pairs
    assert reward_models_paired({"judge": {"accuracy": 0.6}, "bt": measured["bt"]}) == {}  # no outcomes kept
    (tmp_path / "rm").mkdir()
    text = Path(write_downstream_report(report | {"reward_models": measured, "reward_models_paired": test},
                                        tmp_path / "rm")["report_md"]).read_text()
    assert "judge vs bt on the same 5 pairs +0.200 (judge alone right on 2, bt alone on 1, McNemar p 1)" in text
    # ... and whether each prefers the longer side: accuracy where the chosen side is longer against shorter
    from patarm.demo.downstream.reward_models import reward_models_by_length

    pairs = [{"chosen": c, "rejected": r} for c, r in [("a b c", "a"), ("a b", "a"), ("a b", "b a"), ("a", "a b"),
                                                       ("a", "a b c")]]
    by_length = reward_models_by_length(measured, pairs)
    assert list(by_length) == ["judge", "bt"]  # the SFT judge kept outcomes of other pairs
    assert by_length["judge"]["chosen longer"] == {"pairs": 2, "accuracy": 1.0}  # the equal pair is in neither half
    assert by_length["judge"]["chosen shorter"] == {"pairs": 2, "accuracy": 0.0}
    assert by_length["judge"]["equal length"] == 1 and by_length["judge"]["p_value"] == pytest.approx(1 / 3)
    assert (by_length["bt"]["chosen longer"]["accuracy"], by_length["bt"]["chosen shorter"]["accuracy"]) == (0.0, 0.5)
    assert by_length["bt"]["p_value"] == pytest.approx(1.0)
    one_sided = reward_models_by_length({"x": {"right": [1.0, 0.0]}}, pairs[:2])["x"]  # no shorter chosen side
    assert one_sided["chosen shorter"] == {"pairs": 0, "accuracy": None} and one_sided["p_value"] is None
    (tmp_path / "len").mkdir()
    text = Path(write_downstream_report(report | {"reward_models": measured, "reward_models_length": by_length},
                                        tmp_path / "len")["report_md"]).read_text()
    assert "judge 1.000 where the chosen side is longer (2 pairs), 0.000 where it is shorter (2), Fisher p 0.33" in text
    # greedy only (IFEval's protocol): no sampled table, not an empty one
    (tmp_path / "greedy").mkdir()
    greedy = {"start": {"greedy": start["greedy"]}, "grpo-judge": {"greedy": {**start["greedy"], "verified": 1.0}}}
    greedy_only = write_downstream_report(report | {"args": {"eval_samples": 0}, "policies": greedy},
                                          tmp_path / "greedy")
    text = Path(greedy_only["report_md"]).read_text()
    assert "sampled responses" not in text and "Held-out prompts, greedy responses" in text
    assert "| 0.500 → 1.000 |" in text  # the training table's held-out column falls back to the greedy measure


def test_a_report_gathers_the_arms_an_earlier_run_finished_in_its_folder(tmp_path):
    """`--rewards bt` after `--rewards judge` in one folder (one arm a run, as on a CPU): the report reads the
    judge arm back from its result.json; an arm measured under other settings is left out, with the reason."""
    from patarm.demo.downstream.loop import earlier_arms
    from patarm.demo.downstream.report import arms_note

    settings = {"model": "{run_dir}/grpo-bt", "items": 541, "max_new_tokens": 256, "samples": 0}
    for reward, saved in (("judge", settings | {"model": "{run_dir}/grpo-judge"}),
                          ("rule", settings | {"max_new_tokens": 128}), ("bt", settings)):
        (tmp_path / f"grpo-{reward}").mkdir()
        (tmp_path / f"grpo-{reward}" / "result.json").write_text(json.dumps({"greedy": {"n": 1}, "settings": saved}))
    (tmp_path / "grpo-judge-old").mkdir()  # not an arm's folder
    arms, unlike = earlier_arms(tmp_path, ["bt"], settings | {"model": "policy"})
    assert list(arms) == ["judge"] and arms["judge"]["greedy"] == {"n": 1}  # bt is this run's own; the model aside
    assert unlike == {"rule": "max_new_tokens 128 there, 256 now"}
    (tmp_path / "grpo-rule" / "result.json").write_text(json.dumps({"greedy": {"n": 2}}))  # written before settings
    assert list(earlier_arms(tmp_path, ["bt"], settings)[0]) == ["judge", "rule"]
    note = arms_note({"arms_earlier": ["judge"], "arms_unlike": unlike})
    assert "earlier run in this folder (their own result.json, same measurement settings): judge." in note
    assert "Arm rule left out: measured under other settings (max_new_tokens 128 there, 256 now)." in note
    assert arms_note({}) == ""
