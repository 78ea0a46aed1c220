"""Recipes end to end (slow tier): the CPU recipes hand off through their own paths, and the installed wheel
runs the quickstart from a folder far from the checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "benchmarks"


@pytest.mark.slow
def test_cpu_recipes_chain_through_their_own_paths(tmp_path, monkeypatch, capsys):
    """prep → sft → grpo → export → eval with each stage's shipped config and no path flag: every stage finds
    the previous one's output in the run folder by name."""
    monkeypatch.chdir(tmp_path)  # outputs land here; the configs' own inputs are read next to the configs
    configs = ROOT / "configs"
    run_cli("prep", "run", "--config", configs / "prep" / "cpu-tiny.yaml")
    run_cli("sft", "--config", configs / "sft" / "tiny.yaml")
    run_cli("grpo", "--config", configs / "grpo" / "tiny.yaml")
    run_cli("export", "--config", configs / "export" / "tiny.yaml")
    run = tmp_path / "runs" / "cpu-tiny"
    sft_config = json.loads((run / "sft" / "patarm_config.json").read_text())
    assert sft_config["data"]["train_files"] == ["runs/cpu-tiny/prep/pointwise/sft.jsonl",
                                                 "runs/cpu-tiny/prep/pairwise/sft.jsonl"]
    grpo_config = json.loads((run / "grpo" / "patarm_config.json").read_text())
    assert grpo_config["model_name_or_path"] == "runs/cpu-tiny/sft"
    assert grpo_config["data"]["train_file"] == "runs/cpu-tiny/prep/rl/pairs.jsonl"
    exported = json.loads((run / "export" / "patarm_config.json").read_text())
    assert exported["stage"] == "grpo" and (run / "export" / "model.safetensors").is_file()
    if not SHARED.is_dir():
        pytest.skip(f"the eval step reads the real benchmark data at {SHARED}, absent here (the rest of the chain ran)")
    capsys.readouterr()
    run_cli("eval", "--config", configs / "eval" / "tiny.yaml")
    metrics = json.loads((run / "eval" / "metrics.json").read_text())
    assert set(metrics) == {"rmbench", "judgebench"}
    assert metrics["rmbench"]["run"]["model"] == "runs/cpu-tiny/export"
    assert "judgments valid" in capsys.readouterr().out


@pytest.mark.slow
def test_the_wheel_runs_the_quickstart_outside_the_checkout(tmp_path):
    """Build the wheel, install it (not editable) into a fresh venv whose only other packages are the
    dependencies, and run the small quickstart from a folder outside the checkout: every file it needs
    (demo configs, templates, rubrics, assets) must be inside the wheel."""
    dist, source = tmp_path / "dist", tmp_path / "source"
    # built from a copy: setuptools writes its build/ folder into the tree it builds, which was the checkout
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "runs", "build", "dist", ".cache", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(source)], check=True, capture_output=True, timeout=600)
    wheel = next(dist.glob("patarm-*.whl"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The dependencies come from the development venv's site-packages, added as a plain path: .pth files there
    # (the editable install of the checkout) are not processed, so `patarm` can only come from the wheel.
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, str(wheel)],
                   check=True, capture_output=True, timeout=600)
    away = tmp_path / "elsewhere" / "deeper"
    away.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    where = subprocess.run([str(python), "-c", "import patarm; print(patarm.__file__)"], cwd=away, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(site) and not where.startswith(str(ROOT)), where
    proc = subprocess.run([str(python), "-m", "patarm", "quickstart", "--small", "--run_dir", "qs"], cwd=away, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    report = json.loads((away / "qs" / "report.json").read_text())
    assert set(report["stages"]) == {"base", "sft", "grpo"} and (away / "qs" / "export" / "model.safetensors").is_file()
