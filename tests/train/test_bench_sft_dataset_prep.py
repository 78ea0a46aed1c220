"""bench/sft_dataset_prep.py: bad input is one paragraph and exit 2, before any run starts."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.sft_dataset_prep import main  # noqa: E402


@pytest.mark.parametrize("argv, message", [
    (["--run_dir", "{tmp}/none"], "has no prep/pointwise/sft.jsonl"),
    (["--run_dir", "{tmp}/run"], "has no base/ model; pass --model"),
    (["--run_dir", "{tmp}/run", "--settings", "trl:2"], "give two settings or more"),
    (["--run_dir", "{tmp}/run", "--settings", "trl:2", "fast:2"], "give PREPARATION:PROCESSES"),
    (["--run_dir", "{tmp}/run", "--settings", "trl:2", "batched:0"], "give PREPARATION:PROCESSES"),
])
def test_bad_input_is_one_paragraph_and_exit_2(tmp_path, monkeypatch, capsys, argv, message):
    (tmp_path / "run" / "prep" / "pointwise").mkdir(parents=True)
    (tmp_path / "run" / "prep" / "pointwise" / "sft.jsonl").write_text("{}\n")
    monkeypatch.setattr(sys, "argv", ["sft_dataset_prep.py", *(a.format(tmp=tmp_path) for a in argv)])
    with pytest.raises(SystemExit) as stop:
        main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err and "Traceback" not in err
