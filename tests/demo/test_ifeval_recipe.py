"""The IFEval downstream recipe (`patarm downstream --recipe ifeval`): verifiable prompts, checker-labelled pairs,
the checker-backed teacher, the checker reward, its configs, and (slow) every stage end to end on tiny models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import IFEVAL_ROW as ROW
from helpers import ROOT, run_cli
from helpers import ifeval_pair_row as _row
from patarm.demo.ifeval.pairs import label_pairs
from patarm.demo.ifeval.prompts import REPEAT, PromptSettings, build_prompts, draw_constraints, registry
from patarm.demo.ifeval.teacher import ConstraintTeacher, judgment_text, score_of

# their checkers need NLTK's punkt data (not in a fresh clone)
NO_SENTENCES = ("length_constraints:number_sentences", "change_case:capital_word_frequency")
INSTRUCTIONS = [f"Write a short note about topic number {i} for a friend." for i in range(40)]


def _alpaca(tmp_path: Path, extra: list[dict] = ()) -> Path:
    rows = [{"instruction": t, "input": "", "output": "x"} for t in INSTRUCTIONS] + list(extra)
    path = tmp_path / "alpaca.json"
    path.write_text(json.dumps(rows))
    return path


def _ifeval(tmp_path: Path, prompts: list[str]) -> Path:
    path = tmp_path / "input_data.jsonl"
    path.write_text("".join(json.dumps({"key": i, "prompt": p, "instruction_id_list": ["punctuation:no_comma"],
                                        "kwargs": [{}]}) + "\n" for i, p in enumerate(prompts)))
    return path


def test_prompts_draw_registry_constraints_deterministically_split_by_instruction_and_count_what_is_skipped(tmp_path):
    extra = [{"instruction": "Summarise this.", "input": "a text", "output": ""},       # has an input
             {"instruction": INSTRUCTIONS[0], "input": "", "output": ""}]             # a duplicate
    alpaca = _alpaca(tmp_path, extra)
    test_prompt = f"{INSTRUCTIONS[1]} Do not use any commas."  # an instruction inside an official test prompt
    ifeval = _ifeval(tmp_path, [test_prompt, "Write a limerick about cats."])
    settings = PromptSettings(seed=3, dev_share=0.25)
    train, dev, manifest = build_prompts(alpaca, ifeval, settings)
    assert build_prompts(alpaca, ifeval, settings)[:2] == (train, dev)  # deterministic
    assert build_prompts(alpaca, ifeval, PromptSettings(seed=4, dev_share=0.25))[0] != train  # the seed matters
    assert manifest.consistent and manifest.rows_in == 42 and manifest.rows_out == len(train) + len(dev) == 39
    assert dict(manifest.dropped) == {"has_input": 1, "duplicate_instruction": 1, "in_an_ifeval_test_prompt": 1}
    assert not {r["instruction"] for r in train} & {r["instruction"] for r in dev} and train and dev
    classes, conflicts = registry()
    for row in train + dev:
        ifeval = json.loads(row["ifeval_row"])
        ids, kwargs = ifeval["instruction_id_list"], ifeval["kwargs"]
        assert 1 <= len(ids) <= 3 and set(ids) <= set(classes) and ifeval["key"] == row["id"]
        assert not any(b in conflicts[a] for i, a in enumerate(ids) for b in ids[i + 1:])  # no conflicting pair
        assert ifeval["prompt"].startswith(row["instruction"]) and row["prompt"][0]["content"] == ifeval["prompt"]
        assert ifeval["prompt"] not in {test_prompt}
        for iid, kw in zip(ids, kwargs):  # phrased as the registry phrases it, with these kwargs
            checker = classes[iid](iid)
            assert checker.build_description(**kw).strip() in ifeval["prompt"]
            if iid == REPEAT:
                assert ids[-1] == REPEAT and ifeval["prompt"].startswith(kw["prompt_to_repeat"] + "\n")


def test_constraint_draws_follow_the_settings_and_never_leave_a_kwarg_the_checker_would_redraw():
    settings = PromptSettings(seed=0, min_constraints=2, max_constraints=2, exclude_ids=NO_SENTENCES)
    seen = set()
    for i in range(60):
        ids, kwargs, texts = draw_constraints(f"instruction {i}", settings)
        assert not set(ids) & set(NO_SENTENCES) and len(texts) == len(ids)
        # two, unless the first drawn conflicts with every other id (constrained_response does)
        assert len(ids) == 2 or ids == ["detectable_format:constrained_response"]
        seen.update(ids)
        for iid, kw in zip(ids, kwargs):
            if iid == "length_constraints:nth_paragraph_first_word":
                assert kw["nth_paragraph"] <= kw["num_paragraphs"]  # else the checker redraws it when it rebuilds
    assert len(seen) > 15  # the draw covers the registry
    with pytest.raises(ValueError, match="min"):
        PromptSettings(min_constraints=0)


def test_pairs_choose_the_response_that_follows_more_constraints_and_count_prompts_without_a_pair():
    responses = [["The sea, it is blue.", "The sea is blue and calm.", "Hello, world", ""],  # 1, 2, 0, empty
                 ["The sea is blue.", "A blue sea here."],                           # 2 and 2: no pair
                 ["Nothing, here", "Nothing, there"],                                 # 0 and 0: no pair
                 ["The sea is blue.", " "]]                                           # one is empty: no pair
    pairs, records, manifest = label_pairs([_row(0), _row(1), _row(2), _row(3)], responses)
    assert [(p.chosen, p.rejected) for p in pairs] == [("The sea is blue and calm.", "Hello, world")]
    assert pairs[0].metadata["followed"] == [2, 0] and pairs[0].metadata["ifeval"] == ROW
    assert manifest.consistent and dict(manifest.dropped) == {
        "all_follow_every_constraint": 1, "all_follow_equally": 1, "fewer_than_two_nonempty_responses": 1}
    assert records[0]["followed"] == [[False, True], [True, True], [False, False], [False, False]]
    assert manifest.extra["followed_gap"] == {2: 1} and manifest.extra["empty_responses"] == 2
    assert manifest.extra["samples_all_followed"] == pytest.approx(4 / 10)  # every sampled response counts



def test_teacher_cites_each_constraint_with_its_evidence_and_scores_the_share_followed():
    from patarm.judge import load_template, parse_judgment
    from patarm.prep.corpus import pointwise_corpus

    template = load_template("pointwise-compact", rubric_mode="primary")
    text = judgment_text(ROW, "The sea, it is calm.")
    assert "no_comma :: 1 commas :: fail" in text and "existence :: missing: blue :: fail" in text
    judged = parse_judgment(text, template)
    assert judged.score == 1 and judged.tags_ok and "followed :: 0 of 2" in text
    assert parse_judgment(judgment_text(ROW, "The sea is blue."), template).score == 10
    assert [score_of(k, n) for k, n in ((0, 1), (1, 1), (1, 2), (1, 3), (2, 3))] == [1, 10, 6, 4, 7]
    pairs, _, _ = label_pairs([_row(0)], [["The sea is blue.", "The sea, it is calm."]])
    rows, manifest = pointwise_corpus(pairs, ConstraintTeacher(), template, min_margin=2.0)
    assert manifest.rows_out == 1 and [r["side"] for r in rows] == ["chosen", "rejected"]
    assert rows[0]["messages"][-1]["content"].endswith("<score>10</score>")
    assert ROW["prompt"] in rows[0]["messages"][0]["content"]  # the judge reads the constraints in the prompt


def test_too_few_pairs_are_shared_between_sft_and_the_rl_pool_in_proportion(caplog):
    from patarm.demo.ifeval.judge import split_pool

    pairs = list(range(240))
    assert split_pool(pairs, 180, 60) == (pairs[:180], pairs[180:])  # enough: the first 180, the next 60
    assert split_pool(pairs + [0] * 9, 180, 60)[1] == pairs[180:]  # more than both ask for: the rest unused
    with caplog.at_level("WARNING", logger="patarm.downstream"):
        sft, rl = split_pool(pairs, 300, 80)  # the measured yield: 60 % of 400 prompts
    assert (len(sft), len(rl)) == (189, 51) and sft + rl == pairs and "fewer than sft_pairs" in caplog.text
    assert split_pool(pairs, 300, 0) == (pairs, [])  # no RL pool asked for: SFT takes what there is
    assert split_pool([1, 2], 1, 100) == ([1], [2])  # at least one SFT pair


def test_rule_reward_is_the_share_of_constraints_followed_and_the_monitor_logs_prompt_level_accuracy():
    from patarm.demo.downstream.rewards import Monitored, RuleReward

    logged = {}
    reward = Monitored(RuleReward())
    got = reward([[{"role": "user", "content": "q"}]] * 3, ["The sea is blue.", "The sea, blue.", "no, nothing"],
                 ifeval_row=[json.dumps(ROW)] * 3, log_metric=lambda k, v: logged.setdefault(k, v))
    assert got == [1.0, 0.5, 0.0] and logged == {"verified/accuracy": pytest.approx(1 / 3)}
    with pytest.raises(ValueError, match="ifeval_row"):
        RuleReward()(["q"], ["a"])


RECIPE_CONFIGS = sorted((ROOT / "patarm" / "demo" / "configs").glob("ifeval-*.yaml")) + sorted(
    (ROOT / "configs" / "downstream").glob("ifeval-*.yaml"))


@pytest.mark.parametrize("path", RECIPE_CONFIGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_ifeval_config_loads_and_names_its_command(path, monkeypatch):
    from patarm.config import RunArguments, parse_stage
    from patarm.demo.ifeval.recipe import parse_args

    first = path.read_text().splitlines()[0]
    assert first.startswith("# patarm downstream --recipe ifeval"), first
    monkeypatch.setattr("transformers.training_args.is_torch_bf16_gpu_available", lambda *a, **k: True)
    keys = set(yaml.safe_load(path.read_text()))
    if "judge_base" in keys or "pair_prompts" in keys:  # a recipe config (read after the CPU default)
        args = parse_args(["--config", str(path)])
        for key in ("judge_sft_config", "judge_grpo_config", "bt_config", "grpo_config"):
            assert Path(getattr(args, key)).is_file(), (key, getattr(args, key))
        assert args.judge_run == args.run_dir and args.train_prompts_file.endswith("prompts/train.jsonl")
    elif "judge_serve_args" in keys:  # an arm variant: its serve flags are the server's own
        from patarm.cli.serve import ServeArguments

        args = parse_args(["--config", str(path)])
        parse_stage((ServeArguments,), args.judge_serve_args, prog="patarm serve")
    elif "judge_template" in keys:
        from patarm.train import parse_args as stage

        stage("grpo", ["--config", str(path)])
    elif "num_generations" in keys:  # the policy's GRPOConfig (TRL's, with the speed switches)
        from patarm.train.grpo import SpeedGRPOConfig

        _, cfg = parse_stage((RunArguments, SpeedGRPOConfig), ["--config", str(path)], prog="t")
        assert cfg.per_device_train_batch_size * cfg.steps_per_generation % cfg.num_generations == 0
    else:
        from patarm.train import parse_args as stage

        stage("bt" if path.stem.endswith("-bt") else "sft", ["--config", str(path)])


def test_recipe_arguments_refuse_what_the_run_cannot_do(capsys):
    with pytest.raises(SystemExit) as bad:
        run_cli("downstream", "--recipe", "ifeval", "--pair_samples", "1")
    assert bad.value.code == 2 and "pair_samples must be >= 2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:
        run_cli("downstream", "--recipe", "ifeval", "--dtype", "bf16")
    assert bad.value.code == 2 and "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:
        run_cli("downstream", "--recipe", "gold")
    assert bad.value.code == 2 and "choose from" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ok:
        run_cli("downstream", "--recipe", "ifeval", "--help")
    assert ok.value.code == 0 and "--pair_prompts" in capsys.readouterr().out


def test_real_alpaca_prompts_never_repeat_an_official_prompt_and_their_checkers_run(bench, monkeypatch):
    from patarm.verify.ifeval import check_response

    monkeypatch.setenv("NLTK_DATA", str(bench / "nltk_data"))
    official = bench / "ifeval" / "input_data.jsonl"
    train, dev, manifest = build_prompts(bench / "alpaca" / "alpaca_5000.json", official, PromptSettings())
    assert manifest.consistent and manifest.rows_in == 5000 and manifest.dropped["has_input"] == 1943
    assert len(train) + len(dev) == 3057 - sum(v for k, v in manifest.dropped.items() if k != "has_input")
    tests = {json.loads(line)["prompt"] for line in official.open()}
    rows = [json.loads(r["ifeval_row"]) for r in train + dev]
    assert not tests & {r["prompt"] for r in rows}
    assert 0.07 < len(dev) / (len(train) + len(dev)) < 0.13
    for row in rows[::25]:  # the checkers rebuild every drawn constraint from its kwargs
        assert len(check_response(row, "A short answer.").strict) == len(row["instruction_id_list"])


def _tiny_setup(tmp_path: Path) -> dict[str, Path]:
    """A tiny policy / judge base (one Qwen3 folder), the held-out 'official' prompts (built by the same builder
    from other instructions: a fresh clone has no IFEval file), and small stage configs for them."""
    from patarm.models.tiny import build_tiny_judge

    alpaca = _alpaca(tmp_path)
    others = tmp_path / "others"
    others.mkdir()
    other = others / "alpaca.json"
    other.write_text(json.dumps([{"instruction": f"Describe a city called Place{i}.", "input": "", "output": ""}
                                 for i in range(8)]))
    rows, dev, _ = build_prompts(other, _ifeval(others, ["unrelated"]),
                                 PromptSettings(seed=9, dev_share=0.5, exclude_ids=NO_SENTENCES))
    official = tmp_path / "input_data.jsonl"
    held = [json.loads(r["ifeval_row"]) for r in rows + dev]
    official.write_text("".join(json.dumps({**r, "key": i}) + "\n" for i, r in enumerate(held)))
    texts = INSTRUCTIONS + [r["prompt"] for r in held] + ["<eval> pass fail </eval> <score>7</score>"]
    build_tiny_judge(texts, tmp_path / "tiny", vocab_size=400, hidden_size=32, num_layers=1)
    configs = ROOT / "patarm" / "demo" / "configs"
    bt = yaml.safe_load((configs / "ifeval-bt.yaml").read_text()) | {
        "model_name_or_path": str(tmp_path / "tiny"), "bf16": False, "max_length": 256, "report_to": []}
    grpo = yaml.safe_load((configs / "ifeval-policy-grpo.yaml").read_text()) | {
        "num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 12, "report_to": []}
    for name, values in (("bt.yaml", bt), ("grpo.yaml", grpo)):
        (tmp_path / name).write_text(yaml.safe_dump(values))
    return {"alpaca": alpaca, "ifeval": official, "tiny": tmp_path / "tiny", "bt": tmp_path / "bt.yaml",
            "grpo": tmp_path / "grpo.yaml"}


@pytest.mark.slow
def test_the_recipe_end_to_end_on_tiny_models_then_resumed_with_nothing_to_do(tmp_path, capsys):
    """Every stage on a handful of prompts: prompts, start measured, pairs, the judge (SFT, RL set, GRPO-PAR,
    export, dev accuracy), served; BT; three policy GRPO runs; the report. A rerun retrains nothing."""
    s = _tiny_setup(tmp_path)
    run = tmp_path / "run"
    # a random tiny policy follows these more or less often from sample to sample (a letter's count, a comma):
    # enough pairs; the checkers of the others almost always agree on its byte soup
    varying = {"keywords:letter_frequency", "punctuation:no_comma", "keywords:frequency", "keywords:forbidden_words"}
    excluded = sorted(set(registry()[0]) - varying)
    argv = ["downstream", "--recipe", "ifeval", "--run_dir", run, "--alpaca_file", s["alpaca"], "--ifeval_file",
            s["ifeval"], "--nltk_data", "", "--exclude_ids", *excluded, "--policy_model", s["tiny"],
            "--judge_base", s["tiny"], "--bt_config", s["bt"], "--grpo_config", s["grpo"], "--dev_share", "0.4",
            "--min_constraints", "2", "--pair_prompts", "40", "--dev_pair_prompts", "40", "--pair_samples", "6",
            "--sample_max_new_tokens", "12", "--sft_pairs", "3", "--rl_pool", "3", "--rl_rollouts", "2",
            "--rl_keep", "0.0", "1.0", "--judge_grpo_steps", "1", "--max_prompt_tokens", "512",
            "--judge_max_new_tokens", "24", "--heldout_prompts", "4", "--eval_max_new_tokens", "12", "--eval_every",
            "1", "--grpo_steps", "2", "--rl_prompts", "8", "--batch_size", "16", "--dtype", "float32"]
    run_cli(*argv)
    report = json.loads((run / "report.json").read_text())
    assert set(report["policies"]) == {"start", "grpo-judge", "grpo-bt", "grpo-rule"}
    for name, policy in report["policies"].items():
        greedy = policy["greedy"]
        assert greedy["n"] == 4 and 0 <= greedy["ifeval_strict"] <= greedy["ifeval_loose"] <= 1, name
        assert 0 <= greedy["ifeval_inst_strict"] <= 1 and greedy["verified"] == greedy["ifeval_strict"], name
        official = policy["ifeval_official"]  # the official scorer on the saved responses, in percent
        assert official["prompts_scored"] == 4 and official["prompt_strict"] == pytest.approx(
            100 * greedy["ifeval_strict"]), name
    for reward in ("judge", "bt", "rule"):
        curve = report["curves"][reward]
        assert [s["step"] for s in curve["steps"]] == [1, 2] and all(s["verified"] is not None for s in curve["steps"])
        assert [h["step"] for h in curve["heldout"]] == [0, 1, 2]
    for reward in ("judge", "bt", "rule"):  # start → end on the same 4 IFEval prompts, paired; the verdict reads it
        change = report["ifeval_change"][reward]
        assert change["prompt_strict"]["n"] == 4 and change["prompt_strict"]["after"] == pytest.approx(
            report["policies"][f"grpo-{reward}"]["ifeval_official"]["prompt_strict"])
        assert "held out: prompt-level strict" in report["verdicts"][reward]["verdict"]
    assert "paired on the same prompts" in (run / "report.md").read_text()
    between = report["ifeval_between"]["judge vs bt"]["prompt_strict"]  # the judge arm against the BT arm
    assert between["before"] == report["ifeval_change"]["bt"]["prompt_strict"]["after"]
    assert between["after"] == report["ifeval_change"]["judge"]["prompt_strict"]["after"]
    pairs = json.loads((run / "prep" / "pairs" / "manifest.json").read_text())
    assert pairs["rows_in"] + pairs["dev"]["rows_in"] == 40 == pairs["rows_out"] + sum(pairs["dropped"].values()) + (
        pairs["dev"]["rows_out"] + sum(pairs["dev"]["dropped"].values()))
    # both reward models (and the judge before its GRPO-PAR) measured on the dev pairs, when the samples gave any
    judges = {"judge", "judge (SFT)", "judge P(pass)", "judge (SFT) P(pass)"}  # P(pass): its constraint lines' belief
    assert (set(report["reward_models"]) == judges | {"bt"}) == (pairs["dev"]["rows_out"] > 0)
    if pairs["dev"]["rows_out"]:
        sft = json.loads((run / "eval" / "judge_pairs_sft.json").read_text())
        assert sft["model"] == str(run / "sft") and 0 <= sft["ties"] <= sft["pairs"] == pairs["dev"]["pairs"]
        assert len(sft["right"]) == sft["pairs"] and sft["constraint_verdicts"]["constraints"] >= 2 * sft["pairs"]
        assert set(report["reward_models_paired"]) == {f"{j} vs bt" for j in judges}  # on the same pairs
        read = sft["readout"]  # the belief in its constraint lines; a tiny judge may write none: all unreadable
        assert len(read["right"]) == sft["pairs"] and (read["p_pass"]["lines"] > 0 or read["unreadable"] == 2 * (
            sft["pairs"]) and read["accuracy"] == 0.0)
    assert "listening on http://127.0.0.1:" in (run / "serve.log").read_text()  # the judge was served over HTTP
    prompts = json.loads((run / "prompts" / "manifest.json").read_text())
    assert prompts["rows_out"] == 40 and prompts["train"] + prompts["dev"] == 40
    assert pairs["rows_out"] >= 4 and json.loads((run / "prep" / "rl" / "manifest.json").read_text())["rows_out"]
    sft = [json.loads(line) for line in (run / "prep" / "pointwise" / "sft.jsonl").open()]
    assert sft and all("followed :: " in r["messages"][-1]["content"] for r in sft)
    assert (run / "grpo" / "metrics.jsonl").is_file() and (run / "export" / "patarm_config.json").is_file()
    assert (run / "eval" / "start-ifeval-responses.jsonl").is_file()
    stamps = {p: p.stat().st_mtime for p in run.rglob("*.safetensors")}
    capsys.readouterr()
    run_cli(*argv)
    assert {p: p.stat().st_mtime for p in run.rglob("*.safetensors")} == stamps  # nothing retrained
    assert "finished" in capsys.readouterr().out


def test_the_report_lists_the_official_scorer_figures_of_each_policy():
    from patarm.demo.downstream.report import official_table

    figures = {"prompts_scored": 541, "prompt_strict": 25.5, "inst_strict": 36.25, "prompt_loose": 27.0,
               "inst_loose": 38.0, "prompts_without_response": 0}
    text = official_table({"start": {"ifeval_official": figures}, "grpo-rule": {"greedy": {}}})
    assert "| start (the policy before GRPO) | 541 | 25.50 | 36.25 | 27.00 | 38.00 |" in text
    assert "grpo-rule" not in text and "reward = rule" not in text
    assert official_table({"start": {"greedy": {}}}) == ""


def test_dtype_auto_follows_the_cpu_and_reaches_the_measurement(monkeypatch, tmp_path):
    """`dtype: auto` is bf16 only where the CPU computes in it; the measured policy is loaded in that dtype."""
    import patarm.models
    import patarm.train.common as common
    from patarm.demo.downstream import loop
    from patarm.demo.ifeval.recipe import parse_args

    for has, want in ((False, "float32"), (True, "bfloat16")):
        monkeypatch.setattr(common, "cpu_bf16", lambda has=has: (has, ""))
        assert parse_args(["--dtype", "auto"]).dtype == want
    assert parse_args(["--dtype", "float32"]).dtype == "float32"
    seen = []

    class Stop(Exception):
        pass

    def fake_load(path, dtype=None, **kw):
        seen.append(dtype)
        raise Stop

    monkeypatch.setattr(patarm.models, "load_causal_lm", fake_load)
    args = parse_args(["--dtype", "auto", "--run_dir", str(tmp_path)])
    from patarm.demo.downstream.eval import EvalSettings, Evaluator

    with pytest.raises(Stop):
        loop.stage_eval(args, tmp_path / "start.json", "policy", Evaluator([], EvalSettings(0, 1.0, 8, 4, 0, False)))
    assert seen == ["bfloat16"]  # the last monkeypatched CPU has bf16 instructions


def test_a_cached_measurement_is_reused_only_under_its_own_settings(monkeypatch, tmp_path):
    """start.json records what decided its texts; resuming (or copying it) under another dtype is an error."""
    import json

    from patarm.demo.downstream import loop
    from patarm.demo.downstream.eval import EvalSettings, Evaluator
    from patarm.demo.ifeval.recipe import parse_args

    calls = []
    monkeypatch.setattr(Evaluator, "evaluate_folder", lambda self, *a: calls.append(a) or {"greedy": {"acc": 0.5}})
    evaluator = Evaluator([{"prompt": "p"}], EvalSettings(0, 1.0, 8, 4, 0, False))
    path = tmp_path / "start.json"
    fp32 = parse_args(["--dtype", "float32", "--run_dir", str(tmp_path)])
    first = loop.stage_eval(fp32, path, "policy", evaluator)
    assert first["settings"]["dtype"] == "float32" and first["settings"]["items"] == 1
    assert loop.stage_eval(fp32, path, "policy", evaluator) == first and len(calls) == 1  # reused, not redone
    bf16 = parse_args(["--dtype", "bfloat16", "--run_dir", str(tmp_path)])
    with pytest.raises(ValueError, match=r"start.json: measured under other settings \(dtype: 'float32' there, "
                                         r"'bfloat16' now\); delete the file"):
        loop.stage_eval(bf16, path, "policy", evaluator)
    path.write_text(json.dumps({"greedy": {"acc": 0.4}}))  # written before settings were recorded: reused as is
    assert loop.stage_eval(bf16, path, "policy", evaluator) == {"greedy": {"acc": 0.4}} and len(calls) == 1
    # a policy inside the run folder is named relative to it: the folder moved elsewhere still matches
    import shutil

    (tmp_path / "a" / "policy-sft").mkdir(parents=True)
    in_a = parse_args(["--dtype", "float32", "--run_dir", str(tmp_path / "a")])
    measured = loop.stage_eval(in_a, tmp_path / "a" / "m.json", str(tmp_path / "a" / "policy-sft"), evaluator)
    assert measured["settings"]["model"] == "{run_dir}/policy-sft"
    shutil.move(tmp_path / "a", tmp_path / "b")
    in_b = parse_args(["--dtype", "float32", "--run_dir", str(tmp_path / "b")])
    assert loop.stage_eval(in_b, tmp_path / "b" / "m.json", str(tmp_path / "b" / "policy-sft"), evaluator) == measured
    assert len(calls) == 2

