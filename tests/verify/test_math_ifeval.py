"""Math answer equivalence (math-verify) on the real GSM8K pool, and IFEval scoring (if-verifiable)."""

import json

import pytest

from helpers import run_cli
from patarm.verify import ifeval, mathans

SOURCES = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")


def test_final_answer_and_equivalence():
    assert mathans.final_answer("so 3 * 6 = 18\nA: 18") == "18"
    assert mathans.final_answer("A: 2\nwait\nA: $1,000") == "$1,000"
    assert mathans.final_answer("#### 72") == "72"
    assert mathans.answers_equal("1000", "$1,000")
    assert mathans.answers_equal("0.5", "1/2")
    assert not mathans.answers_equal("18", "19")
    assert not mathans.answers_equal("18", "")


def test_agrees_with_gsm8k_pool_flags(bench):
    rows = [json.loads(line) for line in (bench / "gsm8k" / "example_model_solutions.jsonl").open()]
    pairs = [(r["ground_truth"], r[s]["solution"]) for r in rows for s in SOURCES]
    flags = [r[s]["is_correct"] for r in rows for s in SOURCES]
    verdicts = mathans.verify_many(pairs)
    agreement = sum(v == f for v, f in zip(verdicts, flags)) / len(flags)
    assert len(flags) == 5276 and agreement >= 0.99


def test_math_cli(tmp_path, capsys):
    path = tmp_path / "m.jsonl"
    rows = [{"gold": "A: 18", "solution": "9*2=18\nA: 18", "is_correct": True},
            {"gold": "A: 18", "solution": "A: 26", "is_correct": False}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    verify_main(["math", "--input", str(path)])
    assert json.loads(capsys.readouterr().out) == {"n": 2, "correct_pct": 50.0, "agreement_pct": 100.0, "agree": 2,
                                                   "flagged": 2}


@pytest.fixture
def ifeval_rows(bench, monkeypatch):
    monkeypatch.setenv("NLTK_DATA", str(bench / "nltk_data"))
    return [json.loads(line) for line in (bench / "ifeval" / "input_data.jsonl").open()]


def test_ifeval_checks_and_empty_response(ifeval_rows):
    row = {"key": 1, "prompt": "p", "instruction_id_list": ["punctuation:no_comma", "change_case:english_lowercase"],
           "kwargs": [{}, {}]}
    assert ifeval.check_response(row, "all lowercase and no commas here").strict == [True, True]
    assert ifeval.check_response(row, "Hello, World").strict == [False, False]
    # Loose drops the first line: a chatty uppercase preface is forgiven there, not in strict.
    got = ifeval.check_response(row, "Sure! Here it is\nall lowercase")
    assert got.strict == [True, False] and got.loose == [True, True]
    assert ifeval.check_response(row, "").strict == [False, False]  # padded, not dropped
    with pytest.raises(ValueError, match="unknown instruction"):
        ifeval.check_response({**row, "instruction_id_list": ["nope:nope"], "kwargs": [{}]}, "x")


def test_ifeval_cli_on_real_inputs(bench, ifeval_rows, tmp_path, capsys):
    responses = tmp_path / "r.jsonl"
    with responses.open("w") as fh:
        for i, row in enumerate(ifeval_rows):
            fh.write(json.dumps({"prompt": row["prompt"], "response": "" if i % 2 else row["prompt"].lower()}) + "\n")
    argv = ["ifeval", "--input", str(bench / "ifeval" / "input_data.jsonl"), "--responses", str(responses)]
    verify_main(argv)
    first = json.loads(capsys.readouterr().out)
    assert set(first) == {"prompt_strict", "inst_strict", "prompt_loose", "inst_loose", "prompts_scored",
                          "prompts_without_response"}
    assert (first["prompts_scored"], first["prompts_without_response"]) == (541, 0)
    assert 0 < first["prompt_strict"] <= first["prompt_loose"] < 50  # half the responses are empty
    assert first["inst_strict"] <= first["inst_loose"]
    verify_main(argv)
    assert json.loads(capsys.readouterr().out) == first  # seeded: reproducible
    with responses.open("w") as fh:  # a partial file is scored over the prompts it answers, and says so
        for row in ifeval_rows[:10]:
            fh.write(json.dumps({"prompt": row["prompt"], "response": row["prompt"].lower()}) + "\n")
    verify_main(argv)
    partial = json.loads(capsys.readouterr().out)
    assert (partial["prompts_scored"], partial["prompts_without_response"]) == (10, 531)
    responses.write_text("")
    with pytest.raises(SystemExit) as exc:  # one line on stderr, exit status 2
        verify_main(argv)
    assert exc.value.code == 2 and "without a response" in capsys.readouterr().err


def verify_main(argv: list[str]) -> None:
    run_cli("verify", *argv)


def test_math_cli_reads_the_gsm8k_pool_layout(bench, tmp_path, capsys):
    """The README's `patarm verify math --input example_model_solutions.jsonl`: one check per source solution."""
    pool = tmp_path / "pool.jsonl"
    with open(bench / "gsm8k" / "example_model_solutions.jsonl") as src:
        pool.write_text("".join(next(src) for _ in range(5)))
    verify_main(["math", "--input", str(pool)])
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 20 and out["agreement_pct"] == 100.0 and set(out["correct_pct_by_source"]) == set(SOURCES)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "6b_finetuning": {"solution": "A: 1"}}) + "\n")
    with pytest.raises(SystemExit):
        verify_main(["math", "--input", str(bad)])
    err = capsys.readouterr().err
    assert "bad.jsonl" in err and "'gold'" in err and "ground_truth" in err


