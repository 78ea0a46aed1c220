"""The policy's GRPO in the downstream loop: its precision on a CPU, and the held-out curve measured every K steps
on a fixed subset of the held-out prompts."""

from __future__ import annotations

import json

import pytest

from helpers import ROOT


@pytest.mark.parametrize("has_bf16", [True, False])
def test_the_policys_grpo_on_a_cpu_autocasts_to_bf16_only_where_the_cpu_computes_in_it(tmp_path, monkeypatch,
                                                                                           has_bf16):
    from types import SimpleNamespace

    from patarm.config import ConfigError
    from patarm.demo.downstream.train import grpo_config
    from patarm.train import common

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr(common, "cpu_bf16", lambda *a: (has_bf16, "monkeypatched"))
    source = ROOT / "patarm" / "demo" / "configs" / "ifeval-policy-grpo.yaml"
    lines = [ln for ln in source.read_text().splitlines() if not ln.startswith("bf16:")]
    (tmp_path / "auto.yaml").write_text("\n".join(lines) + "\n")
    (tmp_path / "fp32.yaml").write_text("\n".join(lines) + "\nbf16: false\n")
    args = SimpleNamespace(grpo_config=str(tmp_path / "auto.yaml"), grpo_steps=2, seed=0, enable_thinking=False,
                           grpo_settings=None)
    config = grpo_config(args, tmp_path, tmp_path / "grpo")
    assert config.use_cpu and config.bf16 is has_bf16
    args.grpo_config = str(tmp_path / "fp32.yaml")  # a config that says so keeps fp32
    assert grpo_config(args, tmp_path, tmp_path / "grpo").bf16 is False
    # an override switches the precision while the config is built (TRL's mixed_precision follows; a flag set on a
    # finished config does not switch it, as bench/policy_grpo.py's first run showed)
    switched = grpo_config(args, tmp_path, tmp_path / "grpo", ["--bf16", "true"])
    assert switched.bf16 is True and switched.mixed_precision == "bf16"
    # grpo_settings: fields over the config's, for every arm alike; an explicit override still wins
    args.grpo_settings = {"mask_truncated_completions": True, "temperature": 0.7, "reward_weights": [0.5]}
    masked = grpo_config(args, tmp_path, tmp_path / "grpo", ["--temperature", "0.9"])
    assert masked.mask_truncated_completions is True and masked.temperature == 0.9 and masked.reward_weights == [0.5]
    assert masked.max_completion_length == 256  # the rest as the config file says
    args.grpo_settings = {"mask_truncated": True}  # not a GRPOConfig field: refused, named
    with pytest.raises(ConfigError, match=r"grpo_settings \{'mask_truncated': True\}: unknown option "
                                          r"'--mask_truncated' \(did you mean '--mask_truncated_completions'"):
        grpo_config(args, tmp_path, tmp_path / "grpo")
    from patarm.demo.ifeval.recipe import parse_args  # the run refuses it at the start, before any stage

    with pytest.raises(ValueError, match=r"--grpo_settings: 'mask_truncated' is not a TRL GRPOConfig field \(nor a "
                                         r"speed switch of patarm.train.grpo.SpeedGRPOConfig\) \(did you mean "
                                         r"'mask_truncated_completions'"):
        parse_args(["--run_dir", str(tmp_path), "--nltk_data", "", "--grpo_settings", "mask_truncated=true"])


