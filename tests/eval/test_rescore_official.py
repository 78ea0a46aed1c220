"""`patarm eval rescore` reads each benchmark's own output file: its field names and spellings, mapped at the edge.

The fixtures are a few rows in the exact shape the official scripts write (texts shortened): JudgeBench
run_judge.py (`judgments[i]["decision"]` spelled "A>B"/"B>A"/"A=B"), RewardBench run_rm.py / run_generative.py
and RewardBench 2 run_v2.py (one JSON object of columns, `scores_chosen`, `results`), RM-Bench run_rm.py (a JSON
list of data rows with `score_chosen`/`score_rejected`, possibly one-element lists)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli
from patarm.eval.runner import rescore

OFFICIAL = Path(__file__).parent / "fixtures" / "official"


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_judgebench_run_judge_output_with_its_decision_spelling(capsys):
    run_cli(
        "eval", "rescore", "--benchmark", "judgebench", "--samples", str(OFFICIAL / "judgebench_run_judge_output.jsonl")
    )
    # p1 right twice, p2 wrong twice, p3 tie + right (A>B in the swapped order is B), p4 missing + right
    assert json.loads(capsys.readouterr().out) == {"overall": 75.0, "knowledge": 50.0, "math": 100.0, "coding": 100.0}


def test_judgebench_decisions_spelled_officially_in_a_record(tmp_path):
    ours = [{"pair_id": "a", "source": "livecodebench", "label": "A>B", "decisions": ["A", ["B", "tie"]]}]
    theirs = [{"pair_id": "a", "source": "livecodebench", "label": "A>B", "decisions": ["A>B", ["B>A", "A=B"]]}]
    assert rescore("judgebench", _jsonl(tmp_path / "t.jsonl", theirs)) == rescore(
        "judgebench", _jsonl(tmp_path / "o.jsonl", ours)
    )


def test_judgebench_unknown_spelling_is_named(tmp_path, capsys):
    path = _jsonl(tmp_path / "s.jsonl", [{"pair_id": "a", "source": "x", "label": "A>B", "decisions": ["A>>>B"]}])
    with pytest.raises(SystemExit) as err:
        run_cli("eval", "rescore", "--benchmark", "judgebench", "--samples", str(path))
    message = capsys.readouterr().err
    assert err.value.code == 2 and "line 1" in message and "'A>>>B'" in message and "A=B" in message


def test_rewardbench_run_rm_scores_file(tmp_path):
    metrics = rescore("rewardbench", OFFICIAL / "rewardbench_run_rm_scores.json")
    assert metrics["subsets"] == {"alpacaeval-easy": 50.0, "refusals-dangerous": 100.0, "math-prm": 0.0}
    ours = [{"id": 30, "subset": "alpacaeval-easy", "score_chosen": 2.0, "score_rejected": 1.0},
            {"id": 31, "subset": "alpacaeval-easy", "score_chosen": 0.1, "score_rejected": 0.5},
            {"id": 1200, "subset": "refusals-dangerous", "score_chosen": 1.0, "score_rejected": 0.0},
            {"id": 2500, "subset": "math-prm", "score_chosen": 1.0, "score_rejected": 1.0}]  # a scalar tie is wrong
    assert metrics == rescore("rewardbench", _jsonl(tmp_path / "o.jsonl", ours))


def test_rewardbench_generative_results_count_a_tie_half():
    assert rescore("rewardbench", OFFICIAL / "rewardbench_run_generative_scores.json")["subsets"] == {
        "alpacaeval-easy": 50.0
    }
    assert rescore("rewardbench", OFFICIAL / "rewardbench_run_generative_scores.json",
                   tie_policy="strict")["subsets"] == {"alpacaeval-easy": pytest.approx(100 / 3)}


def test_rewardbench2_run_v2_scores_file():
    assert rescore("rewardbench2", OFFICIAL / "rewardbench2_run_v2_scores.json")["Math"] == 50.0


def test_rmbench_run_rm_results_list(tmp_path):
    metrics = rescore("rmbench", OFFICIAL / "rmbench_run_rm_results.json")
    # row 1: one cell of each level wins (1/3 each); row 2 (one-element lists) wins every cell
    assert metrics["chat"] == pytest.approx({"hard": 200 / 3, "normal": 200 / 3, "easy": 200 / 3, "avg": 200 / 3})


def test_official_json_list_errors_name_the_row(tmp_path, capsys):
    rows = json.loads((OFFICIAL / "rmbench_run_rm_results.json").read_text())
    rows[1]["score_rejected"] = [0.0, 0.0]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(SystemExit) as err:
        run_cli("eval", "rescore", "--benchmark", "rmbench", "--samples", str(path))
    message = capsys.readouterr().err
    assert err.value.code == 2 and "row 2" in message and "field 'score_rejected'" in message
