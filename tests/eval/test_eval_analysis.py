"""Trivial baselines checked by hand on a few items of each benchmark, the bias probes, calibration, and the
intervals / baselines / paired differences as `patarm eval` and `patarm eval compare` show them."""

from __future__ import annotations

import json
import random

import pytest
from test_eval_harness import ScriptedJudge, drawer, jb_items

from helpers import run_cli
from patarm.eval import analysis, registry


def _pointwise(scores):
    return [[{"score": s}] for s in scores]


def test_rewardbench_length_baselines_by_hand():
    rows = [{"id": 1, "subset": "alpacaeval-easy", "lengths": [10, 5]},  # chosen longer
            {"id": 2, "subset": "alpacaeval-easy", "lengths": [12, 3]},
            {"id": 3, "subset": "hep-python", "lengths": [4, 9]},  # chosen shorter
            {"id": 4, "subset": "hep-python", "lengths": [7, 7]}]  # a tie: wrong under the official scalar rule
    base = analysis.baselines(registry.get("rewardbench"), rows, None)
    assert base["longer"]["subsets"] == {"alpacaeval-easy": 100.0, "hep-python": 0.0}
    assert base["shorter"]["subsets"] == {"alpacaeval-easy": 0.0, "hep-python": 50.0}
    assert base["longer"]["chat"] == 100.0 and base["longer"]["reasoning"] == 0.0 and base["longer"]["score"] == 50.0
    assert "random" not in base  # a pair set: a random pick is 50 % by construction
    half = analysis.baselines(registry.get("rewardbench"), rows, "half")
    assert half["shorter"]["subsets"]["hep-python"] == 75.0


def test_rmbench_length_baselines_by_hand():
    # chosen variants 3, 5, 7 characters; rejected 4, 4, 4. Longer-wins: chosen[i] beats rejected[j] for i = 1, 2.
    rows = [{"id": 1, "domain": "chat", "lengths": [3, 5, 7, 4, 4, 4]}]
    base = analysis.baselines(registry.get("rmbench"), rows, None)
    assert base["longer"]["chat"] == pytest.approx({"hard": 100 / 3, "normal": 200 / 3, "easy": 100.0, "avg": 200 / 3})
    assert base["shorter"]["chat"] == pytest.approx({"hard": 200 / 3, "normal": 100 / 3, "easy": 0.0, "avg": 100 / 3})


def test_judgebench_length_baselines_by_hand():
    rows = [{"pair_id": "a", "source": "livebench-math", "label": "A>B", "lengths": [30, 10]},  # longer is right
            {"pair_id": "b", "source": "livebench-math", "label": "B>A", "lengths": [30, 10]},  # shorter is right
            {"pair_id": "c", "source": "mmlu-pro-law", "label": "B>A", "lengths": [5, 50]}]  # longer is right
    base = analysis.baselines(registry.get("judgebench"), rows, None)
    assert base["longer"] == pytest.approx({"overall": 200 / 3, "math": 50.0, "knowledge": 100.0})
    assert base["shorter"] == pytest.approx({"overall": 100 / 3, "math": 50.0, "knowledge": 0.0})


def test_rewardbench2_length_and_random_baselines_by_hand():
    rows = [{"id": 1, "subset": "Focus", "num_correct": 1, "lengths": [90, 10, 20, 30]},  # the correct one is longest
            {"id": 2, "subset": "Focus", "num_correct": 1, "lengths": [5, 10, 20, 30]},  # ... shortest
            {"id": 3, "subset": "Math", "num_correct": 2, "lengths": [7, 7, 1, 2]}]  # two correct tied at the top
    base = analysis.baselines(registry.get("rewardbench2"), rows, None)
    assert base["longer"] == {"Focus": 50.0, "Math": 50.0, "score": 50.0}  # official: 1 / (number tied at the top)
    assert base["shorter"] == {"Focus": 50.0, "Math": 0.0, "score": 25.0}
    assert base["random"] == {"Focus": 25.0, "Math": 50.0, "score": 37.5}  # num_correct / candidates, exactly


def test_flags_when_a_baseline_wins_or_the_judge_follows_length():
    bench = registry.get("rewardbench")
    rows = [{"id": i, "subset": "alpacaeval-easy", "score_chosen": float(n), "score_rejected": 5.0, "lengths": [n, 5],
             "judge_outputs": _pointwise([n, 5])} for i, n in enumerate([9, 8, 7, 2] * 3)]  # scores = lengths
    metrics = bench.score(rows)
    out = analysis.analyze(bench, rows, metrics, None, n_resamples=50)
    assert out["bias"]["length_agreement"]["all"] == {"agree": 12, "decisions": 12, "share": 1.0}
    assert out["bias"]["length_spearman"]["rho"] == pytest.approx(1.0)
    assert any("agrees with longer-wins on 100% of 12" in f for f in out["flags"])
    few = analysis.analyze(bench, rows[:9], bench.score(rows[:9]), None, n_resamples=20)
    assert not any("agrees" in f for f in few["flags"])  # 9 decisions are too few to flag
    assert not any("beats the judge" in f for f in out["flags"])  # longer-wins only ties the judge here
    rows[3]["score_chosen"], rows[3]["judge_outputs"] = 9.0, _pointwise([9, 5])  # now right where length is wrong
    worse = [dict(r, score_chosen=1.0, judge_outputs=_pointwise([1, 5])) for r in rows]
    out = analysis.analyze(bench, worse, bench.score(worse), None, n_resamples=50)
    flag = next(f for f in out["flags"] if f.startswith("longer-wins beats the judge on"))
    assert "subsets.alpacaeval-easy 75.0 vs 0.0*" in flag  # above the judge's whole interval [0, 0]