def test_a_subset_curve_starts_on_its_own_prompts_and_stays_apart_from_the_full_measurements(tmp_path):
    """eval_every_prompts: the measurements every K steps take the first N held-out items, the policy is measured on
    them before the first step too, and the report keeps that curve apart from the full start / end."""
    from types import SimpleNamespace

    from patarm.demo.downstream.eval import HeldoutCallback
    from patarm.demo.downstream.loop import _curves

    seen = []

    class Fake:
        items = ["a", "b"]

        def evaluate(self, model, tokenizer, names):
            seen.append(model)
            return {"greedy": {"verified": 0.5, "n_verified": 2}, "examples": ["x"]}

    path = tmp_path / "grpo" / "heldout.jsonl"
    path.parent.mkdir()
    state = SimpleNamespace(global_step=0, max_steps=10, is_world_process_zero=True)
    callback = HeldoutCallback(Fake(), 5, str(path), subset=True)
    callback.on_train_begin(None, state, None, model="start")
    for step in range(1, 11):
        state.global_step = step
        callback.on_step_end(None, state, None, model=f"step {step}")
    assert seen == ["start", "step 5"]  # the last step is measured in full after training
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["step"], r["subset"]) for r in rows] == [(0, 2), (5, 2)] and "examples" not in rows[0]
    plain = HeldoutCallback(Fake(), 5, str(tmp_path / "plain.jsonl"))  # every held-out item: start.json is step 0
    state.global_step = 0
    plain.on_train_begin(None, state, None, model="start")
    assert seen == ["start", "step 5"] and not (tmp_path / "plain.jsonl").exists()
    curves = _curves(path.parent, {"greedy": {"verified": 0.4}})
    assert [h["step"] for h in curves["heldout"]] == [0] and curves["heldout"][0]["greedy"]["verified"] == 0.4
    assert [h["step"] for h in curves["heldout_subset"]] == [0, 5]
    assert "heldout_subset" not in _curves(tmp_path / "none", {"greedy": {}})


@pytest.mark.slow
def test_the_policys_speed_switches_end_where_plain_trl_steps_end(tmp_path, monkeypatch):
    """Two policy GRPO steps of the downstream loop from the same SFT policy and seed, with the speed switches
    (GRPOSpeedMixin: each prompt's rollouts scored in one packed sequence and decoded from one prefill, the CPU fused
    head) and with TRL's own paths (`grpo_settings` switching them off): the same rewards and, up to float rounding,
    the same weights. (The compact LM head is on in both: tests/train/test_speed.py checks it against TRL's.)"""
    import torch
    from transformers import AutoModelForCausalLM

    from helpers import run_cli
    from patarm.demo.downstream.config import CONFIG_DIR
    from patarm.train import grpo, lm_head, speed

    packed, heads = [], []

    def counted(*a, **k):
        packed.append(1)
        return speed.shared_prefix_logps(*a, **k)

    def head(*a, _logits=lm_head._logits):
        heads.append(1)
        return _logits(*a)

    monkeypatch.setattr(grpo, "shared_prefix_logps", counted)
    monkeypatch.setattr(lm_head, "_logits", head)
    (tmp_path / "rule.yaml").write_text("rewards: [rule]\nscore_with: []\neval_every: 0\n")
    runs = {}
    for name, settings in (("plain", {"shared_prefix_loss": False, "shared_prefix_rollouts": False}),
                           ("fast", {"cpu_lm_head": True})):
        packed.clear()
        heads.clear()
        argv = ["downstream", "--config", CONFIG_DIR / "downstream-small.yaml", "--config", tmp_path / "rule.yaml",
                "--run_dir", tmp_path / name, "--grpo_steps", 2]
        if settings:
            argv += ["--grpo_settings", ",".join(f"{k}={v}" for k, v in settings.items())]
        run_cli(*argv)
        assert bool(packed) is bool(heads) is (name == "fast")  # the switches did switch
        folder = tmp_path / name / "grpo-rule"
        rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        runs[name] = ([r["reward"] for r in rows if "reward" in r],
                      dict(AutoModelForCausalLM.from_pretrained(folder).named_parameters()))
    assert len(runs["fast"][0]) >= 2 and runs["fast"][0] == pytest.approx(runs["plain"][0], abs=1e-6)
    start = dict(AutoModelForCausalLM.from_pretrained(tmp_path / "plain" / "policy-sft").named_parameters())
    moved = max((runs["plain"][1][k] - start[k]).abs().max().item() for k in start)
    assert moved > 1e-5  # the steps changed the weights, so agreeing below means something
    for key, p in runs["fast"][1].items():
        assert torch.allclose(p, runs["plain"][1][key], atol=moved * 1e-2), key
