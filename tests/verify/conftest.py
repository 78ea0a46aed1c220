"""Fixtures of the sandbox tests."""

import pytest

from patarm.verify import isolation


@pytest.fixture
def weak_ok(monkeypatch):
    """Let the weaker levels run in this test (their refusal is tested on its own)."""
    monkeypatch.setenv(isolation.ENV_ALLOW_WEAK, "1")
