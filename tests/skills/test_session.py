"""Progressive disclosure, sample-specific mounting, static routing and the evidence format."""

import pytest

from patarm.rubrics import render_primary_rubrics
from patarm.skills.package import find_skill
from patarm.skills.router import parse_evidence, route, static_prompt, whole_bank_prompt
from patarm.skills.session import SkillSession, mount

SKILL = find_skill("reward-judge")
GOOD = "She has 16 - 3 - 4 = <<16-3-4=9>>9 eggs.\nShe makes 9 * 2 = $<<9*2=18>>18.\nA: 18"
BAD = "She has 16 - 3 = <<16-3=13>>13 eggs.\n13 * 2 = <<13*2=27>>27\nA: 27"


def test_list_shows_descriptions_not_content():
    session = SkillSession(SKILL, {"prompt": "q", "candidates": [GOOD], "domain": "math"})
    listed = session.list_resources()
    ids = {r["id"] for r in listed}
    assert "math-rubric" in ids and "safety-rubric" not in ids and "chat-checklist" not in ids
    assert all(set(r) == {"id", "type", "action", "scope", "description", "mounted"} for r in listed)
    assert session.trace[-1]["action"] == "list_resources"
    with pytest.raises(ValueError, match="run_resource"):
        session.view_resource("answer-agreement")
    with pytest.raises(KeyError):
        session.view_resource("nope")


def test_run_verifiers_collect_evidence_and_mounting_is_per_sample():
    reference = mount("reference-answer", "reference", "... A: 18")
    session = SkillSession(SKILL, {"prompt": "q", "candidates": [GOOD, BAD], "domain": "math"}, [reference])
    assert any(r["id"] == "reference-answer" and r["mounted"] for r in session.list_resources())
    session.run_resource("reference-match")
    session.run_resource("calculator-annotations")
    assert [e.assessment for e in session.evidence[0]] == ["pass", "pass"]
    assert [e.assessment for e in session.evidence[1]] == ["fail", "fail"]
    index, scores = session.best_of_n()
    assert index == 0 and scores[1] == 1  # reference mismatch vetoes
    assert [j.score for j in session.pointwise()][0] == 10
    other = SkillSession(SKILL, {"prompt": "q", "candidates": [GOOD], "domain": "math"})
    assert "error" in other.run_resource("reference-match")  # nothing mounted for this sample
    assert all(r["id"] != "reference-answer" for r in other.list_resources())


def test_sandbox_tool_and_unit_tests_verifier():
    tests = mount("tests-add", "reference", {"prompt": "def add(a, b):\n", "entry_point": "add",
                                             "test": "def check(f):\n    assert f(2, 3) == 5\n"})
    session = SkillSession(SKILL, {"prompt": "add", "candidates": ["    return a + b\n", "    return a - b\n"],
                                   "domain": "code"}, [tests])
    session.run_resource("unit-tests")
    assert session.pairwise() == "A"
    verdict = session.run_resource("python-sandbox", code="print(2 ** 10)")
    assert verdict["status"] == "ok" and verdict["stdout"] == "1024\n"


def test_static_routing_selects_by_domain_and_is_smaller_than_the_bank():
    assert [r.id for r in route(SKILL, "math")][:2] == ["math-rubric", "math-checklist"]
    messages = static_prompt(SKILL, "How much does she make?", BAD, "math")
    user = messages[1]["content"]
    assert render_primary_rubrics("math") in user and render_primary_rubrics("safety") not in user
    assert "calculator-annotations :: fail" in user  # verifier evidence routed into the prompt
    assert len(user) < len(whole_bank_prompt(SKILL))


def test_parse_evidence_lines():
    text = (
        "- Correctness :: fail :: final answer 26 vs 18\nnot an item\nconstraint:no-comma :: PASS\nstyle :: 7.5 :: ok"
    )
    items = parse_evidence(text)
    assert [(i.criterion, i.assessment) for i in items] == [("Correctness", "fail"), ("constraint:no-comma", "pass"),
                                                           ("style", 7.5)]
    assert items[0].observation == "final answer 26 vs 18"


def test_unit_tests_verifier_needs_the_tests_to_complete():
    """Regression: a candidate that exits 0 before the tests run (sys.exit, os._exit, SystemExit) passed."""
    tests = mount("tests-add", "reference", {"prompt": "def add(a, b):\n", "entry_point": "add",
                                             "test": "def check(f):\n    assert f(2, 3) == 5\n"})
    cheats = ["    return a - b\nimport sys\nsys.exit(0)\n", "    return a - b\nimport os\nos._exit(0)\n",
              "    return a - b\nraise SystemExit\n", "    return a - b\nprint('all tests passed')\n"]
    session = SkillSession(SKILL, {"prompt": "add", "candidates": ["    return a + b\n", *cheats], "domain": "code"},
                           [tests])
    session.run_resource("unit-tests")
    assert [e.assessment for per in session.evidence for e in per] == ["pass"] + ["fail"] * len(cheats)


def test_static_prompt_runs_only_the_named_verifiers():
    named = static_prompt(SKILL, "How much does she make?", BAD, "math", run_verifiers=["calculator-annotations"])
    user = named[1]["content"]
    assert "calculator-annotations :: fail" in user and "answer-agreement ::" not in user
    assert "answer-agreement ::" in static_prompt(SKILL, "How much does she make?", BAD, "math")[1]["content"]
    assert "Verifier evidence" not in static_prompt(SKILL, "q", BAD, "math", run_verifiers=[])[1]["content"]


def test_arithmetic_check_recomputes_steps_and_finds_unused_numbers():
    from patarm.skills.verifiers import arithmetic_check, calculator_steps, unused_numbers

    assert calculator_steps(BAD) == (2, ["13*2=27"], "27") and calculator_steps("no steps. A: 3") == (0, [], None)
    assert unused_numbers("Janet's ducks lay 16 eggs, she eats 3 and bakes 4; $2 each, 1,200 total.", BAD) == [
        "4",
        "1200",
    ]
    rows = arithmetic_check({"prompt": "16 eggs, 3 eaten, 4 baked, $2", "candidates": [GOOD, BAD]})["evidence"]
    assert [(r["candidate"], r["criterion"], r["assessment"], r["observation"]) for r in rows] == [
        (0, "wrong steps", "pass", "0 of 2"), (0, "last step", "pass", "18"), (0, "unused numbers", "pass", "none"),
        (1, "wrong steps", "fail", "1 of 2"), (1, "last step", "pass", "27"), (1, "unused numbers", "fail", "4")]