def test_nltk_data_set_after_nltk_was_imported_still_counts(tmp_path, monkeypatch):
    """NLTK reads $NLTK_DATA only at its first import: a folder named later (another test, a long-lived
    process) must still reach nltk.data.path, or the checkers fail with LookupError."""
    import nltk

    folder = str(tmp_path.resolve())
    monkeypatch.setattr(nltk.data, "path", [p for p in nltk.data.path if p != folder])
    monkeypatch.setenv("NLTK_DATA", folder)
    row = {"key": 1, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
    assert ifeval.check_response(row, "no commas here").strict == [True]
    assert folder in nltk.data.path


def _results(flags):
    """PromptResults from per-prompt strict flags (loose = strict)."""
    return [ifeval.PromptResult(k, f"p{k}", ["x"] * len(f), list(f), list(f)) for k, f in enumerate(flags)]


def test_paired_change_pairs_prompts_and_counts_only_those_that_changed():
    from scipy import stats

    # 10 prompts: 3 gained (all followed after), 1 lost, 6 unchanged; instructions: 2 per prompt
    before = _results([[False, True]] * 3 + [[True, True]] + [[True, True]] * 3 + [[False, False]] * 3)
    after = _results([[True, True]] * 3 + [[True, False]] + [[True, True]] * 3 + [[False, False]] * 3)
    got = ifeval.paired_change(before, after)
    p = got["prompt_strict"]
    assert (p["before"], p["after"], p["change"], p["up"], p["down"], p["n"]) == (40.0, 60.0, 20.0, 3, 1, 10)
    d = [1, 1, 1, -1] + [0] * 6
    mean = sum(d) / 10
    se = (sum((x - mean) ** 2 for x in d) / 9 / 10) ** 0.5
    assert p["se"] == pytest.approx(100 * se, abs=1e-3) and p["p"] == pytest.approx(stats.binomtest(3, 4).pvalue)
    i = got["inst_strict"]  # 11 of 20 → 13 of 20: +1 on three prompts, −1 on one
    assert (i["before"], i["after"], i["change"], i["n"]) == (55.0, 65.0, 10.0, 20)
    di, k = [1, 1, 1, -1] + [0] * 6, 2
    se_c = (10 / 9 * sum((x - 0.1 * k) ** 2 for x in di)) ** 0.5 / 20  # cluster-robust: prompts, not instructions
    assert i["se"] == pytest.approx(100 * se_c, abs=1e-3) and i["z"] == pytest.approx(0.1 / se_c, abs=1e-3)
    assert ifeval.paired_change(before, before)["prompt_strict"] | {"p": 1.0} == {
        "before": 40.0, "after": 40.0, "change": 0.0, "se": 0.0, "z": 0.0, "p": 1.0, "n": 10, "up": 0, "down": 0}
    with pytest.raises(ValueError, match="same prompts on both sides: 1 only before"):
        ifeval.paired_change(before, after[:-1])


def test_ifeval_cli_baseline_adds_the_paired_change(bench, ifeval_rows, tmp_path, capsys):
    base, better = tmp_path / "base.jsonl", tmp_path / "better.jsonl"
    with base.open("w") as fb, better.open("w") as fa:
        for i, row in enumerate(ifeval_rows):
            fb.write(json.dumps({"prompt": row["prompt"], "response": ""}) + "\n")
            fa.write(json.dumps({"prompt": row["prompt"], "response": row["prompt"].lower() if i < 100 else ""}) + "\n")
    verify_main(["ifeval", "--input", str(bench / "ifeval" / "input_data.jsonl"), "--responses", str(better),
                 "--baseline", str(base), "--nltk-data", str(bench / "nltk_data"), "--by-instruction"])
    out = json.loads(capsys.readouterr().out)
    change = out["change"]["prompt_strict"]
    assert change["before"] == 0.0 and change["after"] == out["prompt_strict"] > 0 and change["down"] == 0
    assert change["change"] == pytest.approx(out["prompt_strict"]) and change["p"] < 0.05
    # the official report's breakdown: every instruction counted once per tier, the totals match the overall figure
    tiers, before = out["by_instruction"], out["baseline_by_instruction"]
    ids = [i for row in ifeval_rows for i in row["instruction_id_list"]]
    assert set(tiers["tier1"]) == set(ids) and sum(t["n"] for t in tiers["tier1"].values()) == len(ids)
    assert sum(t["n"] for t in tiers["tier0"].values()) == len(ids) and list(tiers["tier0"])[0] == max(
        {i.split(":")[0] for i in ids}, key=lambda c: sum(i.split(":")[0] == c for i in ids))  # most frequent first
    followed = sum(t["n"] * t["strict"] / 100 for t in tiers["tier1"].values())
    assert followed / len(ids) * 100 == pytest.approx(out["inst_strict"], abs=1e-3)
    assert all(t["strict"] == 0.0 for t in before["tier1"].values())  # empty responses follow nothing ...
    lowercase = tiers["tier1"]["change_case:english_lowercase"]  # ... and a lowercased prompt follows that one
    assert lowercase["strict"] > 0 and lowercase["loose"] >= lowercase["strict"]


def test_missing_punkt_tables_are_one_line_naming_the_flag(tmp_path, monkeypatch, capsys):
    import if_verifiable

    def missing(*args, **kwargs):
        raise LookupError("\n****\n  Resource punkt_tab not found.\n  Please use the NLTK Downloader\n****")

    monkeypatch.setattr(if_verifiable, "evaluate_output_for_sample", missing)
    row = {"key": 7, "prompt": "p", "instruction_id_list": ["length_constraints:number_sentences"],
           "kwargs": [{"relation": "less than", "num_sentences": 3}]}
    (tmp_path / "in.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "r.jsonl").write_text(json.dumps({"prompt": "p", "response": "One. Two."}) + "\n")
    with pytest.raises(SystemExit) as exc:
        verify_main(["ifeval", "--input", str(tmp_path / "in.jsonl"), "--responses", str(tmp_path / "r.jsonl")])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1
    assert "checking IFEval prompt 7 needs NLTK's punkt tables: pass --nltk-data" in err and "punkt_tab" in err

    def bug(*args, **kwargs):
        raise IndexError("list index out of range")

    monkeypatch.setattr(if_verifiable, "evaluate_output_for_sample", bug)
    with pytest.raises(IndexError):  # a bug in the checker stays a traceback
        ifeval.check_response(row, "One. Two.")
