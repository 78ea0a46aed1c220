"""The downstream RLHF loop (`patarm downstream`): its task split, rewards, measures, verdict and report, its
configs, and (slow) the whole loop end to end on small sizes, resumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import ROOT, run_cli
from patarm.demo.downstream import task as T
from patarm.demo.downstream.config import CONFIG_DIR, DownstreamArguments
from patarm.demo.downstream.eval import infobench_answers, measure, yes_no
from patarm.demo.downstream.report import verdict, write_downstream_report
from patarm.demo.downstream.rewards import Monitored, RuleReward, ScalarReward

LOWER = json.dumps({"kind": "lowercase", "value": None})
UPPER = json.dumps({"kind": "uppercase", "value": None})


@pytest.fixture(scope="module")
def split():
    return T.synthetic_split(600, seed=1, kinds=["lowercase", "uppercase"], heldout_share=0.25, heldout_prompts=16)


def test_heldout_prompts_never_appear_in_training_rows(split):
    train, items = split
    held = {item["prompt"][-1]["content"] for item in items}
    sft, counts = T.policy_sft_rows(train, 200, violation_rate=0.3, seed=0)
    rl = T.rl_rows(train, 50, offset=200)
    assert len(items) == len(held) == 16  # one item per distinct held-out prompt
    assert not held & {r["messages"][0]["content"] for r in sft}
    assert not held & {r["prompt"][0]["content"] for r in rl}
    assert counts["breaks"] + counts["follows"] == 200 and 40 <= counts["breaks"] <= 80  # ~30 % of 200
    broken = [r for r in sft if not T.verified({"constraint": json.dumps(_constraint(r, train))},
                                               r["messages"][-1]["content"])]
    assert len(broken) == counts["breaks"]  # every "breaks" response really breaks the instruction


def _constraint(row, pairs):
    pair = next(p for p in pairs if p.id == row["pair_id"])
    return pair.metadata["constraint"]


def test_ifeval_rows_map_the_case_instructions_and_agree_with_the_verifier_on_lowercase(split):
    from patarm.verify.ifeval import check_response

    _, items = split
    assert T.ifeval_row(3, "p", "word_count") is None
    lower = [i for i in items if i["constraint"] == LOWER]
    assert lower and all(i["ifeval"]["instruction_id_list"] == ["change_case:english_lowercase"] for i in lower)
    assert all(not check_response(i["ifeval"], i["reference_rejected"]).strict[0] for i in items)
    row = T.ifeval_row(0, "p", "uppercase")
    # IFEval's case checkers also demand that langdetect call the text English: short all-caps English often fails
    assert check_response(row, "THE SEA").strict == [True] and check_response(row, "the sea").strict == [False]


def test_the_answer_is_what_follows_a_leading_think_block():
    assert T.answer("<think>\n\n</think>\n\nthe sea") == "the sea"
    assert T.answer("  <think>a</think> THE SEA <think>b</think>") == "THE SEA <think>b</think>"
    assert T.answer("<think>never closed") == "" and T.answer("plain") == "plain"


def test_rule_reward_and_monitor_log_the_verified_share():
    logged = {}
    reward = Monitored(RuleReward())
    # TRL's conversational completions; the policy's think block is not part of the answer
    # (uppercase <THINK> would fail)
    completions = [[{"role": "assistant", "content": c}] for c in
                   ("<think>\n\n</think>\n\nall lower", "Not lower", "<think>\n\n</think>\n\nLOUD")]
    out = reward(["p"] * 3, completions, constraint=[LOWER, LOWER, UPPER],
                 log_metric=lambda k, v: logged.setdefault(k, v))
    assert out == [1.0, 0.0, 1.0] and logged == {"verified/accuracy": pytest.approx(2 / 3)}
    assert reward.__name__ == "rule"

    def constant(prompts, completions, **kw):  # a reward blind to the instruction: the monitor still checks
        return [5.0] * len(completions)

    logged.clear()
    assert Monitored(constant)(["p", "p"], ["ok", "Bad"], constraint=[LOWER, LOWER],
                               log_metric=lambda k, v: logged.setdefault(k, v)) == [5.0, 5.0]
    assert logged["verified/accuracy"] == 0.5


def test_scalar_reward_scores_exactly_what_trl_feeds_a_reward_model(tmp_path):
    import torch
    from transformers import Qwen3Config, Qwen3ForSequenceClassification
    from trl.data_utils import apply_chat_template

    from patarm.models.tiny import build_tokenizer

    tok = build_tokenizer(["write a sentence about the sea", "the sea is calm", "THE SEA IS CALM"], vocab_size=300)
    torch.manual_seed(0)
    model = Qwen3ForSequenceClassification(Qwen3Config(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, num_labels=1, pad_token_id=tok.pad_token_id))
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    prompts = [[{"role": "user", "content": "write a sentence about the sea"}]] * 2
    completions = ["the sea is calm", "THE SEA IS CALM AND VERY VERY LONG"]
    got = ScalarReward(tmp_path)(prompts, completions)
    # TRL's GRPOTrainer path for a reward model: chat template of prompt + completion, right padding, logit 0
    texts = [apply_chat_template({"messages": p + [{"role": "assistant", "content": c}]}, tok)["text"]
             for p, c in zip(prompts, completions)]
    enc = tok(texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
    with torch.inference_mode():
        want = model.eval()(**enc).logits[:, 0].tolist()
    assert got == pytest.approx(want, abs=1e-5) and got[0] != got[1]


def test_measure_counts_each_measure_over_its_own_items():
    items = [
        {
            "prompt": [{"role": "user", "content": "q"}],
            "constraint": LOWER,
            "ifeval": T.ifeval_row(0, "q", "lowercase"),
        },
        {"prompt": [{"role": "user", "content": "r"}], "constraint": UPPER, "ifeval": None},
    ]
    calls = []

    def judge(prompts, completions, domain):
        calls.append(len(completions))
        return [9.0, None, 3.0]

    m = measure([(items[0], "this is a simple sentence in english"), (items[0], "Not"), (items[1], "YES")],
                {"judge": judge})
    assert (m["n"], m["verified"], m["n_verified"]) == (3, pytest.approx(2 / 3), 3)
    assert m["words"] == 3.0  # (7 + 1 + 1) / 3
    assert (m["ifeval_strict"], m["n_ifeval"]) == (0.5, 2)
    assert m["judge"] == 6.0 and m["judge_valid"] == pytest.approx(2 / 3) and calls == [3]


class FakeEvaluatorModel:
    """Answers InFoBench questions from a script: one list of answers per item, read turn by turn."""

    def __init__(self, script):
        self.script, self.seen = script, []

    def generate(self, prompts, num_samples=1, **kw):
        self.seen.append([list(p) for p in prompts])  # copies: the conversations grow afterwards
        return [[self.script[p[0]["content"].split("Generated Text:\n\"")[1].split("\"")[0]][len(p) // 2]]
                for p in prompts]


def test_infobench_questions_are_asked_turn_by_turn_and_stop_at_an_unreadable_answer():
    assert [yes_no(t) for t in ("Yes.", "no, it is not", "The answer is YES", "either YES or NO", "maybe")] == \
        [True, False, True, None, None]
    item = {"prompt": [{"role": "user", "content": "Write a haiku."}], "questions": ["Q1?", "Q2?", "Q3?"]}
    backend = FakeEvaluatorModel({"a": ["YES", "NO", "YES"], "b": ["Yes", "hmm", "YES"]})
    answers = infobench_answers(backend, [(item, "a"), (item, "b")])
    assert answers == [[True, False, True], [True, None]]  # b's unreadable second answer ends its questions
    assert [len(batch) for batch in backend.seen] == [2, 2, 1]
    first_turn = backend.seen[0][0][0]["content"]
    assert "Input:\n\"Write a haiku.\"" in first_turn and first_turn.endswith("Question:\nQ1?\n")
    assert backend.seen[1][0][-1] == {"role": "user", "content": "Q2?\n"}  # later turns: the question only
    m = measure([(item, "a"), (item, "b")], {}, backend)
    assert (m["drfr"], m["n_questions"], m["questions_unanswered"]) == (0.6, 5, 1)


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
    from patarm.demo.downstream.loop import reward_models_paired

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
    # greedy only (IFEval's protocol): no sampled table, not an empty one
    (tmp_path / "greedy").mkdir()
    greedy = {"start": {"greedy": start["greedy"]}, "grpo-judge": {"greedy": {**start["greedy"], "verified": 1.0}}}
    greedy_only = write_downstream_report(report | {"args": {"eval_samples": 0}, "policies": greedy},
                                          tmp_path / "greedy")
    text = Path(greedy_only["report_md"]).read_text()
    assert "sampled responses" not in text and "Held-out prompts, greedy responses" in text
    assert "| 0.500 → 1.000 |" in text  # the training table's held-out column falls back to the greedy measure


def test_arguments_refuse_what_the_run_cannot_do(tmp_path):
    from patarm.demo.downstream.loop import preflight

    with pytest.raises(ValueError, match="choose from"):
        DownstreamArguments(rewards=["judge", "gold"])
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "Write a poem."}) + "\n")
    with pytest.raises(ValueError, match="p.jsonl: --rewards rule needs a checker"):  # named before any training
        preflight(DownstreamArguments(train_prompts_file=str(prompts), policy_sft=False, rewards=["rule"],
                                      score_with=[]))
    prompts.write_text(json.dumps({"prompt": "Write a poem.", "ifeval_row": "{}"}) + "\n")
    preflight(DownstreamArguments(train_prompts_file=str(prompts), policy_sft=False, rewards=["rule"], score_with=[]))
    with pytest.raises(ValueError, match="--policy_sft false"):
        DownstreamArguments(train_prompts_file="p.jsonl", rewards=["judge"])
    assert DownstreamArguments().judge_path() == str(Path("runs/quickstart/export"))


def test_file_task_reads_rl_prompts_and_ifeval_and_infobench_items(tmp_path, bench):
    from patarm.demo.downstream.loop import stage_task

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt": "Write a poem."}) + "\n"
                       + json.dumps({"prompt": [{"role": "user", "content": "Hi"}], "domain": "chat"}) + "\n")
    info = tmp_path / "infobench.jsonl"
    info.write_text(json.dumps({"id": "x1", "instruction": "Write a haiku.", "input": "about rain",
                                "decomposed_questions": ["Is it a haiku?", "Is it about rain?"]}) + "\n")
    args = DownstreamArguments(run_dir=str(tmp_path / "run"), train_prompts_file=str(prompts), policy_sft=False,
                               rewards=["judge"], ifeval_file=str(bench / "ifeval" / "input_data.jsonl"),
                               infobench_file=str(info), heldout_prompts=5)
    assert stage_task(args, tmp_path / "run") == {"sft": 0, "rl": 2, "heldout": 6}
    rl = [json.loads(line) for line in (tmp_path / "run" / "task" / "rl.jsonl").open()]
    assert rl[0] == {"prompt": [{"role": "user", "content": "Write a poem."}], "domain": T.DOMAIN}
    assert rl[1]["domain"] == "chat"
    items = [json.loads(line) for line in (tmp_path / "run" / "task" / "heldout.jsonl").open()]
    assert [i.get("benchmark") for i in items] == ["ifeval"] * 5 + ["infobench"]
    assert items[-1]["prompt"][0]["content"] == "Write a haiku.\n\nabout rain" and len(items[-1]["questions"]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"instruction": "x", "decomposed_questions": []}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl: line 1 needs"):
        T.infobench_items(bad)


CONFIGS = sorted(CONFIG_DIR.glob("downstream*.yaml")) + sorted(  # the ifeval recipe's: tests/demo/test_ifeval_recipe.py
    p for p in (ROOT / "configs" / "downstream").glob("*.yaml") if not p.name.startswith("ifeval"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_downstream_config_loads_and_names_its_command(path, monkeypatch):
    from patarm.config import RunArguments, parse_stage

    first = path.read_text().splitlines()[0]
    assert first.startswith("# ") and ("patarm downstream" in first or "patarm bt" in first), first
    keys = set(yaml.safe_load(path.read_text()))
    monkeypatch.setattr("transformers.training_args.is_torch_bf16_gpu_available", lambda *a, **k: True)
    if keys & {"task_pool", "policy_model", "rewards", "grpo_steps", "judge_run"}:  # a `patarm downstream` config
        (args,) = parse_stage((DownstreamArguments,), ["--config", str(path)], prog="t")
        for key in ("grpo_config", "policy_sft_config", "bt_config"):
            assert Path(getattr(args, key)).is_file(), (key, getattr(args, key))
    elif "num_generations" in keys:  # a GRPOConfig of the policy
        from trl import GRPOConfig

        _, cfg = parse_stage((RunArguments, GRPOConfig), ["--config", str(path)], prog="t")
        assert cfg.per_device_train_batch_size * cfg.steps_per_generation % cfg.num_generations == 0
    else:
        from patarm.train import parse_args

        parse_args("bt" if "bt" in path.stem else "sft", ["--config", str(path)])


def test_cli_help_and_a_bad_option_exit_cleanly(capsys):
    with pytest.raises(SystemExit) as ok:
        run_cli("downstream", "--help")
    assert ok.value.code == 0 and "--grpo_steps" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        run_cli("downstream", "--rewards", "gold")
    assert bad.value.code == 2 and "choose from" in capsys.readouterr().err


def test_a_missing_judge_is_named_before_any_training(tmp_path, capsys):
    with pytest.raises(SystemExit) as bad:
        run_cli(
            "downstream",
            "--config",
            CONFIG_DIR / "downstream-small.yaml",
            "--run_dir",
            tmp_path / "d",
            "--judge_run",
            tmp_path / "nowhere",
            "--rewards",
            "judge",
            "--score_with",
            "judge",
            "--policy_sft",
            "false",
            "--policy_model",
            "tiny",
        )
    assert bad.value.code == 2 and "patarm quickstart" in capsys.readouterr().err


@pytest.mark.slow
def test_the_loop_end_to_end_on_small_sizes_and_resumed(tmp_path, capsys):
    """The small quickstart's judge, served; BT trained on its pairs; three GRPO runs; report; then a rerun that
    skips every stage."""
    run_cli("quickstart", "--small", "--run_dir", tmp_path / "qs")
    argv = ["downstream", "--config", CONFIG_DIR / "downstream-small.yaml", "--run_dir", tmp_path / "ds",
            "--judge_run", tmp_path / "qs"]
    run_cli(*argv)
    ds = tmp_path / "ds"
    report = json.loads((ds / "report.json").read_text())
    assert set(report["policies"]) == {"start", "reference", "grpo-judge", "grpo-bt", "grpo-rule"}
    for name in ("start", "grpo-judge", "grpo-bt", "grpo-rule"):
        sampled = report["policies"][name]["sampled"]
        assert sampled["n"] == 16 and 0 <= sampled["verified"] <= 1 and "ifeval_strict" in sampled
        assert {"judge_valid", "bt"} <= set(sampled)
    for reward in ("judge", "bt", "rule"):
        curve = report["curves"][reward]
        assert [s["step"] for s in curve["steps"]] == [1, 2] and all(s["verified"] is not None for s in curve["steps"])
        assert [h["step"] for h in curve["heldout"]] == [0, 1, 2]
        assert reward in report["verdicts"]
    assert "listening on http://127.0.0.1:" in (ds / "serve.log").read_text()  # the judge was served over HTTP
    assert (ds / "downstream_curves.png").is_file() and "bt" in report["reward_models"]
    stamps = {p: p.stat().st_mtime for p in ds.rglob("*.safetensors")}
    capsys.readouterr()
    run_cli(*argv)
    assert {p: p.stat().st_mtime for p in ds.rglob("*.safetensors")} == stamps  # nothing retrained
    assert "downstream finished" in capsys.readouterr().out


def test_progress_bar_survives_a_step_where_no_rollout_was_scored():
    """A judge that scores none of a step's rollouts makes TRL log reward None: the bar must not crash on it."""
    from types import SimpleNamespace

    from tqdm import tqdm

    from patarm.train.common import QuietProgressCallback

    callback = QuietProgressCallback()
    callback.training_bar = tqdm(total=2, disable=True)
    state = SimpleNamespace(is_world_process_zero=True)
    callback.on_log(None, state, None, logs={"loss": 0.5, "reward": None})
    assert callback.training_bar.postfix == "loss=0.5"
