"""`patarm eval` commands: rescore (stdout JSON, located errors), a tiny-model run on the real files, compare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli
from patarm.eval.runner import data_paths

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> None:
    run_cli("eval", *argv)


def _write(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_rescore_prints_metrics_and_ignores_extra_fields(tmp_path, capsys):
    rows = [{"id": 1, "subset": "alpacaeval-easy", "score_chosen": 2, "score_rejected": 1, "my_note": "kept"},
            {"id": 2, "subset": "alpacaeval-easy", "score_chosen": 0, "score_rejected": 1, "raw": {"any": [1]}}]
    main(["rescore", "--benchmark", "rewardbench", "--samples", str(_write(tmp_path / "s.jsonl", rows))])
    out = json.loads(capsys.readouterr().out)
    assert out["chat"] == 50.0 and out["score"] == 50.0 and out["subsets"] == {"alpacaeval-easy": 50.0}


@pytest.mark.parametrize("bad, expected", [
    ({"id": 2, "domain": "chat", "score_chosen": [1, 2, 3], "score_rejected": [1, 2]}, "field 'score_rejected'"),
    ('{"id": 2, "domain": ', "not valid JSON"),
    ({"id": 2, "domain": "chat", "score_chosen": [1, 2, 3]}, "field 'score_rejected': missing"),
])
def test_rescore_errors_name_file_line_and_field(tmp_path, bad, expected, capsys):
    good = {"id": 1, "domain": "chat", "score_chosen": [1, 2, 3], "score_rejected": [0, 0, 0]}
    path = _write(tmp_path / "samples.jsonl", [good, bad])
    with pytest.raises(SystemExit) as err:
        main(["rescore", "--benchmark", "rmbench", "--samples", str(path)])
    message = capsys.readouterr().err
    assert err.value.code == 2 and message.count("\n") == 1
    assert str(path) in message and "line 2" in message and expected in message


def test_rescore_reproduces_judgebench_official_format(tmp_path, capsys):
    rows = [{"pair_id": "a", "source": "livecodebench", "label": "A>B", "decisions": ["A", "B"]},
            {"pair_id": "b", "source": "mmlu-pro-law", "label": "B>A", "decisions": ["B", "B"]}]
    main(["rescore", "--benchmark", "judgebench", "--samples", str(_write(tmp_path / "s.jsonl", rows))])
    assert json.loads(capsys.readouterr().out) == {"overall": 50.0, "knowledge": 0.0, "coding": 100.0}


def test_data_paths_by_position_or_name():
    assert data_paths(["rmbench", "judgebench"], ["x", "y"]) == {"rmbench": "x", "judgebench": "y"}
    assert data_paths(["rmbench", "judgebench"], ["judgebench=y"]) == {"rmbench": None, "judgebench": "y"}
    with pytest.raises(ValueError, match="one per benchmark"):
        data_paths(["rmbench", "judgebench"], ["x"])


@pytest.mark.parametrize("config", sorted((ROOT / "configs" / "eval").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_eval_configs_parse(config):
    from patarm.config import parse_stage
    from patarm.eval.runner import EvalArguments

    assert config.read_text().startswith("# patarm eval --config configs/eval/")
    (args,) = parse_stage((EvalArguments,), ["--config", str(config), "--model", "m", "--output", "o"], prog="t")
    assert args.benchmark and args.model == "m"


@pytest.fixture(scope="module")
def tiny_judge(tmp_path_factory):
    from patarm.models.tiny import build_tiny_judge

    path = tmp_path_factory.mktemp("judge")
    texts = ["<rubric>1. correct</rubric>\n<eval>the answer is right</eval>\n<score>7</score>"] * 30
    build_tiny_judge(texts, path, vocab_size=400)
    return path


def test_eval_run_on_real_files_with_tiny_model(tmp_path, tiny_judge, rmbench_dir, judgebench_dir, capsys):
    out = tmp_path / "run"
    argv = ["--benchmark", "rmbench", "judgebench", "--model", str(tiny_judge), "--data", str(rmbench_dir),
            str(judgebench_dir), "--output", str(out), "--limit", "2", "--template", "pointwise-compact",
            "--max-new-tokens", "3", "--no-progress"]
    main(argv)
    printed = {
        name: json.loads((out / name / "metrics.json").read_text())["metrics"] for name in ("rmbench", "judgebench")
    }
    summary = capsys.readouterr().out
    assert "rmbench:" in summary and "judgments valid" in summary and "report.md" in summary
    for name, n_judgments in (("rmbench", 12), ("judgebench", 4)):
        rows = (out / name / "samples.jsonl").read_text().splitlines()
        assert len(rows) == 2 and "judge_outputs" in json.loads(rows[0])
        run = json.loads((out / name / "metrics.json").read_text())["run"]
        assert run["judge_calls"] == n_judgments and run["generated"] == n_judgments
        assert (out / name / "subsets.png").is_file()
    assert (out / "rmbench" / "rmbench_matrix.png").is_file() and (out / "report.md").is_file()
    from patarm.backends import GenerationCache

    cached = len(GenerationCache(out / "cache.sqlite"))
    main(argv)  # a re-run judges nothing again
    capsys.readouterr()
    assert json.loads((out / "rmbench" / "metrics.json").read_text())["run"]["generated"] == 0
    assert len(GenerationCache(out / "cache.sqlite")) == cached
    main(["rescore", "--benchmark", "rmbench", "--samples", str(out / "rmbench" / "samples.jsonl")])
    assert json.loads(capsys.readouterr().out) == printed["rmbench"]
    main(["compare", str(out), str(out), "--plot", str(tmp_path / "compare.png")])
    table = capsys.readouterr().out
    assert (tmp_path / "compare.png").is_file()
    assert "## rmbench" in table and "| metric | run | run' |" in table and "overall.avg" in table


def test_hub_loading_is_lazy_and_fails_clearly_offline(monkeypatch):
    import datasets

    from patarm.eval import judgebench

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach the hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(RuntimeError, match="ScalerLab/JudgeBench.*--data PATH"):
        judgebench.load(None)
    row = {"pair_id": "x", "question": "q", "response_A": "a", "response_B": "b", "label": "A>B",
           "source": "livecodebench", "response_model": "gpt-4o"}
    monkeypatch.setattr(datasets, "load_dataset", lambda repo, split=None: {"gpt": [row], "claude": [row]})
    items = judgebench.load(None)
    assert len(items) == 2 and items[0]["group"] == "coding" and items[0]["prompt"][0]["content"] == "q"
