"""The face a user meets: bad input is one paragraph on stderr with exit code 2 (never a traceback), help is
readable, and defaults come from the judge itself."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import DEMO_PAIRS, ROOT, run_cli


def _fails(capsys, *argv) -> str:
    """Run `patarm ARGV`, expect exit code 2, and return the one-paragraph error it printed last (progress
    lines such as "judging with ..." may come before it; a traceback never)."""
    with pytest.raises(SystemExit) as err:
        run_cli(*argv)
    out = capsys.readouterr()
    assert err.value.code == 2, (argv, out.err)
    last = out.err.strip().splitlines()[-1]
    assert "Traceback" not in out.err and last.startswith(f"patarm {argv[0]}") or last.startswith("patarm:"), out.err
    assert all(line.startswith("[patarm") for line in out.err.strip().splitlines()[:-1]), out.err
    return last


@pytest.fixture
def files(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "bad.yaml").write_text("key: [unclosed\n")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    (tmp_path / "nosteps.yaml").write_text("run_dir: r\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    (tmp_path / "folder").mkdir()
    return tmp_path


@pytest.mark.parametrize("argv, says", [
    (["frobnicate"], "unknown command 'frobnicate'"),
    (["evl"], "did you mean 'eval'?"),
    (["judge", "--input", "{t}/missing.jsonl"], "does not exist"),
    (["judge", "--model", "{t}/no/such/judge", "--input", str(DEMO_PAIRS)], "no such folder"),
    (["judge", "--model", "runs/nothing/here/export", "--input", str(DEMO_PAIRS)], "no such folder"),
    (["judge", "--input", str(DEMO_PAIRS), "--num_samples", "0"], "--num_samples must be > 0, got 0"),
    (["judge", "--input", str(DEMO_PAIRS), "--num_samples", "4", "--temperature", "0", "--model", "tiny"],
     "identical judgments"),
    (["eval", "--benchmark", "rmbench", "--limit", "0"], "--limit must be > 0, got 0"),
    (["eval", "--benchmark", "rmbench", "--limit", "-1"], "--limit must be > 0, got -1"),
    (["eval", "--benchmark", "rmbenh"], "did you mean 'rmbench'?"),
    (["eval", "--benchmark", "rmbench", "--model", "tiny", "--template", "pointwise-compat", "--data", "{t}/folder"],
     "did you mean 'pointwise-compact'?"),
    (["skill", "bon", "--pool", str(DEMO_PAIRS), "--limit", "-3"], "--limit must be > 0, got -3"),
    # the judge options (patarm.models.settings.JudgeOptions) are checked by one rule in every command
    (["judge", "--input", str(DEMO_PAIRS), "--max_new_tokens", "0"], "--max_new_tokens must be > 0, got 0"),
    (["eval", "--benchmark", "rmbench", "--max_prompt_tokens", "-5"], "--max_prompt_tokens must be > 0, got -5"),
    (["serve", "--temperature", "-1"], "--temperature must be >= 0, got -1.0"),
    (["skill", "bon", "--pool", str(DEMO_PAIRS), "--max_new_tokens", "0"], "--max_new_tokens must be > 0, got 0"),
    (["skill", "bon", "--pool", "{t}/empty.jsonl"], "the pool is empty"),
    (["skill", "bon", "--pool", str(DEMO_PAIRS), "--skill", "reward-jugde"], "did you mean 'reward-judge'?"),
    (["skill", "validate", "reward-jugde"], "did you mean 'reward-judge'?"),
    (["export", "--checkpoint", "{t}/nope", "--output", "{t}/out"], "not a folder"),
    (["export", "--checkpoint", "{t}/folder", "--output", "{t}/full"], "pass --overwrite"),
    (["sft", "--config", "{t}/missing.yaml"], "does not exist"),
    (["sft", "--config", "{t}/folder"], "is a directory"),
    (["sft", "--config", "{t}/bad.yaml"], "not valid YAML"),
    (["sft", "--config", "{t}/list.yaml"], "must hold a YAML mapping"),
    (["sft", "--lerning_rate", "1"], "did you mean '--learning_rate'?"),
    (["grpo", "--num_generation", "4"], "did you mean '--num_generations'?"),
    # refused by PaTaRMGRPOConfig before any model loads (the model folder does not exist)
    (["grpo", "--model_name_or_path", "{t}/no/model", "--per_device_train_batch_size", "4", "--num_generations", "4"],
     "not a multiple of 2 × num_generations = 8"),
    (["sft", "--model_name_or_path", "tiny", "--train_files", "{t}/empty.jsonl"], "hold no rows"),
    (["grpo", "--model_name_or_path", "tiny", "--run_dir", "{t}/run", "--per_device_train_batch_size", "16"],
     "GRPO's RL set {t}/run/prep/rl/pairs.jsonl does not exist; write it with `patarm prep run --config"),
    (["grpo", "--run_dir", "{t}/run", "--train_file", str(DEMO_PAIRS), "--per_device_train_batch_size", "16"],
     "GRPO's starting judge {t}/run/sft does not exist; write it with `patarm sft --config"),
    (["prep", "run", "--config", "{t}/nosteps.yaml"], "no steps"),
    (["prep", "normalise"], "did you mean 'normalize'?"),
    (["prep", "dedup", "--input", "{t}/empty.jsonl", "--output", "{t}/o"], "holds no pairs"),
    (["prep", "normalize", "--input", "{t}/empty.jsonl", "--output", "{t}/o"], "no rows to normalize"),
    (["verify", "humaneval", "--samples", "{t}/empty.jsonl", "--k", "x"], "comma-separated whole numbers"),
])
def test_bad_input_is_one_paragraph_and_exit_2(argv, says, files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    message = _fails(capsys, *[a.replace("{t}", str(files)) for a in argv])
    assert says.replace("{t}", str(files)) in message, message


def test_under_a_launcher_only_the_main_process_prints_the_error(files, capsys, monkeypatch):
    """`accelerate launch` starts one process per device; they fail alike, and only rank 0 says so."""
    argv = ("sft", "--config", str(files / "missing.yaml"))
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(SystemExit) as err:
        run_cli(*argv)
    assert err.value.code == 2 and capsys.readouterr().err == ""
    monkeypatch.setenv("RANK", "0")
    assert "does not exist" in _fails(capsys, *argv)


def test_export_never_deletes_what_it_did_not_create(files, capsys):
    _fails(capsys, "export", "--checkpoint", files / "folder", "--output", files / "full")
    assert (files / "full" / "keep.txt").read_text() == "mine"


def test_help_shows_the_stage_options_first_and_the_rest_behind_help_all(capsys):
    with pytest.raises(SystemExit):
        run_cli("grpo", "--help")
    short = capsys.readouterr().out
    assert "--config YAML" in short and "--margin" in short and "--help-all" in short
    assert "--vllm_gpu_memory_utilization" not in short and len(short.splitlines()) < 200
    with pytest.raises(SystemExit):
        run_cli("grpo", "--help-all")
    full = capsys.readouterr().out
    assert "--vllm_gpu_memory_utilization" in full and len(full.splitlines()) > 2 * len(short.splitlines())


@pytest.mark.parametrize("argv", [["prep"], ["sft"], ["grpo"], ["bt"], ["export"], ["judge"], ["eval"], ["skill"],
                                  ["bon"], ["verify"], ["convert"], ["serve"], ["quickstart"],
                                  ["quickstart", "--recipe", "gsm8k-skill"], ["downstream"],
                                  ["downstream", "--recipe", "ifeval"], ["sft", "--help-all"], ["prep", "rl"],
                                  ["prep", "pointwise"], ["prep", "mix"], ["prep", "classify"]])
def test_every_help_prints(argv, capsys):
    """`--help` works on every command and recipe: argparse %-formats help text, so a literal `%` in an option's
    help (`~21 % of pairs`) once crashed `patarm quickstart --recipe gsm8k-skill --help`, `sft` and `eval`."""
    try:
        run_cli(*argv, "--help")
        code = 0  # a command group (`prep`) lists its subcommands and returns
    except SystemExit as err:
        code = err.code
    out = capsys.readouterr().out
    assert code in (0, None) and "patarm" in out and "Traceback" not in out
    # a dataclass without a docstring has its signature as one; it once titled `patarm prep rl --help`'s options
    assert not re.search(r"^[A-Z]\w*\(\w+: '", out, re.M), out


def test_version(capsys):
    from patarm import __version__

    with pytest.raises(SystemExit) as err:
        run_cli("--version")
    assert err.value.code == 0 and __version__ in capsys.readouterr().out


def test_config_paths_are_read_next_to_the_config(tmp_path, monkeypatch):
    """A shipped config runs from any directory: its relative input paths are resolved from its own folder."""
    from patarm.config import parse_stage
    from patarm.train.grpo import GRPODataArguments

    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "pairs.jsonl").write_text(DEMO_PAIRS.read_text())
    (tmp_path / "conf" / "c.yaml").write_text("train_file: pairs.jsonl\nrun_dir: out\n")
    (args,) = parse_stage((GRPODataArguments,), ["--config", str(tmp_path / "conf" / "c.yaml")], prog="t")
    assert args.train_file == str(tmp_path / "conf" / "pairs.jsonl") and args.run_dir == "out"
    (args,) = parse_stage((GRPODataArguments,), ["--train_file", "x.jsonl"], prog="t")  # flags: the working directory
    assert args.train_file == "x.jsonl"
    (args,) = parse_stage((GRPODataArguments,), ["--run_dir", "r"], prog="t")  # the default follows the run folder
    assert args.train_file == "r/prep/rl/pairs.jsonl"


def test_judge_uses_the_template_and_length_the_judge_was_trained_with(tmp_path, capsys):
    """A judge exported from a pointwise-compact run is judged with pointwise-compact and its own judgment
    length unless flags say otherwise, and the run says where each value came from."""
    from patarm.models.settings import JudgeOptions, resolve_judge_options
    from patarm.models.tiny import build_tiny_judge

    judge = tmp_path / "judge"
    build_tiny_judge(["<rubric>1. x</rubric><eval>ok</eval><score>7</score>"] * 10, judge, vocab_size=300,
                     hidden_size=32, num_layers=1)
    (judge / "patarm_config.json").write_text(json.dumps(
        {"stage": "grpo", "data": {"judge_template": "pointwise-compact", "rubric_mode": "primary"},
         "training": {"max_completion_length": 48}}))

    values, sources = resolve_judge_options(str(judge), JudgeOptions(), "pointwise", num_samples=3)
    assert (values["template"], values["rubric_mode"], values["max_new_tokens"]) == ("pointwise-compact", "primary", 48)
    assert sources["template"] == "the judge's training config" and values["temperature"] == 0.7  # n > 1 samples
    run_cli("judge", "--model", judge, "--input", DEMO_PAIRS, "--output", tmp_path / "j.jsonl", "--batch_size", "64")
    err = capsys.readouterr().err
    assert "template=pointwise-compact (the judge's training config)" in err and "max_new_tokens=48" in err


def test_prompts_longer_than_the_window_are_cut_by_the_rules_and_counted(tmp_path):
    from patarm.backends import GenerationOptions
    from patarm.backends.hf import HFBackend
    from patarm.judge import render_pointwise
    from patarm.judge.truncate import MARKER, PromptFitter
    from patarm.models.tiny import build_tiny_judge

    model, tokenizer = build_tiny_judge(["word " * 50, "<score>7</score>"], vocab_size=300, hidden_size=32,
                                        num_layers=1)
    model.config.max_position_embeddings = 256
    fit = PromptFitter(HFBackend(model, tokenizer, GenerationOptions(max_new_tokens=64)))
    assert fit.budget == 192
    short = render_pointwise("question", "a short answer", "pointwise-compact")
    long = render_pointwise("question " * 300, "answer " * 400, "pointwise-compact")
    assert fit(short) == short and fit.truncated == 0
    cut = fit(long)[-1]["content"]
    assert fit.truncated == 1 and fit.too_long == 0 and MARKER.strip() in cut
    assert cut.rstrip().endswith("Score 1-10.")  # the instructions and the output contract are never cut
    ids = tokenizer.apply_chat_template(fit(long), tokenize=True, add_generation_prompt=True, return_dict=False)
    assert len(ids) <= 192
    with pytest.raises(ValueError, match="lower --max_new_tokens"):
        PromptFitter(HFBackend(model, tokenizer, GenerationOptions(max_new_tokens=250)))
    # a judge trained on prompts of at most 180 tokens is given at most 180, though its window holds 192
    trained = PromptFitter(HFBackend(model, tokenizer, GenerationOptions(max_new_tokens=64, max_prompt_tokens=180)))
    assert trained.budget == 180
    ids = tokenizer.apply_chat_template(trained(long), tokenize=True, add_generation_prompt=True, return_dict=False)
    assert len(ids) <= 180 and trained.truncated == 1 and trained.too_long == 0
    with pytest.raises(ValueError, match="raise --max_prompt_tokens"):
        PromptFitter(HFBackend(model, tokenizer, GenerationOptions(max_new_tokens=64, max_prompt_tokens=10)))


def test_the_prompt_budget_comes_from_the_judge_s_training(tmp_path):
    from patarm.models.settings import judge_settings

    judge = tmp_path / "judge"
    judge.mkdir()
    config = {"stage": "grpo", "data": {"max_prompt_length": 192}, "training": {"max_completion_length": 48}}
    (judge / "patarm_config.json").write_text(json.dumps(config))
    assert judge_settings(judge)["max_prompt_tokens"] == 192
    config = {"stage": "sft", "data": {"max_judgment_tokens": 56}, "training": {"max_length": 256}}
    (judge / "patarm_config.json").write_text(json.dumps(config))
    assert judge_settings(judge)["max_prompt_tokens"] == 200
    (judge / "patarm_config.json").write_text(json.dumps({"stage": "sft", "data": {}, "training": {}}))
    assert "max_prompt_tokens" not in judge_settings(judge)


def test_report_explains_a_zero(tmp_path):
    from patarm.eval.report import console_summary, write_report

    result = {"benchmark": "judgebench", "headline": 0.0, "metrics": {"overall": 0.0},
              "run": {"items": 4, "judge_calls": 8, "invalid_rate": 100.0, "truncated_prompts": 3, "mode": "pointwise",
                      "voting": "mean", "num_samples": 1, "model": "m", "template": "pointwise", "max_new_tokens": 16}}
    (tmp_path / "judgebench").mkdir()
    (tmp_path / "metrics.json").write_text(json.dumps({"judgebench": result}))
    report = write_report(tmp_path, plots=False).read_text()
    assert "0.0% of 8 judgments valid, 3 prompts truncated" in report and "could not be parsed" in report
    assert "could not be parsed" in console_summary({"judgebench": result}, tmp_path)


def test_report_explains_a_zero_from_ties(tmp_path):
    """Valid judgments that score every response alike: the zero is explained by the ties."""
    from patarm.eval.harness import _tied_items
    from patarm.eval.judging import Judged
    from patarm.eval.report import console_summary

    out = lambda score: [{"score": score}]  # noqa: E731
    judged = [Judged({}, [out(8.0), out(8.0), out(None)]), Judged({}, [out(8.0), out(7.0)]), Judged({}, [out(9.0)])]
    assert _tied_items(judged) == 1  # one candidate scored is not a tie; different scores are not
    result = {"benchmark": "rmbench", "headline": 0.0, "metrics": {"overall": 0.0},
              "run": {"items": 4, "judge_calls": 8, "invalid_rate": 10.0, "tied_items": 3, "mode": "pointwise"}}
    text = console_summary({"rmbench": result}, tmp_path)
    assert "3 of 4 items with every response scored alike" in text and "does not separate" in text


def test_readme_commands_name_existing_configs():
    """Every `--config configs/...` path in the README exists."""
    import re

    text = (ROOT / "README.md").read_text()
    for ref in set(re.findall(r"--config (configs/[\w./-]+\.yaml)", text)) - {"configs/prep/X.yaml"}:
        assert (ROOT / ref).is_file(), ref
    assert Path(ROOT / "ARCHITECTURE.md").is_file()


def test_judge_options_read_the_same_in_every_command():
    """The judge options each command offers are JudgeOptions' fields: one default and one help text (serve says
    more about its template and temperature)."""
    import dataclasses

    from patarm.cli.judge import JudgeArguments
    from patarm.cli.serve import ServeArguments
    from patarm.eval.runner import EvalArguments
    from patarm.models.settings import JudgeOptions
    from patarm.skills.bon import BonArguments

    shared = {f.name: f for f in dataclasses.fields(JudgeOptions)}
    seen = 0
    for command in (JudgeArguments, EvalArguments, ServeArguments, BonArguments):
        for f in dataclasses.fields(command):
            if f.name in shared and not (command is ServeArguments and f.name in ("template", "temperature")):
                assert (f.default, dict(f.metadata)) == (shared[f.name].default, dict(shared[f.name].metadata)), f
                seen += 1
    assert seen == 5 + 5 + 3 + 1


def test_a_list_option_given_alone_empties_the_list(tmp_path):
    """`--extra_rewards` with no value clears a list a config file set (argparse's `+` would refuse it)."""
    from patarm.config import parse_stage
    from patarm.train.grpo import GRPODataArguments

    config = tmp_path / "grpo.yaml"
    config.write_text("extra_rewards: ['patarm.demo.gsm8k.consistency:evidence_reward']\n")
    (args,) = parse_stage((GRPODataArguments,), ["--config", str(config)], prog="patarm grpo")
    assert args.extra_rewards == ["patarm.demo.gsm8k.consistency:evidence_reward"]
    (args,) = parse_stage((GRPODataArguments,), ["--config", str(config), "--extra_rewards"], prog="patarm grpo")
    assert args.extra_rewards == []
