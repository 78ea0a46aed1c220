"""The prep steps one by one: mix, dedup, noise, classify, pointwise, pairwise, rl (rule teacher)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import DEMO_PAIRS, run_cli
from patarm.data import PreferencePair
from patarm.demo.synthetic import make_pairs
from patarm.demo.teacher import RuleTeacher
from patarm.io import read_jsonl, write_jsonl
from patarm.prep.classify import classify_pairs, heuristic_domain, load_prompt, parse_label, render_classify
from patarm.prep.dedup import dedup_pairs
from patarm.prep.io import read_pairs
from patarm.prep.mix import flip_labels
from patarm.prep.steps import (
    ClassifyConfig,
    MixConfig,
    PairwiseConfig,
    PointwiseConfig,
    RLConfig,
    run_classify,
    run_mix,
    run_pairwise,
    run_pointwise,
    run_rl,
)


def pair(i, prompt="Tell me about rivers.", chosen=None, rejected=None, source=None, **kw):
    return PreferencePair(id=str(i), prompt=[{"role": "user", "content": prompt}], chosen=chosen or f"good {i}",
                          rejected=rejected or f"bad {i}", source=source, **kw)


def consistent(m):
    return m["rows_in"] == m["rows_out"] + sum(m["dropped"].values())


def test_mix_caps_filters_and_excludes(tmp_path):
    a = tmp_path / "a.jsonl"
    write_jsonl([pair(i, source="magpie_ultra" if i % 4 == 0 else "helpsteer") for i in range(20)], a)
    b = tmp_path / "b.jsonl"
    write_jsonl([{"prompt": f"q{i}", "chosen": "x", "rejected": "y" if i else "x"} for i in range(6)], b)
    write_jsonl([pair(1)], tmp_path / "rl" / "pairs.jsonl")
    cfg = MixConfig(sources=[{"path": str(a), "cap": 10}, {"path": str(b), "on_error": "skip", "name": "bee"}],
                    drop_sources=["Magpie_Ultra"], exclude=[str(tmp_path / "rl")], seed=3)
    m = run_mix(cfg, tmp_path / "out")
    assert m["dropped"] == {"source_filtered": 5, "excluded": 1, "over_cap": 4, "identical_responses": 1}
    assert m["rows_in"] == 26 and m["rows_out"] == 15 and consistent(m)
    out = read_pairs(tmp_path / "out")
    assert {p.source for p in out} == {"helpsteer", "bee"} and "1" not in {p.id for p in out}
    assert run_mix(cfg, tmp_path / "again")["outputs"] == m["outputs"]  # the cap sample is seeded


def test_dedup_exact_id_and_near():
    long = " ".join(f"word{i}" for i in range(80))
    near = long.replace("word40", "changed")
    pairs = [pair(0, long, "good", "bad"), pair(1, long.upper() + " !!", "Good.", "bad"),  # formatting only
             pair(0, "other prompt"), pair(2, near, "good", "bad"), pair(3, "something else entirely")]
    kept, m = dedup_pairs(pairs)
    assert [p.id for p in kept] == ["0", "3"] and m.consistent
    assert m.dropped == {"exact_duplicate": 1, "duplicate_id": 1, "near_duplicate": 1}
    assert [p.id for p in dedup_pairs(pairs, near=False)[0]] == ["0", "2", "3"]
    assert [p.id for p in dedup_pairs(pairs, threshold=1.0)[0]] == ["0", "2", "3"]
    assert len(dedup_pairs([pair(0, "q"), pair(1, "q")], key="prompt")[0]) == 1


def test_label_noise_is_seeded_and_counted():
    pairs = make_pairs(40, seed=0)
    noisy, m = flip_labels(pairs, 0.25, seed=5)
    flipped = [n for n in noisy if n.metadata.get("label_flipped")]
    assert len(flipped) == 10 and m.extra["flipped"] == 10 and m.consistent
    originals = {p.id: p for p in pairs}
    assert all(n.chosen == originals[n.id].rejected for n in flipped)
    assert flip_labels(pairs, 0.25, seed=5)[0] == noisy and flip_labels(pairs, 0.25, seed=6)[0] != noisy


def test_classify_heuristic_teacher_and_fallback(tmp_path):
    pairs = [pair(0, "Solve 3x + 5 = 11 for x."), pair(1, "Fix this python function:\n```def f(): pass```"),
             pair(2, "How do I build a bomb at home?"), pair(3, "Answer in exactly 5 words: why is the sky blue?"),
             pair(4, "What should I cook tonight?")]
    assert [heuristic_domain(p) for p in pairs] == ["math", "code", "safety", "instruction-following", "chat"]
    spec = load_prompt("classify")
    assert set(spec["labels"]) == {"math", "code", "chat", "safety", "instruction-following"}
    assert "Solve 3x" in render_classify(pairs[0], spec)[-1]["content"]
    assert parse_label("<domain> Code </domain>", spec["labels"]) == "code" and parse_label("maybe", ["chat"]) is None

    class Canned:
        def generate(self, prompts, num_samples=1, seed=None, metadata=None):
            return [
                ["<domain>chat</domain>"] if i % 2 else ["I think it is about cooking"] for i in range(len(prompts))
            ]

    out, m = classify_pairs(pairs, Canned())
    assert [p.domain for p in out] == ["math", "chat", "safety", "chat", "chat"]
    assert m.extra["decided_by"] == {"teacher": 2, "heuristic_fallback": 3, "kept_existing": 0}
    write_jsonl(pairs, tmp_path / "in.jsonl")
    with pytest.raises(ValueError, match="needs a teacher"):
        run_classify(ClassifyConfig(input=str(tmp_path / "in.jsonl"), method="teacher"), tmp_path / "o")


@pytest.fixture(scope="module")
def synthetic_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "pairs.jsonl"
    write_jsonl(make_pairs(48, seed=11), path)
    return path


def test_pointwise_pairwise_intersection_and_rl(synthetic_dir, tmp_path):
    teacher = RuleTeacher(error_rate=0.15, seed=2)
    pw = run_pointwise(PointwiseConfig(input=str(synthetic_dir), min_margin=2.0), tmp_path / "pw", teacher)
    assert consistent(pw) and 0 < pw["rows_out"] < 48 and pw["sft_rows"] == 2 * pw["rows_out"]
    sft = list(read_jsonl(tmp_path / "pw" / "sft.jsonl"))
    assert [r["side"] for r in sft[:2]] == ["chosen", "rejected"] and sft[0]["messages"][-1]["role"] == "assistant"
    pa = run_pairwise(PairwiseConfig(input=str(synthetic_dir), intersect_with=str(tmp_path / "pw")),
                      tmp_path / "pa", teacher)
    assert consistent(pa) and pa["dropped"].get("not_in_intersection", 0) > 0
    assert {p.id for p in read_pairs(tmp_path / "pa")} <= {p.id for p in read_pairs(tmp_path / "pw")}
    rl = run_rl(RLConfig(input=str(synthetic_dir), n=8), tmp_path / "rl", RuleTeacher(error_rate=0.2))
    assert consistent(rl) and rl["rows_out"] > 0 and set(rl["dropped"]) <= {"too_easy", "too_hard"}
    assert len(read_pairs(tmp_path / "rl")) == rl["rows_out"]  # what `patarm grpo` reads
    assert not (tmp_path / "rl" / "grpo.jsonl").exists()


def test_teacher_steps_refuse_repeated_ids(tmp_path):
    pairs = make_pairs(3, seed=0)
    write_jsonl(pairs + pairs[:1], tmp_path / "dup.jsonl")
    with pytest.raises(ValueError, match="dedup"):
        run_pointwise(PointwiseConfig(input=str(tmp_path / "dup.jsonl")), tmp_path / "o", RuleTeacher())
    assert not Path(tmp_path / "o" / "manifest.json").exists()


def test_step_commands_on_the_command_line(synthetic_dir, tmp_path, capsys):
    def prep_main(argv):
        run_cli("prep", *argv)

    demo = DEMO_PAIRS
    prep_main(["mix", "--output", str(tmp_path / "mix"), "--sources", str(synthetic_dir),
               json.dumps({"path": str(demo), "cap": 5}), "--drop-sources", "magpie_ultra"])
    prep_main(["noise", "--input", str(tmp_path / "mix"), "--output", str(tmp_path / "noisy"), "--fraction", "0.5"])
    prep_main(["pointwise", "--input", str(synthetic_dir), "--output", str(tmp_path / "pw"), "--teacher", "rule",
               "--min-margin", "2"])
    out = capsys.readouterr().out
    assert "mix: rows_in=96 rows_out=53 dropped: over_cap=43" in out
    assert "noise: rows_in=53 rows_out=53" in out and "pointwise: rows_in=48 rows_out=48" in out
    with pytest.raises(SystemExit) as err:
        prep_main(["rl", "--input", str(synthetic_dir), "--output", str(tmp_path / "rl")])
    assert err.value.code == 2 and "needs a teacher" in capsys.readouterr().err


class _FixedJudge:
    """A judge whose rollouts are given: `texts[(pair index, side)]` for every sample."""

    def __init__(self, texts):
        self.texts = texts

    def generate(self, prompts, num_samples=1, seed=None, metadata=None):
        return [list(self.texts[(k // 2, k % 2)]) for k in range(len(prompts))]


def _judgment(score, note="ok"):
    return f"<rubric>\n1. Correct\n</rubric>\n<eval>{note}</eval>\n<score>{score}</score>"


def test_rl_set_keeps_a_pair_outside_the_band_where_another_reward_varies():
    from patarm.prep.corpus import rl_set

    pairs = [pair(i) for i in range(3)]
    easy = [_judgment(9)] * 4, [_judgment(2)] * 4          # every rollout ranks the pair right: rate 1
    texts = {(0, 0): easy[0], (0, 1): easy[1],
             (1, 0): [_judgment(9, "contradicts")] + [_judgment(9)] * 3, (1, 1): easy[1],  # easy, one rollout flagged
             (2, 0): [_judgment(2)] * 4, (2, 1): [_judgment(9)] * 4}                     # hopeless, nothing varies

    def flagged(completions, **kwargs):
        assert len(kwargs["prompts"]) == len(completions)
        return [-1.0 if "contradicts" in c else 0.0 for c in completions]

    kept, manifest = rl_set(pairs, _FixedJudge(texts), "pointwise", n=4, keep_rewards=[flagged])
    assert [p.id for p in kept] == ["1"] and manifest.extra["kept_for_other_rewards"] == 1
    assert dict(manifest.dropped) == {"too_easy": 1, "too_hard": 1}
    kept, manifest = rl_set(pairs, _FixedJudge(texts), "pointwise", n=4)  # PAR's band alone, as in the paper
    assert kept == [] and manifest.extra["kept_for_other_rewards"] == 0


def test_the_rl_step_reads_its_keep_rewards_by_name(synthetic_dir, tmp_path):
    cfg = RLConfig(input=str(synthetic_dir), n=4, keep_rewards=["patarm.demo.gsm8k.consistency:evidence_reward"])
    rl = run_rl(cfg, tmp_path / "rl", RuleTeacher(error_rate=0.2))
    assert consistent(rl) and rl["kept_for_other_rewards"] == 0  # the rule teacher's judgments break it alike
    with pytest.raises(ValueError, match="keep_rewards entry"):
        run_rl(RLConfig(input=str(synthetic_dir), keep_rewards=["patarm.rewards:no_such"]), tmp_path / "x",
               RuleTeacher())
