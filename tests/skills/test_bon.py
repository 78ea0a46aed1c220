"""Best-of-N with the skill: a small generic pool, the judge-model hook, and the real GSM8K pool."""

import json

from helpers import run_cli
from patarm.skills.bon import PoolItem, cross_fitted_priors, evaluate_pool, load_pool, model_judge
from patarm.skills.package import find_skill

SKILL = find_skill("reward-judge")


def _pool(tmp_path):
    rows = [{"prompt": "2+2?", "reference": "A: 4", "candidates": [
        {"source": "m1", "response": "A: 5", "is_correct": False},
        {"source": "m2", "response": "<<2+2=4>>4\nA: 4", "is_correct": True},
        {"source": "m3", "response": "A: 4", "is_correct": True}]},
        {"prompt": "3*3?", "reference": "A: 9", "candidates": [
            {"source": "m1", "response": "<<3*3=6>>6\nA: 6", "is_correct": False},
            {"source": "m2", "response": "A: 8", "is_correct": False},
            {"source": "m3", "response": "A: 9", "is_correct": True}]}]
    path = tmp_path / "pool.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_generic_pool_with_and_without_reference(tmp_path, capsys):
    run_cli("skill", "bon", "--pool", _pool(tmp_path), "--skill", "reward-judge")
    report = json.loads(capsys.readouterr().out)
    without, with_ref = report["without_reference"], report["with_reference"]
    assert without["single_source"] == {"m1": 0.0, "m2": 50.0, "m3": 100.0} and without["oracle"] == 100.0
    # Item 1: agreement picks the "4" cluster; item 2: all answers differ, the wrong annotation of m1
    # fails, m2 (lowest index among the rest) is chosen.
    assert without["skill_selection"] == 50.0
    assert with_ref["skill_selection"] == 100.0


def test_cross_fitted_priors_never_use_the_items_own_fold():
    items = [PoolItem("", ["a", "b"], ["x", "y"], [i % 2 == 0, True]) for i in range(4)]
    priors = cross_fitted_priors(items)
    assert priors[0] == {"x": 0.0, "y": 1.0} and priors[1] == {"x": 1.0, "y": 1.0}


class FakeBackend:
    """Scores candidates by whether they end in the answer 4 (stands in for a judge model)."""

    def generate(self, prompts, num_samples=1, seed=None):
        outs = []
        for messages in prompts:
            response = messages[-1]["content"].split("<response>")[1].split("</response>")[0].strip()
            good = response.endswith("A: 4")
            outs.append(
                [
                    f"<eval>Correctness :: {'pass' if good else 'fail'} :: checked</eval>\n"
                    f"<score>{9 if good else 2}</score>"
                ]
            )
        return outs


def test_model_judge_adds_evidence(tmp_path):
    items = load_pool(_pool(tmp_path))[:1]
    result = evaluate_pool(SKILL, items, verifiers=[], judge=model_judge(FakeBackend(), SKILL, "math"))
    assert result["skill_selection"] == 100.0 and result["judge_model"]


def test_real_gsm8k_pool(bench):
    items = load_pool(bench / "gsm8k" / "example_model_solutions.jsonl")
    assert len(items) == 1319
    with_ref = evaluate_pool(SKILL, items, with_reference=True)
    assert (with_ref["best_single"], with_ref["oracle"]) == (56.25, 67.25)
    assert with_ref["skill_selection"] == with_ref["oracle"]  # the mounted reference finds every correct one
    without = evaluate_pool(SKILL, items[:200])
    assert 0 < without["skill_selection"] <= without["oracle"]
