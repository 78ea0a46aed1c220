"""`patarm prep normalize`: the manifest adds up, errors name file/row/field, converters, the real demo file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_cli
from patarm.data import DataError
from patarm.data.layouts.helpsteer import helpsteer2_messages
from patarm.io import sha256_file
from patarm.prep.io import read_pairs, step_is_done
from patarm.prep.normalize import NormalizeConfig, normalize


def prep_main(argv):
    run_cli("prep", *argv)

REPO = Path(__file__).resolve().parents[2]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


GOOD = {"prompt": "Say hi.", "chosen": "Hi!", "rejected": "No."}
MIXED = [GOOD, {"prompt": "q", "chosen": "same", "rejected": "same"}, "{not json", {"prompt": "q2", "chosen": "a"},
         {"prompt": "Count to 3.", "chosen": "1 2 3", "rejected": "1 2"}]


def test_manifest_adds_up_with_skip(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", MIXED)
    m = normalize(NormalizeConfig(input=str(src), on_error="skip"), tmp_path / "out")
    assert (m["rows_in"], m["rows_out"]) == (5, 2)
    assert m["dropped"] == {"identical_responses": 1, "bad_json": 1, "missing_field": 1}
    assert m["rows_in"] == m["rows_out"] + sum(m["dropped"].values())
    assert m["inputs"][0]["sha256"] == sha256_file(src)
    assert m["outputs"]["pairs.jsonl"] == sha256_file(tmp_path / "out" / "pairs.jsonl")
    assert set(m["timings"]) >= {"load_s", "write_s", "total_s"}
    assert len(read_pairs(tmp_path / "out")) == 2
    on_disk = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert on_disk["rows_out"] == 2 and on_disk["config"]["on_error"] == "skip"
    assert step_is_done(tmp_path / "out", on_disk["config"], on_disk["inputs"])


def test_raise_names_file_row_field(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", MIXED)
    with pytest.raises(DataError) as info:
        normalize(NormalizeConfig(input=str(src)), tmp_path / "out")
    assert f"{src}, line 2, field 'rejected'" in str(info.value)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_cli_exit_message_and_summary(tmp_path, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", MIXED)
    with pytest.raises(SystemExit) as info:
        prep_main(["normalize", "--input", str(src), "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "line 2" in err and "identical_responses" in err
    prep_main(["normalize", "--input", str(src), "--output", str(tmp_path / "o"), "--on-error", "skip"])
    assert "rows_in=5 rows_out=2" in capsys.readouterr().out


def test_columns_and_converter_errors_name_the_file(tmp_path):
    src = write_jsonl(tmp_path / "code.jsonl", [{"input": "Write f.", "accepted": "def f(): pass", "rejected": "f"},
                                                {"input": "Write g.", "accepted": "", "rejected": "g"}])
    cfg = NormalizeConfig(input=str(src), columns={"prompt": "input", "chosen": "accepted"}, on_error="skip")
    m = normalize(cfg, tmp_path / "o")
    assert (m["rows_out"], m["dropped"]) == (1, {"empty_response": 1})
    assert str(src) in m["examples"]["empty_response"]
    with pytest.raises(DataError, match=str(src)):
        normalize(NormalizeConfig(input=str(src), columns={"prompt": "input", "chosen": "accepted"}), tmp_path / "p")


def test_helpsteer3_and_helpsteer2(tmp_path):
    ctx = [{"role": "user", "content": "2+2?"}]
    hs3 = write_jsonl(tmp_path / "hs3.jsonl", [
        {"domain": "stem", "context": ctx, "response1": "4", "response2": "5", "overall_preference": -2},
        {"domain": "stem", "context": ctx, "response1": "5", "response2": "4", "overall_preference": 3},
        {"domain": "stem", "context": ctx, "response1": "4", "response2": "four", "overall_preference": 0}])
    m = normalize(NormalizeConfig(input=str(hs3), layout="helpsteer3"), tmp_path / "a")
    assert (m["rows_in"], m["rows_out"], m["dropped"]) == (3, 2, {"tie": 1})
    assert [p.chosen for p in read_pairs(tmp_path / "a")] == ["4", "4"]
    rated = [
        {"prompt": "Hi\n<extra_id_1>Assistant\nHello\n<extra_id_1>User\nName a fruit", "response": r, "helpfulness": h}
        for r, h in (("apple", 4), ("rock", 1))
    ] + [{"prompt": "Same?", "response": r, "helpfulness": 2} for r in ("x", "y")]
    hs2 = write_jsonl(tmp_path / "hs2.jsonl", rated)
    m = normalize(NormalizeConfig(input=str(hs2), layout="helpsteer2_ratings"), tmp_path / "b")
    assert (m["rows_in"], m["rows_out"], m["dropped"]) == (2, 1, {"tie": 1})
    pair = read_pairs(tmp_path / "b")[0]
    assert (pair.chosen, pair.rejected, len(pair.prompt)) == ("apple", "rock", 3)
    assert helpsteer2_messages("Hi\n<extra_id_1>Assistant\nHello\n<extra_id_1>User\nQ")[1] == \
        {"role": "assistant", "content": "Hello"}


def test_real_demo_file_through_the_cli(tmp_path, bench):
    demo = bench / "preference-pairs" / "dpo_en_demo.json"
    if not demo.is_file():
        pytest.skip(f"shared benchmark data not present at {demo}")
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "patarm", "prep", "normalize", "--input", str(demo),
                           "--output", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rows_out"] == 300 and manifest["rows_in"] == 300 + sum(manifest["dropped"].values())
    assert sum(1 for _ in open(out / "pairs.jsonl")) == 300
    import datasets  # the corpus must load with `datasets`, as trainers read it

    assert len(datasets.load_dataset("json", data_files=str(out / "pairs.jsonl"), split="train")) == 300
