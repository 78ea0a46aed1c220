"""Config-driven pipelines: every shipped config is valid, cpu-tiny runs end to end and resumes, and a
pipeline whose HTTP teacher fails part-way resumes without repeating a finished call."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from helpers import DEMO_PAIRS, run_cli
from patarm.backends import BackendError
from patarm.backends.stub_server import serve
from patarm.config import ConfigError, parse_stage
from patarm.prep.io import read_pairs
from patarm.prep.pipeline import PipelineArguments, plan, run_pipeline

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "configs" / "prep").glob("*.yaml"))


def pipeline(*argv) -> PipelineArguments:
    (config,) = parse_stage((PipelineArguments,), [str(a) for a in argv], prog="patarm prep run")
    return config


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_is_valid_and_says_how_to_run_it(path):
    first = path.read_text().splitlines()[0]
    assert first == f"# patarm prep run --config configs/prep/{path.name}"
    config = pipeline("--config", path)
    steps = plan(config)
    assert steps and all(s["out"].parent == Path(config.run_dir) / "prep" for s in steps)


def test_paper_config_matches_appendix_c():
    steps = {s["name"]: s for s in plan(pipeline("--config", REPO / "configs/prep/paper.yaml"))}
    assert steps["skywork"]["cfg"].drop_sources == ["magpie_ultra"]
    assert (steps["rl"]["cfg"].n, steps["rl"]["cfg"].low, steps["rl"]["cfg"].high) == (8, 0.125, 0.75)
    assert steps["pointwise"]["cfg"].min_margin == 2.0
    assert steps["pairwise"]["cfg"].intersect_with == str(steps["pointwise"]["out"])
    assert "72B" in steps["pointwise"]["record"]["teacher"]["model"]
    assert "32B" in steps["rl"]["record"]["teacher"]["model"]
    assert "32B" in steps["skywork_classified"]["record"]["teacher"]["model"]


def _steps(*steps) -> PipelineArguments:
    return PipelineArguments(run_dir="r", steps=list(steps))


def test_bad_configs_are_rejected_with_the_step_named(tmp_path):
    with pytest.raises(ValueError, match=r"steps\[0\].*unknown key 'min_margn' \(did you mean 'min_margin'\?\)"):
        plan(_steps({"name": "a", "step": "pointwise", "input": "x", "min_margn": 2}))
    with pytest.raises(ValueError, match="does not name an earlier step"):
        plan(_steps({"name": "a", "step": "dedup", "input": "@later"}))
    with pytest.raises(ValueError, match="teacher 'judge'"):
        plan(_steps({"name": "a", "step": "rl", "input": "x", "teacher": "judge"}))
    with pytest.raises(ValueError, match="no steps"):
        plan(_steps())
    bad = tmp_path / "bad.yaml"
    bad.write_text("run_dir: x\nstep: []\n")
    with pytest.raises(ConfigError, match=r"unknown key 'step' \(did you mean 'steps'\?\)"):
        pipeline("--config", bad)


def test_cpu_tiny_runs_end_to_end_from_anywhere_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # not the repository: the config's own paths are relative to the config
    run_cli("prep", "run", "--config", REPO / "configs/prep/cpu-tiny.yaml")
    out = tmp_path / "runs" / "cpu-tiny" / "prep"
    manifests = {p.parent.name: yaml.safe_load(p.read_text()) for p in out.glob("*/manifest.json")}
    assert set(manifests) >= {"demo", "deduped", "classified", "rl", "sft_pool", "pointwise", "pairwise"}
    for name, m in manifests.items():
        assert m["rows_in"] == m["rows_out"] + sum(m["dropped"].values()), name
    assert manifests["demo"]["inputs"][0]["path"] == str(DEMO_PAIRS)
    rl_ids = {p.id for p in read_pairs(out / "rl")}
    assert rl_ids and not rl_ids & {p.id for p in read_pairs(out / "sft_pool")}
    assert {p.id for p in read_pairs(out / "pairwise")} <= {p.id for p in read_pairs(out / "pointwise")}
    assert manifests["pointwise"]["rows_out"] > 0 and manifests["pairwise"]["rows_out"] > 0
    before = {p: p.stat().st_mtime_ns for p in out.glob("*/*.jsonl")}
    capsys.readouterr()
    run_cli("prep", "run", "--config", REPO / "configs/prep/cpu-tiny.yaml")
    assert capsys.readouterr().err.count("skipped") == len(manifests)
    assert before == {p: p.stat().st_mtime_ns for p in out.glob("*/*.jsonl")}


def test_http_teacher_pipeline_resumes_without_repeating_calls(tmp_path):
    broken = {"on": True}

    def plan_faults(key, attempt):  # a third of the calls fail until the "server" is fixed
        return "500" if broken["on"] and int(key[:8], 16) % 3 == 0 else None

    with serve(fault=plan_faults) as server:
        config = {"run_dir": str(tmp_path / "run"),
                  "teachers": {"judge": {"kind": "openai", "model": "stub", "base_url": server.base_url,
                                         "concurrency": 4, "max_retries": 1, "backoff_s": 0.01}},
                  "steps": [{"name": "raw", "step": "normalize", "input": str(DEMO_PAIRS), "limit": 12},
                            {"name": "pw", "step": "pointwise", "input": "@raw", "teacher": "judge", "min_margin": 0}]}
        path = tmp_path / "pipe.yaml"
        path.write_text(yaml.safe_dump(config))
        with pytest.raises(BackendError, match="rerun to resume"):
            run_pipeline(pipeline("--config", path))
        assert not (tmp_path / "run" / "prep" / "pw" / "manifest.json").exists()
        finished = {k for k, v in server.successes.items() if v}
        broken["on"] = False
        manifests = run_pipeline(pipeline("--config", path))
        assert all(server.successes[k] == 1 for k in server.successes) and len(server.successes) == 24
        assert all(server.attempts[k] == 1 for k in finished)
        requests = sum(server.attempts.values())
        run_pipeline(pipeline("--config", path, "--force"))  # everything from the cache
        assert sum(server.attempts.values()) == requests
    pw = manifests[-1]
    assert pw["rows_in"] == 12 and pw["rows_in"] == pw["rows_out"] + sum(pw["dropped"].values())
    stats = pw["teacher_stats"]
    assert stats["used"] == 24 and stats["cached"] == len(finished) and stats["generated"] == 24 - len(finished)
    assert pw["rows_out"] > 0 and "teacher_format_invalid" not in pw["dropped"]
