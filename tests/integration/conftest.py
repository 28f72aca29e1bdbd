"""Fixtures of the integration tests that need more than loopback servers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.docker_engine import DockerEngine, require_docker, running_engine


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[DockerEngine]:
    """One dockerd of the tests' own (with the tiny image) for the session, stopped by its
    pid at the end; each test removes its own containers (and checks that it did)."""
    require_docker()
    with running_engine("dockerd") as engine:
        yield engine
