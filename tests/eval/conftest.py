"""Shared fixtures for the eval tests: the real benchmark files in ../shared/benchmarks, when present."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "benchmarks"


def shared_path(name: str) -> Path:
    """`../shared/benchmarks/<name>`, or skip the test with a reason (a fresh clone does not have it)."""
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"real benchmark data not found at {path} (only present beside the project checkout)")
    return path


@pytest.fixture(scope="session")
def rmbench_dir() -> Path:
    return shared_path("rm-bench")


@pytest.fixture(scope="session")
def judgebench_dir() -> Path:
    return shared_path("judgebench")
