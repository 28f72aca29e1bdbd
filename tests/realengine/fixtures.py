"""Session-wide fixtures of the real engine: the tiny-vllm tier, for real, once per session.

Registered by ``tests/realengine/conftest.py`` for the tests in that folder. The tier is
``examples/tiny-vllm`` on free loopback ports: two vLLM engines on CPU under the local driver,
``sglang-router`` in front (as the rendered proxy command says) and, when Debian's prometheus
is installed, Prometheus scraping both. It is started once per pytest session and stopped at
its end. A test that uses them is marked ``real_engine``.

- ``vllm_python``: the engine virtualenv's python. Outside CI a missing install skips with the
  command that makes it; in CI (``CI`` set) it is installed here, and a failed install fails.
- ``tiny_model``: the tiny Llama's folder (made once per recipe).
- ``real_tier``: the running :class:`tierctl.realtier.tier.RealTier`.
- ``vllm_pair``: :class:`EnginePair`: r1 and r2 of that tier, both healthy, serving
  ``tiny-llama``. Their flags may differ (a rollout test moves r2 to the canary's
  ``--max-num-seqs``); a test must not assume more than "two healthy vLLM engines".
- ``real_router``: the tier's :class:`tierctl.proxies.sglang_router.SglangRouter`.
- ``sglang_python``: the real SGLang's virtualenv python (``scripts/ensure-sglang``), skipped
  or installed as ``vllm_python`` is.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tierctl.errors import RuntimeFailure
from tierctl.realengine import env as realenv

if TYPE_CHECKING:
    from tierctl.proxies.sglang_router import SglangRouter
    from tierctl.realtier.tier import RealTier

# Generous: a loaded 2-core machine took up to ~170 s for one engine to answer /health.
START_TIMEOUT_S = float(os.environ.get("TIERCTL_REAL_START_TIMEOUT_S", "600"))


@contextlib.contextmanager
def extra_engine(
    python: Path, model: Path, log: Path, flags: tuple[str, ...], name: str
) -> Iterator[object]:
    """One more engine beside the tier's pair (its own flags), started, ready and always
    stopped."""
    from tierctl.realengine.engine import VllmEngine

    engine = VllmEngine(log, flags=flags, python=python, model=model, name=name)
    try:
        engine.start()
        engine.wait_ready(START_TIMEOUT_S)
        yield engine
    finally:
        engine.stop()


@dataclass(frozen=True)
class Engine:
    """One replica of the real tier."""

    name: str
    url: str
    tier: RealTier

    @property
    def pid(self) -> int:
        """The running engine's pid (changes when it is recreated)."""
        return self.tier.pid(self.name)

    @property
    def log(self) -> Path:
        """The running engine's log (one per start: a recreated engine has a new one)."""
        return Path(self.tier.driver.state()[self.tier.service(self.name)]["log"])


@dataclass(frozen=True)
class EnginePair:
    """The tier's two engines."""

    r1: Engine
    r2: Engine
    model: str
    logs: Path  # the folder of every start's log, SERVICE.N.log

    @property
    def urls(self) -> tuple[str, str]:
        """Base URLs of r1 and r2."""
        return (self.r1.url, self.r2.url)

    def log(self, name: str) -> Path:
        """The running log of ``r1`` or ``r2``."""
        return (self.r1 if name == "r1" else self.r2).log


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
def sglang_python() -> Path:
    """The real SGLang's python, or a skip (outside CI) naming the command that installs it."""
    from tierctl.realengine import sglang as realsglang

    found = realsglang.sglang_python()
    if found is not None:
        return found
    if not os.environ.get("CI"):
        pytest.skip(
            f"SGLang {realsglang.SGLANG_VERSION} is not installed at {realsglang.venv_dir()}: "
            "run scripts/ensure-sglang (make test does)"
        )
    try:
        return realsglang.ensure_sglang()
    except RuntimeFailure as exc:  # in CI an impossible install is a failure, not a skip
        pytest.fail(f"could not install the real SGLang: {exc.format()}")


@pytest.fixture(scope="session")
def tiny_model(vllm_python: Path) -> Path:
    """The tiny Llama's folder."""
    return realenv.tiny_model(vllm_python)


@pytest.fixture(scope="session")
def real_tier(
    vllm_python: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealTier]:
    """The tiny-vllm tier running for real; stopped (every process group) at session end."""
    from tierctl.realtier.tier import RealTier

    tier = RealTier(
        tmp_path_factory.mktemp("real-tier"), start_timeout_s=START_TIMEOUT_S, python=vllm_python
    )
    try:
        tier.start()
        yield tier
    finally:
        tier.stop()


@pytest.fixture(scope="session")
def vllm_pair(real_tier: RealTier) -> EnginePair:
    """The tier's r1 and r2."""
    from tierctl.realengine.engine import SERVED_NAME

    return EnginePair(
        Engine("r1", real_tier.url("r1"), real_tier),
        Engine("r2", real_tier.url("r2"), real_tier),
        SERVED_NAME,
        real_tier.state_dir / "logs",
    )


@pytest.fixture(scope="session")
def real_router(real_tier: RealTier) -> SglangRouter:
    """The router in front of the pair (round robin, probes every 2 s, 3 s time-out)."""
    assert real_tier.router is not None
    return real_tier.router