def test_position_flips_by_position():
    def orders(ab, ba):
        return {"0,1": {"ab": [{"decision": d} for d in ab], "ba": [{"decision": d} for d in ba]}}

    rows = [{"judge_outputs": orders(["A", "A"], ["B", "A"])},  # consistent once, then first-position twice
            {"judge_outputs": orders(["B"], ["B"])},  # second-position both times
            {"judge_outputs": orders([None], ["A"])}]
    assert analysis.position_flips(rows) == {"consistent": 1, "first": 1, "second": 1, "other": 1, "pairs": 4,
                                             "first_share_of_flips": 1 / 3, "second_share_of_flips": 1 / 3}
    assert analysis.position_flips([{"judge_outputs": _pointwise([1, 2])}]) is None


def test_calibration_table_by_score_gap():
    bench = registry.get("rewardbench")
    pairs = [(9, 8), (8, 9), (7, 6), (6, 6), (9, 6), (9, 6), (2, 5)]  # (chosen, rejected) scores
    rows = [{"id": i, "subset": "alpacaeval-easy", "judge_outputs": _pointwise(p)} for i, p in enumerate(pairs)]
    cal = analysis.calibration(bench, rows)
    assert (cal["pairs"], cal["tied"]) == (7, 1)
    table = {r["gap"]: (r["pairs"], r["higher_is_better"]) for r in cal["table"]}
    assert table == {"1": (3, pytest.approx(2 / 3)), "3": (3, pytest.approx(2 / 3))}
    assert all(r["ci"][0] < r["higher_is_better"] < r["ci"][1] for r in cal["table"])


@pytest.fixture()
def two_runs(tmp_path):
    """Two judgebench runs on the same items: a length judge, and one that always answers A."""
    items = jb_items()  # the length judge gets 2 of 3 right, always-A none (it never changes its mind)
    dirs = []
    for name, judge in (("length", ScriptedJudge()), ("always-a", ScriptedJudge(bias="A"))):
        from patarm.eval.harness import run_benchmark
        from patarm.eval.judging import JudgingPlan

        out = tmp_path / name
        result = run_benchmark("judgebench", items, drawer(judge), JudgingPlan(mode="pairwise"), out, n_resamples=200)
        (out / "metrics.json").write_text(json.dumps({"judgebench": result}))
        dirs.append(out)
    return dirs


def test_metrics_json_and_report_carry_intervals_baselines_and_probes(two_runs):
    from patarm.eval.report import write_report

    result = json.loads((two_runs[0] / "judgebench" / "metrics.json").read_text())
    assert result["uncertainty"]["bootstrap"] == {"method": "stratified cluster bootstrap, percentile",
                                                  "n_resamples": 200, "seed": 0, "level": 0.95,
                                                  "unit": "prompts within strata", "wilson_where_degenerate": []}
    lo, hi = result["uncertainty"]["intervals"]["overall"]
    assert lo <= result["headline"] <= hi
    assert result["bias"]["position"]["consistent"] == 3 and result["baselines"]["longer"]["overall"] == pytest.approx(
        200 / 3
    )
    zero = json.loads((two_runs[1] / "judgebench" / "metrics.json").read_text())["uncertainty"]  # always-A: 0 of 3
    from patarm.eval.stats import wilson

    assert zero["intervals"]["overall"] == pytest.approx([100 * x for x in wilson(0, 3)])  # not [0, 0]
    assert zero["bootstrap"]["wilson_where_degenerate"] == ["overall", "math"]
    report = write_report(two_runs[0], plots=False).read_text()
    assert "95% CI" in report and "longer-wins" in report and "shorter-wins" in report
    assert "longer-wins (flagged above 80% of at least 10): overall 100% of 3" in report


def test_compare_prints_the_paired_difference(two_runs, capsys):
    run_cli("eval", "compare", *map(str, two_runs), "--bootstrap_resamples", "200")
    out = capsys.readouterr().out
    assert "Paired on 3 items judged by both" in out and "| overall | 66.67 | 0.00 | -66.67 |" in out
    assert "always-a better on 0, length better on 2, same on 1" in out and "exact two-sided p = 0.5" in out


def test_real_rmbench_longer_wins_by_an_independent_count(rmbench_dir):
    """On real RM-Bench prompts: longer-wins' normal accuracy is the share of (chosen i, rejected i) pairs where
    the chosen response is strictly longer, counted here directly from the data."""
    bench = registry.get("rmbench")
    items = bench.load(rmbench_dir / "chat_filtered.json")
    random.Random(0).shuffle(items)
    items = items[:60]
    rows = [{"id": it["id"], "domain": it["domain"], "lengths": [len(c) for c in it["candidates"]]} for it in items]
    normal = sum(len(it["candidates"][i]) > len(it["candidates"][3 + i]) for it in items for i in range(3)) / (
        3 * len(items)
    )
    assert analysis.baselines(bench, rows, None)["longer"]["chat"]["normal"] == pytest.approx(100 * normal)


def test_real_judgebench_shorter_wins_by_an_independent_count(judgebench_dir):
    bench = registry.get("judgebench")
    items = bench.load(judgebench_dir)[:80]
    rows = [{**it, "lengths": [len(c) for c in it["candidates"]]} for it in items]
    right = sum((len(it["candidates"][0]) < len(it["candidates"][1])) == (it["label"] == "A>B")
                and len(it["candidates"][0]) != len(it["candidates"][1]) for it in items)
    assert analysis.baselines(bench, rows, None)["shorter"]["overall"] == pytest.approx(100 * right / len(items))
