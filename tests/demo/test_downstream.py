"""The downstream RLHF loop (`patarm downstream`): its task split, rewards, measures, configs and CLI, and (slow)
the whole loop end to end on small sizes, resumed (its verdict and report: test_downstream_report.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import ROOT, run_cli
from patarm.demo.downstream import task as T
from patarm.demo.downstream.config import CONFIG_DIR, DownstreamArguments
from patarm.demo.downstream.eval import infobench_answers, measure, yes_no
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
    from trl.data_utils import apply_chat_template

    from helpers import tiny_scalar_model

    model, tok = tiny_scalar_model(tmp_path, ["write a sentence about the sea", "the sea is calm", "THE SEA IS CALM"])
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
    # one arm an invocation (as on a CPU): the report still gathers every arm this folder finished
    run_cli(*argv, "--rewards", "rule")
    again = json.loads((ds / "report.json").read_text())
    assert again["rewards"] == ["judge", "bt", "rule"] and again["arms_earlier"] == ["judge", "bt"]
    assert again["policies"]["grpo-judge"] == report["policies"]["grpo-judge"] and not again["arms_unlike"]
    assert "Arms read back from an earlier run in this folder" in (ds / "report.md").read_text()


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


def test_bt_pair_accuracy_is_measured_again_for_a_bt_model_saved_after_its_cache(tmp_path):
    """eval/bt_pairs.json is reused as it is, unless the BT model in that folder was saved after it (retrained,
    e.g. with other `bt_facts`): then its accuracy is measured again, not read stale."""
    import os

    from helpers import tiny_scalar_model
    from patarm.demo.downstream.train import bt_pair_accuracy

    bt = tmp_path / "bt"
    tiny_scalar_model(bt, ["write about the sea", "the sea is calm", "THE SEA IS CALM"])
    (bt / "patarm_config.json").write_text("{}")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"prompt": "write about the sea", "chosen": "the sea is calm",
                                 "rejected": "THE SEA IS CALM"}) + "\n")
    cache = tmp_path / "bt_pairs.json"
    first = bt_pair_accuracy(str(bt), pairs, cache)
    assert first["pairs"] == 1 and len(first["right"]) == 1
    cache.write_text(json.dumps(first | {"accuracy": 0.5}))  # a marker: reused while the model is older
    assert bt_pair_accuracy(str(bt), pairs, cache)["accuracy"] == 0.5
    later = cache.stat().st_mtime + 10
    os.utime(bt / "patarm_config.json", (later, later))  # the BT model saved again after the cache
    assert bt_pair_accuracy(str(bt), pairs, cache)["accuracy"] == first["accuracy"]
    assert json.loads(cache.read_text())["accuracy"] == first["accuracy"]
