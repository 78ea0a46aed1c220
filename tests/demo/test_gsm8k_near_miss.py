"""Near-miss RL pairs (`rl_near_misses`): a correct solution against itself with a final answer that begins like
the right one, shares its digits or differs in sign — the numbers the trained GSM8K judge compares by their start."""

import json
import random

import pytest

from patarm.demo.gsm8k.data import NEAR_MISS_KINDS, Problem, near_miss, near_miss_pairs
from patarm.demo.gsm8k.evidence import gather
from patarm.verify.mathans import answers_equal

SOLUTION = "She has 16 - 4 = <<16-4=12>>12 eggs.\nShe sells them for 12 * 2 = $<<12*2=24>>24\nA: 24"


def test_a_near_miss_is_wrong_and_reads_like_the_answer():
    rng = random.Random(0)
    seen = {}
    for answer in ("24", "2", "-13", "2.5", "0", "$5,600", "100"):
        for _ in range(20):
            kind, miss = near_miss(answer, rng)
            seen.setdefault(kind, set()).add((answer, miss))
            assert not answers_equal(answer, miss), (answer, kind, miss)
    assert set(seen) == set(NEAR_MISS_KINDS)
    assert ("24", "2") in seen["drop-digit"] and ("2.5", "2") in seen["drop-digit"] and ("-13", "13") in seen["sign"]
    assert all(m.startswith(a.replace("$5,600", "5600")) for a, m in seen["add-digit"] | seen["add-decimal"])
    assert not any(a == "0" for a, _ in seen["add-digit"])  # 0 → 07 would read as 7
    assert near_miss("1/2", rng) is None and near_miss("twelve", rng) is None


def _problem(k: int, solutions: list[str], correct: list[bool], answer: str = "24") -> Problem:
    return Problem(f"gsm8k-{k:04d}", "How much does she make?", answer, [f"m{j}" for j in range(len(solutions))],
                   solutions, correct)


def test_near_miss_pairs_keep_the_solution_and_change_only_its_answer():
    problems = [_problem(0, ["A: 3", SOLUTION], [False, True]),
                _problem(1, ["no answer line here 24", "A: 5"], [True, False]),
                _problem(2, [SOLUTION.replace("A: 24", "A: 1/2")], [True], answer="1/2"),
                _problem(3, [SOLUTION, "A: 7"], [True, False]),
                _problem(4, [SOLUTION], [True])]
    pairs, manifest = near_miss_pairs(problems, 2, seed=0, disclose=True, skill="gsm8k-judge-graded")
    assert [p.metadata["problem"] for p in pairs] == ["gsm8k-0000", "gsm8k-0003"]  # the first 2 that give one
    assert manifest.rows_in == 4 and manifest.rows_out == 2  # problem 4 not reached
    assert dict(manifest.dropped) == {"no_answer_line": 1, "not_a_plain_number": 1}
    assert sum(manifest.extra["kinds"].values()) == 2
    for p in pairs:
        assert p.chosen == SOLUTION and p.rejected.startswith(SOLUTION[:SOLUTION.rfind("A:")])
        assert p.metadata["reference"] == "24" and p.metadata["disclose"] and p.metadata["near_miss"] in NEAR_MISS_KINDS
        assert p.id.endswith("~" + p.metadata["near_miss"])
        right, wrong = (gather(p.question, r, "24", canonical=True) for r in (p.chosen, p.rejected))
        # the teacher's evidence: the near miss is wrong and no longer the last step's result (score 10 vs <= 3)
        assert (right.correct, right.follows, wrong.correct, wrong.follows) == (True, True, False, False)
    again, _ = near_miss_pairs(problems, 2, seed=0, disclose=True, skill="gsm8k-judge-graded")
    assert [p.to_dict() for p in again] == [p.to_dict() for p in pairs]  # seeded
    assert near_miss_pairs(problems, 0, seed=0, disclose=True, skill="s")[0] == []


