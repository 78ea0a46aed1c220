"""Shared fixtures for the verifier tests: the real benchmark folder (skipped when absent)."""

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / ".." / "shared" / "benchmarks"


@pytest.fixture(scope="session")
def bench() -> Path:
    """../shared/benchmarks relative to the project root; skip when a fresh clone lacks it."""
    if not BENCH.is_dir():
        pytest.skip(f"real benchmark data not found at {BENCH.resolve()} (only on the development machine)")
    return BENCH.resolve()
