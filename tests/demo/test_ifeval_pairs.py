"""More than one pair per prompt from the policy's samples (`pairs_per_prompt`): which pairs, their ids and counts,
the judge's corpus without repeats, and pairs made otherwise refused rather than reused."""

from __future__ import annotations

import json

import pytest

from helpers import IFEVAL_ROW as ROW
from helpers import ifeval_pair_row as _row
from helpers import run_cli
from patarm.demo.ifeval.pairs import label_pairs
from patarm.demo.ifeval.teacher import ConstraintTeacher


def test_more_pairs_per_prompt_take_every_pair_that_differs_widest_gap_first():
    from patarm.demo.ifeval.judge import _distinct_rows, sft_rows_and_pairs
    from patarm.judge import load_template
    from patarm.prep.corpus import pointwise_corpus

    texts = ["The sea, it is blue.", "The sea is blue and calm.", "Hello, world", "The sea is blue and calm.",
             "Blue sea, calm"]  # followed 1, 2, 0, 2 (a repeat), 1
    one, _, _ = label_pairs([_row(0)], [texts])
    every, _, manifest = label_pairs([_row(0)], [texts], per_prompt=0)
    assert [(p.chosen, p.rejected) for p in every[:1]] == [(p.chosen, p.rejected) for p in one]  # first: as before
    assert [p.metadata["followed"] for p in every] == [[2, 0], [1, 0], [2, 1], [2, 1], [1, 0]]  # widest gap first
    assert len({frozenset((p.chosen, p.rejected)) for p in every}) == 5  # the repeated response pairs once
    assert [p.id for p in every] == ["p0", "p0-p1", "p0-p2", "p0-p3", "p0-p4"]
    assert manifest.consistent and manifest.rows_out == 1 and manifest.extra["pairs"] == 5
    assert manifest.extra["followed_gap"] == {2: 1, 1: 4}
    assert len(label_pairs([_row(0)], [texts], per_prompt=3)[0]) == 3
    with pytest.raises(ValueError, match="per_prompt must be >= 0"):
        label_pairs([_row(0)], [texts], per_prompt=-1)
    # the judge's corpus holds each response once, though it is in several pairs
    template = load_template("pointwise-compact", rubric_mode="primary")
    rows, corpus = pointwise_corpus(every, ConstraintTeacher(), template, min_margin=0.0)
    distinct = _distinct_rows(rows, corpus)
    assert len(rows) == 10 and len(distinct) == 4 and corpus.extra["duplicate_rows"] == 6
    assert corpus.extra["sft_rows"] == 4
    # every pair past the margin filter is one the judge trained on (its BT pairs), repeats or not
    rows, corpus = pointwise_corpus(every, ConstraintTeacher(), template, min_margin=0.0)
    distinct, pairs = sft_rows_and_pairs(every, rows, corpus)
    assert len(distinct) == 4 and [p.id for p in pairs] == [p.id for p in every]
    rows, corpus = pointwise_corpus(every, ConstraintTeacher(), template, min_margin=5.0)  # 10 vs 1 only
    assert [p.id for p in sft_rows_and_pairs(every, rows, corpus)[1]] == ["p0"]  # the filtered pairs are not


def test_pairs_made_with_another_pairs_per_prompt_are_an_error_not_reused(tmp_path):
    from patarm.demo.ifeval.recipe import parse_args, stage_pairs
    from patarm.demo.kit import Clock

    (tmp_path / "ifeval.jsonl").write_text(json.dumps(ROW) + "\n")
    args = parse_args(["--run_dir", str(tmp_path), "--ifeval_file", str(tmp_path / "ifeval.jsonl"),
                       "--pairs_per_prompt", "0"])
    folder = tmp_path / "prep" / "pairs"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"rows_in": 1, "rows_out": 1}))  # before the option: 1
    with pytest.raises(ValueError, match=r"prep/pairs: these pairs were made with pairs_per_prompt 1, this run asks "
                                         r"for 0; use another --run_dir, or delete"):
        stage_pairs(args, tmp_path, Clock())
    with pytest.raises(ValueError, match="--pairs_per_prompt must be >= 0"):
        parse_args(["--ifeval_file", str(tmp_path / "ifeval.jsonl"), "--pairs_per_prompt", "-2"])


def test_a_judge_corpus_made_with_another_judge_template_is_an_error_not_reused(tmp_path, capsys):
    from patarm.demo.ifeval.judge import stage_judge
    from patarm.demo.ifeval.recipe import parse_args
    from patarm.demo.kit import Clock

    (tmp_path / "ifeval.jsonl").write_text(json.dumps(ROW) + "\n")
    args = parse_args(["--run_dir", str(tmp_path), "--ifeval_file", str(tmp_path / "ifeval.jsonl"),
                       "--judge_template", "pointwise-counts"])
    folder = tmp_path / "prep" / "pointwise"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"rows_in": 1, "rows_out": 1}))  # before the option: compact
    with pytest.raises(ValueError, match=r"prep/pointwise: the judge's SFT corpus was made with judge_template "
                                         r"pointwise-compact, this run asks for pointwise-counts; use another"):
        stage_judge(args, tmp_path, [], [], Clock())
    with pytest.raises(SystemExit) as bad:
        run_cli("downstream", "--recipe", "ifeval", "--judge_template", "pointwise")
    assert bad.value.code == 2 and "invalid choice" in capsys.readouterr().err
