"""`reuse_sft`: a GRPO-only ablation links a finished run's SFT judge, corpus, RL set and judgments; anything whose
deciding arguments differ is redone (no training here: the stage folders are faked by their completion markers)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from patarm.demo.gsm8k import ablations, seeds
from patarm.demo.gsm8k.recipe import argument_defaults, parse_args
from patarm.demo.gsm8k.reuse import TRAINING_KEYS, reuse_sft
from patarm.io import read_json, write_json


def _finished_run(root: Path, *flags: str) -> Path:
    args = parse_args(["--ablation", "baseline", "--run_dir", str(root), *flags])
    arm = root / "reference"
    for marker in ("prep/pointwise/manifest.json", "prep/rl/manifest.json",
                   "eval/base.jsonl", "eval/sft.jsonl", "eval/sft-expected.jsonl", "eval/grpo.jsonl"):
        (arm / marker).parent.mkdir(parents=True, exist_ok=True)
        (arm / marker).write_text(marker)
    config = yaml.safe_load(Path(args.sft_config).read_text())  # what the SFT judge records it trained with
    write_json({"stage": "sft", "training": {k: config[k] for k in TRAINING_KEYS if k in config}},
               arm / "sft" / "patarm_config.json")
    write_json({"arguments": asdict(args)}, root / "report.json")
    write_json({"heldout": ["a"], "sft": ["b"], "rl": ["c"]}, root / "split.json")
    return root


def _reuse(src: Path, dst: Path, *flags: str) -> dict:
    args = parse_args(["--run_dir", str(dst), "--reuse_sft", str(src), *flags])
    return reuse_sft(args.reuse_sft, dst, args.arms, asdict(args), argument_defaults())


def test_a_grpo_only_ablation_links_the_sft_judge_and_copies_its_judgments(tmp_path):
    src = _finished_run(tmp_path / "baseline")
    dst = tmp_path / "label"
    got = _reuse(src, dst, "--ablation", "label-reward")["reference"]
    assert got["stages"] == ["prep/pointwise", "sft", "prep/rl", "eval/base.jsonl", "eval/sft.jsonl",
                             "eval/sft-expected.jsonl"]
    arm = dst / "reference"
    assert (arm / "sft").resolve() == (src / "reference" / "sft").resolve()
    assert (arm / "prep" / "rl" / "manifest.json").read_text() == "prep/rl/manifest.json"
    assert not (arm / "eval" / "grpo.jsonl").exists()          # the stage the ablation changes is its own
    assert not (arm / "eval" / "sft.jsonl").is_symlink()       # copied: forget_eval may delete it here
    # resuming links nothing twice and reports the same
    assert _reuse(src, dst, "--ablation", "label-reward")["reference"]["stages"] == got["stages"]


def test_what_differs_is_redone_and_named(tmp_path):
    src = _finished_run(tmp_path / "baseline")
    got = _reuse(src, tmp_path / "adaptive", "--ablation", "rubric-adaptive")["reference"]
    assert got["stages"] == [] and "rubric_mode" in got["not_reused"] and "max_new_tokens" in got["not_reused"]
    assert not (tmp_path / "adaptive" / "reference" / "sft").exists()
    # other rollouts: the SFT judge is the same, its RL set is not
    got = _reuse(src, tmp_path / "rollouts", "--ablation", "label-reward", "--rl_rollouts", "8")["reference"]
    assert got["stages"][:2] == ["prep/pointwise", "sft"] and "prep/rl" not in got["stages"]
    assert got["rl_differs"] == ["rl_rollouts"] and not (tmp_path / "rollouts" / "reference" / "prep" / "rl").exists()
    # rejection sampling that also keeps pairs for GRPO's other rewards: another RL set, the same SFT judge
    got = _reuse(src, tmp_path / "keep", "--rl_keep_rewards", "patarm.demo.gsm8k.consistency:evidence_reward")
    assert got["reference"]["rl_differs"] == ["rl_keep_rewards"] and "sft" in got["reference"]["stages"]
    # near-miss pairs added to the RL pool: another RL set, the same SFT judge
    got = _reuse(src, tmp_path / "misses", "--rl_near_misses", "80")
    assert got["reference"]["rl_differs"] == ["rl_near_misses"] and "sft" in got["reference"]["stages"]
    # a run that trained its own SFT judge keeps it and links nothing beside it
    own = tmp_path / "own" / "reference" / "sft"
    own.mkdir(parents=True)
    got = _reuse(src, tmp_path / "own", "--ablation", "f-constant")["reference"]
    assert got["stages"] == ["eval/base.jsonl"] and "its own" in got["not_reused"]  # the base judge's, as below


def test_more_sft_epochs_redo_the_sft_judge_but_copy_the_base_judges_judgments(tmp_path):
    src = _finished_run(tmp_path / "baseline")
    dst = tmp_path / "sft-more"
    got = _reuse(src, dst, "--ablation", "sft-more")["reference"]
    assert got["not_reused"] == "arguments differ: ['sft_epochs']"
    assert got["stages"] == ["eval/base.jsonl"]
    arm = dst / "reference"
    assert (arm / "eval" / "base.jsonl").read_text() == "eval/base.jsonl" and not (arm / "sft").exists()
    assert not (arm / "eval" / "sft.jsonl").exists()
    # another judging length changes the base judgments too: nothing copied
    assert _reuse(src, tmp_path / "longer", "--ablation", "sft-more", "--max_new_tokens", "128")["reference"][
        "stages"] == []


def test_a_source_that_is_not_a_finished_run_or_has_another_split_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no report.json"):
        _reuse(tmp_path / "missing", tmp_path / "dst")
    src = _finished_run(tmp_path / "baseline")
    write_json({"heldout": ["z"], "sft": ["b"], "rl": ["c"]}, tmp_path / "dst" / "split.json")
    with pytest.raises(ValueError, match="split differs"):
        _reuse(src, tmp_path / "dst")


def test_a_larger_rl_pool_reuses_the_sft_judge_and_redoes_the_rl_set(tmp_path):
    """Only the held-out and SFT problems decide the SFT judge: a run with another RL pool (its split.json already
    written, as the recipe writes it before reusing) links the judge and rolls its own RL set out."""
    src = _finished_run(tmp_path / "baseline")
    write_json({"heldout": ["a"], "sft": ["b"], "rl": ["c", "d"]}, tmp_path / "more" / "split.json")
    got = _reuse(src, tmp_path / "more", "--rl_problems", "160")["reference"]
    assert got["stages"][:2] == ["prep/pointwise", "sft"] and "prep/rl" not in got["stages"]
    assert "rl_problems" in got["rl_differs"] and not (tmp_path / "more" / "reference" / "prep" / "rl").exists()
    write_json({"heldout": ["a"], "sft": ["b"], "rl": ["d"]}, tmp_path / "other" / "split.json")  # same size, others
    assert _reuse(src, tmp_path / "other")["reference"]["rl_differs"] == ["rl problems"]


def test_the_ablation_table_and_the_seeds_mode_pass_the_sft_judge_on(tmp_path):
    runs = []
    out = ablations.run_all(["--ablation", "all", "--run_dir", str(tmp_path)], parse_args,
                            lambda a: runs.append(a) or _report(a.reuse_sft))
    assert {a.ablation: a.reuse_sft for a in runs} == {"baseline": "", **{
        n: str(tmp_path / "baseline") for n in ablations.names()[1:]}}
    assert [r["sft_judge"] for r in out["rows"]][:2] == ["own", f"linked from {tmp_path / 'baseline'}"]
    assert f"| linked from {tmp_path / 'baseline'} |" in (tmp_path / "ablations.md").read_text()
    runs.clear()
    ablations.run_all(["--ablation", "all", "--run_dir", str(tmp_path), "--reuse_sft", "/main"], parse_args,
                      lambda a: runs.append(a) or _report(a.reuse_sft))
    assert {a.reuse_sft for a in runs} == {"/main"}
    args = parse_args(["--run_dir", "r", "--seeds", "0", "1", "--reuse_sft", "main"])
    assert seeds.per_seed_args(args, 1).reuse_sft == str(Path("main") / "seed-1")
    assert seeds.per_seed_args(parse_args(["--run_dir", "r", "--seeds", "0"]), 0).reuse_sft == ""


def _report(reuse: str = "") -> dict:
    m = {"pair_accuracy": 0.5, "best_of_n": 50.0, "top_tied_mixed": 0.1, "consistency": {"consistent_rate": 1.0}}
    return {"arms": {"reference": {"stages": {"sft": m, "grpo": m}, "prep": {"sft": {"sft_rows": 8}}}},
            "seconds": 1.0} | ({"reused": {"reference": {"from": reuse, "stages": ["sft"]}}} if reuse else {})


def test_another_grpo_seed_reuses_the_sft_judge_and_reaches_the_grpo_stage_alone(tmp_path, monkeypatch):
    src = _finished_run(tmp_path / "baseline")
    got = _reuse(src, tmp_path / "g1", "--ablation", "baseline", "--grpo_seed", "1")["reference"]
    assert {"sft", "prep/rl"} <= set(got["stages"])
    from patarm.demo.gsm8k import recipe

    calls = []
    for name, fake in {"prep_sft_corpus": lambda *a, **k: {}, "trained": lambda folder: Path(folder).name == "sft",
                       "judge_folder": lambda folder: folder, "rl_stage": lambda *a, **k: {"kept": 1},
                       "forget_eval": lambda *a: None, "stage_args": lambda stage, config, d, *flags: (
                           stage, SimpleNamespace(flags=flags, per_device_train_batch_size=16, num_generations=8,
                                                  gradient_accumulation_steps=1, world_size=1, max_steps=None)),
                       "train_stage": lambda stage, parsed: calls.append(parsed), "_evaluate": lambda *a, **k: {},
                       "grpo_curve": lambda path: []}.items():
        monkeypatch.setattr(recipe, name, fake)
    clock = type("Clock", (), {"done": lambda *a: None})()
    for flags, seed in (([], "0"), (["--grpo_seed", "3"], "3"), (["--grpo_epochs", "1"], "0")):
        calls.clear()
        args = parse_args(["--ablation", "baseline", "--run_dir", str(tmp_path / "r"), *flags])
        recipe.run_arm(args, "reference", tmp_path / "r" / "reference", [], [], [], clock)
        [(stage, training)] = calls  # the SFT judge is there: GRPO is the only stage trained
        given = training.flags
        assert stage == "grpo" and given[given.index("--seed") + 1] == seed
        # the steps as configured (40 on 1 kept pair), or one pass over the kept pair with --grpo_epochs 1
        assert training.max_steps == (1 if args.grpo_epochs else args.grpo_steps) and args.grpo_steps == 40


def test_an_argument_the_source_predates_counts_as_its_default(tmp_path):
    src = _finished_run(tmp_path / "old")
    report = src / "report.json"
    old = read_json(report)
    del old["arguments"]["follows_no_repeat"]          # a run made before the argument existed
    del old["arguments"]["teacher_numbers"]
    write_json(old, report)
    same = _reuse(src, tmp_path / "same", "--follows_no_repeat", "1", "--teacher_numbers", "as-written")
    assert same["reference"]["stages"][:2] == ["prep/pointwise", "sft"]
    got = _reuse(src, tmp_path / "canonical")["reference"]  # the default since 2026-12-06: another SFT corpus
    assert got["stages"] == ["eval/base.jsonl"] and "teacher_numbers" in got["not_reused"]
    got = _reuse(src, tmp_path / "more")["reference"]  # the CPU default repeats them 4× since 2026-12-04
    assert got["stages"] == ["eval/base.jsonl"] and "follows_no_repeat" in got["not_reused"]


def test_an_sft_judge_trained_under_an_older_config_text_is_not_reused(tmp_path):
    """Both runs name the same SFT config file, but the source's judge recorded other epochs (the file changed since):
    its arguments look equal, its training did not."""
    src = _finished_run(tmp_path / "old")
    recorded = src / "reference" / "sft" / "patarm_config.json"
    old = read_json(recorded)
    assert _reuse(src, tmp_path / "same")["reference"]["stages"][:2] == ["prep/pointwise", "sft"]
    old["training"]["num_train_epochs"] = 1
    write_json(old, recorded)
    got = _reuse(src, tmp_path / "now")["reference"]
    assert got["stages"] == ["eval/base.jsonl"] and "num_train_epochs 1 -> 2" in got["not_reused"]
    assert not (tmp_path / "now" / "reference" / "sft").exists()



def test_sft_configs_compare_by_what_they_train_with(tmp_path):
    """Another SFT config file with the same settings but other comments and checkpointing reuses the SFT judge;
    one with another learning rate does not."""
    src = _finished_run(tmp_path / "src")
    settings = yaml.safe_load(Path(parse_args([]).sft_config).read_text())
    saving = tmp_path / "saving.yaml"
    saving.write_text("# checkpoints every 5 steps\n" + yaml.safe_dump(
        {**settings, "save_strategy": "steps", "save_steps": 5, "save_total_limit": 1}))
    got = _reuse(src, tmp_path / "saving", "--sft_config", str(saving))["reference"]
    assert got["stages"][:2] == ["prep/pointwise", "sft"]
    faster = tmp_path / "faster.yaml"
    faster.write_text(yaml.safe_dump({**settings, "learning_rate": 3.0e-4}))
    got = _reuse(src, tmp_path / "faster", "--sft_config", str(faster))["reference"]
    assert "sft" not in got["stages"] and "sft_config" in got["not_reused"]

def test_a_bad_rl_keep_rewards_entry_fails_when_parsed():
    with pytest.raises(ValueError, match="rl_keep_rewards entry 'patarm.rewards' is not a function"):
        parse_args(["--rl_keep_rewards", "patarm.rewards"])


def test_a_redone_rl_set_starts_from_the_source_runs_rollout_cache(tmp_path):
    """The rollouts of the reused judge are keyed on its content, so a run that redoes the RL set (here: near-miss
    pairs added) starts from a copy of the source's cache and samples only the prompts it lacks; a cache of its own
    is kept."""
    from patarm.backends import GenerationCache

    src = _finished_run(tmp_path / "baseline")
    theirs = GenerationCache(src / "reference" / "prep" / "rl" / "cache.sqlite")
    theirs.put_many([("k1", "rollout 1"), ("k2", "rollout 2")], "sha256:judge")
    theirs.close()
    got = _reuse(src, tmp_path / "nm", "--rl_near_misses", "8")["reference"]
    assert got["rl_differs"] == ["rl_near_misses"] and "prep/rl/cache.sqlite" in got["stages"]
    copy = tmp_path / "nm" / "reference" / "prep" / "rl"
    assert not (copy / "manifest.json").exists() and not copy.is_symlink()  # the RL set is redone
    ours = GenerationCache(copy / "cache.sqlite")
    assert ours.get_many(["k1", "k2", "k3"]) == {"k1": "rollout 1", "k2": "rollout 2"}
    ours.put_many([("k3", "our own")], "sha256:judge")
    ours.close()
    _reuse(src, tmp_path / "nm", "--rl_near_misses", "8")  # again: its own cache is not replaced
    ours = GenerationCache(copy / "cache.sqlite")
    assert len(ours) == 3
    ours.close()


def _both_arms_run(root: Path, flags: list[str], predates: tuple[str, ...]) -> None:
    """A run folder of both arms with every stage marker, made with `flags`, its report without the arguments it
    `predates` (a run made before they existed)."""
    args = parse_args(["--run_dir", str(root), "--arms", "reference", "evidence", *flags])
    config = yaml.safe_load(Path(args.sft_config).read_text())
    for name in ("reference", "evidence"):
        arm = root / name
        for marker in ("prep/pointwise/manifest.json", "prep/rl/manifest.json", "eval/base.jsonl", "eval/sft.jsonl"):
            (arm / marker).parent.mkdir(parents=True, exist_ok=True)
            (arm / marker).write_text(marker)
        write_json({"stage": "sft", "training": {k: config[k] for k in TRAINING_KEYS if k in config}},
                   arm / "sft" / "patarm_config.json")
    old = asdict(args)
    for key in predates:
        del old[key]
    write_json({"arguments": old}, root / "report.json")
    write_json({"heldout": ["a"], "sft": ["b"], "rl": ["c"]}, root / "split.json")


def test_the_evidence_arms_agreement_decides_its_reuse_alone(tmp_path):
    """A run made without the evidence arm's agreement line (before 2026-12-07): its reference arm is reused, its
    evidence arm is redone — base judgments included, whose prompts now disclose the agreement."""
    root = tmp_path / "old"
    # the run predates them: their defaults
    _both_arms_run(root, ["--evidence_agreement", "false"],
                  ("evidence_agreement", "evidence_max_new_tokens", "evidence_score_rule"))
    got = _reuse(root, tmp_path / "new", "--arms", "reference", "evidence")
    assert got["reference"]["stages"][:2] == ["prep/pointwise", "sft"]
    assert got["evidence"]["stages"] == [] and "evidence_agreement" in got["evidence"]["not_reused"]
    same = _reuse(root, tmp_path / "same", "--arms", "reference", "evidence", "--evidence_agreement", "false")
    assert same["evidence"]["stages"][:2] == ["prep/pointwise", "sft"]


def test_the_evidence_arms_score_rule_decides_its_reuse_alone(tmp_path):
    """A run with the agreement line but made before its prompt stated the score rule (2026-12-07 #19): the rule
    (the default now) redoes the evidence arm, `--evidence_score_rule false` reuses it."""
    root = tmp_path / "old"
    _both_arms_run(root, [], ("evidence_score_rule",))
    got = _reuse(root, tmp_path / "new", "--arms", "reference", "evidence")
    assert got["reference"]["stages"][:2] == ["prep/pointwise", "sft"]
    assert got["evidence"]["stages"] == [] and "evidence_score_rule" in got["evidence"]["not_reused"]
    same = _reuse(root, tmp_path / "same", "--arms", "reference", "evidence", "--evidence_score_rule", "false")
    assert same["evidence"]["stages"][:2] == ["prep/pointwise", "sft"]


def test_the_evidence_arms_unanimous_rows_decide_its_reuse_alone(tmp_path):
    """A run made before `sft_unanimous` (2026-12-07 #20) counts as 0 of them: asking for some redoes the evidence
    arm's SFT judge only (its base judge's judgments, which no SFT row decides, are copied); the reference arm,
    which has no agreement line, ignores them."""
    root = tmp_path / "old"
    _both_arms_run(root, [], ("sft_unanimous",))
    got = _reuse(root, tmp_path / "new", "--arms", "reference", "evidence", "--sft_unanimous", "8")
    assert got["reference"]["stages"][:2] == ["prep/pointwise", "sft"]
    assert got["evidence"]["stages"] == ["eval/base.jsonl"] and "sft_unanimous" in got["evidence"]["not_reused"]
    assert not (tmp_path / "new" / "evidence" / "sft").exists()
    same = _reuse(root, tmp_path / "same", "--arms", "reference", "evidence", "--sft_unanimous", "0")
    assert same["evidence"]["stages"][:2] == ["prep/pointwise", "sft"]


def test_the_rl_sets_rollout_temperature_is_the_grpo_configs_and_decides_its_reuse(tmp_path):
    """The RL set's rollouts sample at the GRPO config's temperature unless `rl_temperature` says otherwise; a run
    made before the argument (2026-12-07 #21) sampled at 1.0, its config's. Another temperature redoes the RL set
    from the same SFT judge; the same temperature said either way reuses it."""
    hot = tmp_path / "grpo-hot.yaml"
    hot.write_text(yaml.safe_dump(yaml.safe_load(Path(parse_args([]).grpo_config).read_text()) | {"temperature": 1.5}))
    assert parse_args([]).rollout_temperature == 1.0
    assert parse_args(["--grpo_config", str(hot)]).rollout_temperature == 1.5
    assert parse_args(["--grpo_config", str(hot), "--rl_temperature", "0.7"]).rollout_temperature == 0.7
    with pytest.raises(ValueError, match="rl_temperature must be > 0"):
        parse_args(["--rl_temperature", "0"])
    root = tmp_path / "old"
    _both_arms_run(root, [], ("rl_temperature",))
    got = _reuse(root, tmp_path / "hot", "--arms", "reference", "--grpo_config", str(hot))["reference"]
    assert got["stages"][:2] == ["prep/pointwise", "sft"] and got["rl_differs"] == ["rl_temperature"]
    assert not (tmp_path / "hot" / "reference" / "prep" / "rl").exists()
    same = _reuse(root, tmp_path / "same", "--arms", "reference", "--grpo_config", str(hot), "--rl_temperature", "1")
    assert "prep/rl" in same["reference"]["stages"] and "rl_differs" not in same["reference"]