def test_the_rl_set_adds_near_misses_and_counts_them(tmp_path, bench):
    """A tiny judge end to end: the RL pool gains the near-miss pairs, the kept band (0..1 here) keeps them all, and
    the report counts them."""
    from test_gsm8k_recipe import TINY

    from helpers import run_cli

    run_dir = tmp_path / "run"
    run_cli("quickstart", "--recipe", "gsm8k-skill", "--model", "tiny", "--run_dir", run_dir, "--data_dir",
            bench / "gsm8k", *TINY, "--bt_baseline", "false", "--vote_k", "0", "--rl_problems", "2",
            "--rl_near_misses", "2")
    rl = json.loads((run_dir / "report.json").read_text())["arms"]["reference"]["prep"]["rl"]
    assert rl["pool"] == 4 and rl["kept"] == 4
    assert rl["near_misses"]["made"] == 2 and rl["near_misses"]["kept"] == 2
    kept = [json.loads(line) for line in (run_dir / "reference" / "prep" / "rl" / "pairs.jsonl").open()]
    assert sum("near_miss" in p["metadata"] for p in kept) == 2
    assert "4 (2 near misses)" in (run_dir / "report.md").read_text()


def test_the_sft_corpus_adds_the_teachers_near_miss_judgments_and_counts_them(tmp_path, bench):
    """`sft_near_misses`: the teacher's judgment of each near miss (its side only) joins the SFT corpus, stating both
    numbers and `correct :: fail` / `follows :: no`; the manifest and the report count them; the pairs file (the BT
    baseline's pairs) has them."""
    from test_gsm8k_recipe import TINY

    from helpers import run_cli
    from patarm.demo.gsm8k.consistency import check, stated

    run_dir = tmp_path / "run"
    run_cli("quickstart", "--recipe", "gsm8k-skill", "--model", "tiny", "--run_dir", run_dir, "--data_dir",
            bench / "gsm8k", *TINY, "--bt_baseline", "false", "--vote_k", "0", "--grpo_steps", "0",
            "--sft_problems", "3", "--sft_near_misses", "3")
    prep = run_dir / "reference" / "prep" / "pointwise"
    manifest = json.loads((prep / "manifest.json").read_text())
    misses = manifest["near_misses"]
    assert misses["made"] == 3 and misses["rows"] == 3 and sum(misses["kinds"].values()) == 3
    rows = [json.loads(line) for line in (prep / "sft.jsonl").open()]
    assert manifest["sft_rows"] == len(rows)
    extra = [r for r in rows if "~" in r["pair_id"]]
    assert len(extra) == 3 and {r["side"] for r in extra} == {"rejected"}
    for r in extra:
        judgment = r["messages"][-1]["content"]
        lines = stated(judgment)
        assert (lines["correct"], lines["follows"]) == ("fail", "no"), judgment
        assert lines["final answer"] != lines["reference answer"], judgment
        assert check(judgment)[0] == "consistent", judgment
    pairs = [json.loads(line)["id"] for line in (prep / "pairs.jsonl").open()]
    assert {r["pair_id"] for r in extra} <= set(pairs)
    assert f"{len(rows)} (3 near misses)" in (run_dir / "report.md").read_text()


@pytest.mark.parametrize("flag", ["--rl_near_misses", "--sft_near_misses", "--sft_unanimous"])
def test_near_miss_counts_must_not_be_negative(flag):
    from patarm.demo.gsm8k.recipe import parse_args

    with pytest.raises(ValueError, match=f"{flag[2:]} must be >= 0, got -1"):
        parse_args([flag, "-1"])


def test_unanimous_rows_without_the_evidence_arms_agreement_are_an_error():
    from patarm.demo.gsm8k.recipe import parse_args

    with pytest.raises(ValueError, match="sft_unanimous 8 adds rows to the evidence arm"):
        parse_args(["--sft_unanimous", "8", "--arms", "reference"])
    with pytest.raises(ValueError, match="sft_unanimous 8 adds rows to the evidence arm"):
        parse_args(["--sft_unanimous", "8", "--arms", "evidence", "--evidence_agreement", "false"])
    assert parse_args(["--sft_unanimous", "8", "--arms", "reference", "evidence"]).sft_unanimous == 8
