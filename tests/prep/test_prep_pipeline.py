"""Config-driven pipelines: every shipped config is valid, cpu-tiny runs end to end and resumes, and a
pipeline whose HTTP teacher fails part-way resumes without repeating a finished call."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from patarm.config import read_config
from patarm.prep.io import read_jsonl, read_pairs
from patarm.prep.pipeline import plan, run_pipeline
from patarm.prep_cli import main as prep_main
from patarm.teachers import TeacherError
from patarm.teachers.stub_server import serve

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "configs" / "prep").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_is_valid_and_says_how_to_run_it(path):
    first = path.read_text().splitlines()[0]
    assert first == f"# patarm prep run --config configs/prep/{path.name}"
    steps = plan(read_config(path), str(path))
    assert steps and all(s["out"].parent == Path(read_config(path)["output_dir"]) for s in steps)


def test_paper_config_matches_appendix_c():
    steps = {s["name"]: s for s in plan(read_config(REPO / "configs/prep/paper.yaml"))}
    assert steps["skywork"]["cfg"].drop_sources == ["magpie_ultra"]
    assert (steps["rl"]["cfg"].n, steps["rl"]["cfg"].low, steps["rl"]["cfg"].high) == (8, 0.125, 0.75)
    assert steps["pointwise"]["cfg"].min_margin == 2.0
    assert steps["pairwise"]["cfg"].intersect_with == str(steps["pointwise"]["out"])
    assert "72B" in steps["pointwise"]["record"]["teacher"]["model"]
    assert "32B" in steps["rl"]["record"]["teacher"]["model"]
    assert "32B" in steps["skywork_classified"]["record"]["teacher"]["model"]


def test_bad_configs_are_rejected_with_the_step_named():
    with pytest.raises(ValueError, match=r"steps\[0\].*unknown keys \['min_margn'\]"):
        plan({"steps": [{"name": "a", "step": "pointwise", "input": "x", "min_margn": 2}]})
    with pytest.raises(ValueError, match="does not name an earlier step"):
        plan({"steps": [{"name": "a", "step": "dedup", "input": "@later"}]})
    with pytest.raises(ValueError, match="teacher 'judge'"):
        plan({"steps": [{"name": "a", "step": "rl", "input": "x", "teacher": "judge"}]})


def test_cpu_tiny_runs_end_to_end_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)  # the config names a repository file by its relative path
    out = tmp_path / "run"
    prep_main(["run", "--config", "configs/prep/cpu-tiny.yaml", "--output-dir", str(out)])
    manifests = {p.parent.name: yaml.safe_load(p.read_text()) for p in out.glob("*/manifest.json")}
    assert set(manifests) >= {"synthetic", "mixed", "deduped", "classified", "rl", "sft_pool", "pointwise", "pairwise"}
    for name, m in manifests.items():
        assert m["rows_in"] == m["rows_out"] + sum(m["dropped"].values()), name
    rl_ids = {p.id for p in read_pairs(out / "rl")}
    assert rl_ids and not rl_ids & {p.id for p in read_pairs(out / "sft_pool")}
    assert {p.id for p in read_pairs(out / "pairwise")} <= {p.id for p in read_pairs(out / "pointwise")}
    assert len(list(read_jsonl(out / "rl" / "grpo.jsonl"))) == 2 * len(rl_ids)
    assert manifests["pointwise"]["rows_out"] > 0 and manifests["pairwise"]["rows_out"] > 0
    before = {p: p.stat().st_mtime_ns for p in out.glob("*/*.jsonl")}
    capsys.readouterr()
    prep_main(["run", "--config", "configs/prep/cpu-tiny.yaml", "--output-dir", str(out)])
    assert capsys.readouterr().out.count("skipped") == len(manifests)
    assert before == {p: p.stat().st_mtime_ns for p in out.glob("*/*.jsonl")}


def test_http_teacher_pipeline_resumes_without_repeating_calls(tmp_path):
    broken = {"on": True}

    def plan_faults(key, attempt):  # a third of the calls fail until the "server" is fixed
        return "500" if broken["on"] and int(key[:8], 16) % 3 == 0 else None

    with serve(fault=plan_faults) as server:
        config = {"output_dir": str(tmp_path / "run"),
                  "teachers": {"judge": {"kind": "openai", "model": "stub", "base_url": server.base_url,
                                         "concurrency": 4, "max_retries": 1, "backoff_s": 0.01, "progress": False}},
                  "steps": [{"name": "raw", "step": "synthetic", "n": 12},
                            {"name": "pw", "step": "pointwise", "input": "@raw", "teacher": "judge", "min_margin": 0}]}
        path = tmp_path / "pipe.yaml"
        path.write_text(yaml.safe_dump(config))
        with pytest.raises(TeacherError, match="rerun to resume"):
            run_pipeline(path, log=lambda _: None)
        assert not (tmp_path / "run" / "pw" / "manifest.json").exists()
        finished = {k for k, v in server.successes.items() if v}
        broken["on"] = False
        manifests = run_pipeline(path, log=lambda _: None)
        assert all(server.successes[k] == 1 for k in server.successes) and len(server.successes) == 24
        assert all(server.attempts[k] == 1 for k in finished)
        requests = sum(server.attempts.values())
        run_pipeline(path, force=True, log=lambda _: None)  # everything from the cache
        assert sum(server.attempts.values()) == requests
    pw = manifests[-1]
    assert pw["rows_in"] == 12 and pw["rows_in"] == pw["rows_out"] + sum(pw["dropped"].values())
    assert pw["teacher_stats"]["ok"] > 0 and pw["rows_out"] > 0 and "teacher_format_invalid" not in pw["dropped"]
