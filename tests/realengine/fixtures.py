"""Session-wide fixtures of the real engine: two vLLM engines on CPU and a real router.

Imported by ``tests/conftest.py`` so that any test module can ask for them; each is started
once per pytest session, on free loopback ports, and stopped at its end (and, through
``PR_SET_PDEATHSIG``, if pytest is killed). A test that uses them is marked ``real_engine``.

- ``vllm_python``: the engine virtualenv's python. Outside CI a missing install skips with the
  command that makes it; in CI (``CI`` set) it is installed here, and a failed install fails.
- ``tiny_model``: the tiny Llama's folder (made once per recipe).
- ``vllm_pair``: :class:`EnginePair`: ``r1`` and ``r2``, both healthy, same flags
  (``--max-num-seqs 8``). Tests must not assume more than "two healthy vLLM engines serving
  ``tiny-llama``"; a test that changes an engine restores it.
- ``real_router``: ``sglang-router`` in front of both, its workers healthy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tierctl.errors import RuntimeFailure
from tierctl.realengine import env as realenv

# Generous: a loaded 2-core machine took up to ~170 s for one engine to answer /health.
START_TIMEOUT_S = float(os.environ.get("TIERCTL_REAL_START_TIMEOUT_S", "420"))
PAIR_FLAGS = ("--max-num-seqs", "8")


@dataclass
class EnginePair:
    """Two running engines and where their logs are."""

    r1: object  # tierctl.realengine.engine.VllmEngine (kept loose: imported lazily)
    r2: object
    model: str
    logs: Path

    @property
    def urls(self) -> tuple[str, str]:
        """Base URLs of r1 and r2."""
        return (self.r1.url, self.r2.url)  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The engine's python, or a skip (outside CI) naming the command that installs it."""
    found = realenv.vllm_python()
    if found is not None:
        return found
    if not os.environ.get("CI"):
        pytest.skip(
            f"the vLLM CPU engine is not installed at {realenv.venv_dir()}: "
            "run scripts/ensure-vllm (make test does)"
        )
    try:
        return realenv.ensure_vllm()
    except RuntimeFailure as exc:  # in CI an impossible install is a failure, not a skip
        pytest.fail(f"could not install the real engine: {exc.format()}")


@pytest.fixture(scope="session")
def tiny_model(vllm_python: Path) -> Path:
    """The tiny Llama's folder."""
    return realenv.tiny_model(vllm_python)


@pytest.fixture(scope="session")
def vllm_pair(
    vllm_python: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EnginePair]:
    """Two vLLM engines, started together (their start-ups overlap), stopped at session end."""
    from tierctl.realengine.engine import SERVED_NAME, VllmEngine

    logs = tmp_path_factory.mktemp("vllm-pair")
    engines = [
        VllmEngine(
            logs / f"{name}.log", flags=PAIR_FLAGS, python=vllm_python, model=tiny_model, name=name
        )
        for name in ("r1", "r2")
    ]
    try:
        for e in engines:
            e.start()
        for e in engines:
            e.wait_ready(START_TIMEOUT_S)
        yield EnginePair(engines[0], engines[1], SERVED_NAME, logs)
    finally:
        for e in engines:
            e.stop()


@pytest.fixture(scope="session")
def real_router(
    vllm_pair: EnginePair, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """``sglang-router`` in front of the pair (round robin, probes every 2 s, 3 s time-out)."""
    from tierctl.proxies.sglang_router import RouterSettings, SglangRouter

    logs = tmp_path_factory.mktemp("router")
    router = SglangRouter(RouterSettings(worker_urls=vllm_pair.urls), logs / "router.log")
    try:
        router.start(ready_timeout_s=120)
        yield router
    finally:
        router.stop()
