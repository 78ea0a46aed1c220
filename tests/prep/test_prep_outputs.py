"""Prep and export never write over their own input (issue 22 case 7), and say what a non-file input is."""

import hashlib
import os
import shutil

import pytest

from helpers import DEMO_PAIRS, run_cli


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _refused(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as err:
        run_cli(*argv)
    assert err.value.code == 2
    return capsys.readouterr().err


def test_normalize_into_the_folder_of_its_input_is_refused_before_writing(tmp_path, capsys):
    d = tmp_path / "D"
    d.mkdir()
    shutil.copy(DEMO_PAIRS, d / "pairs.jsonl")
    before = _digest(d / "pairs.jsonl")
    says = _refused(capsys, "prep", "normalize", "--input", d / "pairs.jsonl", "--output", d, "--on_error", "skip")
    assert "--output" in says and "overwrite" in says
    assert _digest(d / "pairs.jsonl") == before and sorted(os.listdir(d)) == ["pairs.jsonl"]


def test_a_step_into_its_own_input_folder_is_refused(tmp_path, capsys):
    run_cli("prep", "normalize", "--input", DEMO_PAIRS, "--output", tmp_path / "n")
    manifest = _digest(tmp_path / "n" / "manifest.json")
    says = _refused(capsys, "prep", "dedup", "--input", tmp_path / "n", "--output", tmp_path / "n")
    assert "holds the input" in says and _digest(tmp_path / "n" / "manifest.json") == manifest


def test_a_fifo_input_is_named_for_what_it_is(tmp_path, capsys):
    fifo = tmp_path / "pairs.jsonl"
    os.mkfifo(fifo)
    says = _refused(capsys, "prep", "normalize", "--input", fifo, "--output", tmp_path / "out")
    assert "not a regular file" in says and "directory" not in says


def test_export_refuses_its_checkpoint_as_output_and_leaves_no_temporary_folder(tmp_path, capsys):
    from patarm.models.tiny import build_tiny_judge

    ckpt = tmp_path / "ckpt"
    build_tiny_judge(["hello world"] * 4, ckpt, vocab_size=300, hidden_size=16, num_layers=1)
    says = _refused(capsys, "export", "--checkpoint", ckpt, "--output", ckpt, "--overwrite")
    assert "holds the input" in says and (ckpt / "config.json").is_file()
    target = tmp_path / "FILE"
    target.write_text("a file")
    run_cli("export", "--checkpoint", ckpt, "--output", target, "--overwrite")
    assert (target / "config.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE", "ckpt"]
