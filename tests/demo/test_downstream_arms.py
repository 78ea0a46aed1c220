"""The downstream loop's policy GRPO arms: a stopped arm resumes from its checkpoint, and the served judge runs
in the recipe's dtype."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import run_cli
from patarm.demo.downstream.config import CONFIG_DIR
from patarm.demo.downstream.rewards import Monitored


@pytest.mark.slow
def test_a_policy_grpo_run_stopped_mid_training_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    """A GRPO arm stopped after its checkpoint at step 2 of 3 goes on from it: metrics and held-out rows list each
    step once, the policy is marked trained and its checkpoints are removed; a run stopped before any checkpoint
    starts over."""
    from patarm.demo.downstream import loop
    from patarm.train.common import complete_checkpoints

    grpo = yaml.safe_load((CONFIG_DIR / "downstream-grpo-small.yaml").read_text())
    (tmp_path / "grpo.yaml").write_text(yaml.safe_dump(grpo | {"save_strategy": "steps", "save_steps": 2}))
    (tmp_path / "rule.yaml").write_text("rewards: [rule]\nscore_with: []\n")  # no judge needed
    argv = ["downstream", "--config", CONFIG_DIR / "downstream-small.yaml", "--config", tmp_path / "rule.yaml",
            "--run_dir", tmp_path / "ds", "--grpo_config", tmp_path / "grpo.yaml", "--grpo_steps", 3]
    calls = {"n": 0, "stop_at": 3}

    class Stops(Monitored):  # the reward of step `stop_at` raises: the process "dies" there
        def __call__(self, *a, **k):
            calls["n"] += 1
            if calls["n"] == calls["stop_at"]:
                raise KeyboardInterrupt("stopped")
            return super().__call__(*a, **k)

    monkeypatch.setattr(loop, "Monitored", Stops)
    with pytest.raises(SystemExit) as stopped:
        run_cli(*argv)
    assert stopped.value.code == 130  # `patarm`: interrupted
    folder = tmp_path / "ds" / "grpo-rule"
    assert [p.name for p in complete_checkpoints(folder)] == ["checkpoint-2"]
    assert [r["step"] for r in map(json.loads, (folder / "metrics.jsonl").read_text().splitlines())] == [1, 2]
    assert [r["step"] for r in map(json.loads, (folder / "heldout.jsonl").read_text().splitlines())] == [1, 2]
    calls.update(n=0, stop_at=-1)
    run_cli(*argv)
    assert calls["n"] == 1  # only step 3 was trained again
    steps = [r["step"] for r in map(json.loads, (folder / "metrics.jsonl").read_text().splitlines())]
    assert steps[:3] == [1, 2, 3] and set(steps) == {1, 2, 3}  # TRL's end-of-training summary logs at step 3 too
    assert [r["step"] for r in map(json.loads, (folder / "heldout.jsonl").read_text().splitlines())] == [1, 2]
    assert (folder / "patarm_config.json").is_file() and not list(folder.glob("checkpoint-*"))
    assert (folder / "result.json").is_file()
    # stopped at step 1, before its first checkpoint: the folder starts over
    (folder / "result.json").unlink()
    (folder / "patarm_config.json").unlink()
    calls.update(n=0, stop_at=1)
    with pytest.raises(SystemExit):
        run_cli(*argv)
    assert not folder.exists() or not (folder / "metrics.jsonl").is_file()


def test_the_served_judge_runs_in_the_recipes_dtype(tmp_path, monkeypatch):
    """A recipe that judges in one dtype (the IFEval recipe's `dtype`, bf16 on a bf16 CPU) serves its judge in it,
    so the policy's reward is the judge whose dev-pair accuracy was measured; an explicit --dtype in
    judge_serve_args wins; a run without a dtype passes none."""
    import contextlib
    from types import SimpleNamespace

    from patarm.demo.downstream import loop

    seen = []

    @contextlib.contextmanager
    def served(model, log, extra):
        seen.append(list(extra))
        yield "http://127.0.0.1:9"

    monkeypatch.setattr(loop, "served_judge", served)
    base = {"rewards": ["judge"], "score_with": [], "synthetic": False, "judge_url": None, "judge_invalid": None,
            "judge_path": lambda: "judge"}
    for extra, dtype in ((["--max_batch", "32"], "bfloat16"), (["--dtype", "float32"], "bfloat16"), ([], None)):
        args = SimpleNamespace(**base, judge_serve_args=extra, **({"dtype": dtype} if dtype else {}))
        with contextlib.ExitStack() as stack:
            loop._scorers(args, tmp_path, None, stack)["judge"]._build()
    assert seen == [["--max_batch", "32", "--dtype", "bfloat16"], ["--dtype", "float32"], []]
