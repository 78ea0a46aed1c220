"""Shared helpers: a fake-scored server on a free loopback port, in a thread that is joined after the test."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from serve_fakes import FakeScorer

from patarm.serve.app import ServeConfig, create_app
from patarm.serve.server import ServerThread


@contextlib.contextmanager
def running(scorer: Any, server: dict[str, Any] | None = None, **config: Any) -> Iterator[str]:
    """Serve `scorer` with a ServeConfig built from `config` (`server`: ServerThread options); yields the URL."""
    config.setdefault("model_name", "fake")
    with ServerThread(create_app(scorer, ServeConfig(**config)), **(server or {})) as url:
        yield url


@pytest.fixture
def fake() -> FakeScorer:
    return FakeScorer()


@pytest.fixture
def server(fake: FakeScorer) -> Iterator[str]:
    with running(fake) as url:
        yield url


@pytest.fixture
def client(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=30) as c:
        yield c
