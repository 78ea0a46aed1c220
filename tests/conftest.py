"""Shared fixtures: the project root and the real benchmark data folder (skip when absent)."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# ../shared/benchmarks beside the checkout; PATARM_BENCHMARKS points elsewhere (a git worktree, a CI cache)
SHARED = Path(os.environ.get("PATARM_BENCHMARKS") or ROOT.parent / "shared" / "benchmarks")

# DeepSpeed's CPU communication op is JIT-built once; keep it in a cache the tests control.
os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(ROOT / ".cache" / "torch_extensions"))
# ... by one ninja: the environment's own first on PATH, as `accelerate launch` subprocesses see it. Two ninja
# versions (a system 1.11 and the venv's 1.13) read each other's build log as stale and rebuilt the op (~65 s).
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
os.environ.setdefault("WANDB_MODE", "offline")


@pytest.fixture(scope="session")
def bench() -> Path:
    """../shared/benchmarks beside the project root; skip when a fresh clone lacks it."""
    if not SHARED.is_dir():
        pytest.skip(f"real benchmark data not found at {SHARED} (only present in the development checkout)")
    return SHARED
