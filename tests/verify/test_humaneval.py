"""HumanEval execution: the pass@k estimator, and the real canonical solutions scoring 100."""

import json

import pytest

from patarm.verify import humaneval
from helpers import run_cli


def test_pass_at_k_estimator():
    assert humaneval.pass_at_k(5, 0, 1) == 0.0
    assert humaneval.pass_at_k(5, 5, 1) == 1.0
    assert humaneval.pass_at_k(10, 3, 1) == pytest.approx(0.3)
    # 1 - C(7,2)/C(10,2) = 1 - 21/45
    assert humaneval.pass_at_k(10, 3, 2) == pytest.approx(1 - 21 / 45)
    assert humaneval.pass_at_k(4, 3, 2) == 1.0  # n - c < k: some pair always holds a pass


def test_score_reports_only_ks_every_task_supports():
    R = humaneval.SampleResult
    results = [R("a", "", True, None), R("a", "", False, None), R("b", "", False, None), R("b", "", False, None)]
    assert humaneval.score(results, ks=(1, 2, 10)) == {"pass@1": 25.0, "pass@2": 50.0}


def test_canonical_solutions_score_100_and_wrong_ones_fail(bench, tmp_path, capsys):
    problems_path = bench / "humaneval" / "HumanEval.jsonl.gz"
    problems = humaneval.load_problems(problems_path)
    assert len(problems) == 164
    samples = tmp_path / "samples.jsonl"
    with samples.open("w") as fh:
        for task_id, p in problems.items():
            fh.write(json.dumps({"task_id": task_id, "completion": p["canonical_solution"]}) + "\n")
        fh.write(json.dumps({"task_id": "HumanEval/0", "completion": "    return not True\n"}) + "\n")
    results_path = tmp_path / "results.jsonl"
    run_cli("verify", *["humaneval", "--samples", str(samples), "--problems", str(problems_path),
                 "--results", str(results_path), "--k", "1"])
    out = json.loads(capsys.readouterr().out)
    # HumanEval/0 has one right and one wrong sample (pass@1 = 0.5); the other 163 tasks pass.
    assert out["pass@1"] == pytest.approx(100 * (163 + 0.5) / 164)
    rows = [json.loads(line) for line in results_path.read_text().splitlines()]
    assert sum(r["passed"] for r in rows) == 164 and not rows[-1]["passed"]
    canonical_only = humaneval.score([humaneval.SampleResult(r["task_id"], "", r["passed"], None) for r in rows[:-1]])
    assert canonical_only == {"pass@1": 100.0}


def test_unknown_task_is_an_error(bench, tmp_path):
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "HumanEval/9999", "completion": "pass"}) + "\n")
    with pytest.raises(ValueError, match="not in the problems"):
        humaneval.evaluate(samples, bench / "humaneval" / "HumanEval.jsonl.gz")
