"""The docker driver on a real dockerd: the example tier's rollout through ``docker compose``
reached by ``DOCKER_HOST`` and by a Docker context, with the executor's gates and rollback.

The files are the example tier's OLD and NEW, their images swapped for the tests' tiny one
(:func:`tests.integration.test_rollout_compose_manager.dockerise`), so the plan is the
example's: r2, r1, then the collector.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.docker_engine import DockerEngine
from tests.integration.test_rollout_compose_manager import R1, R2, REAL_ENV, _render, dockerise
from tierctl.compose.binary import find_compose_binary
from tierctl.errors import GateFailed
from tierctl.rollout.drivers.docker import DockerDriver
from tierctl.rollout.executor import RolloutOptions, load_sides, run_rollout
from tierctl.rollout.gates import GateSettings
from tierctl.rollout.planner import plan_files
from tierctl.runtime.process import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ALL_GATES = frozenset(
    {"health", "server-info", "metrics-variant", "prometheus-variants", "soak", "running-args"}
)
COLLECTOR = "otelcol-contrib"
PROJECT = "glm53-long-context"


def _files(tmp: Path) -> tuple[Path, Path]:
    ports = (free_port(), free_port())
    old, new = _render(tmp, "old", False, ports), _render(tmp, "new", True, ports)
    for path in (old, new):
        path.write_text(dockerise(path.read_text()))
    return old, new


def _definition(engine: DockerEngine, name: str) -> list[str]:
    fmt = '{{.State.Running}} {{index .Config.Labels "tierctl.test/definition"}}'
    return engine.docker("inspect", "-f", fmt, name, check=False).stdout.split()


def _label(path: Path, service: str) -> str:
    from tierctl.rollout.normalise import load_services

    svc = load_services(path.read_text(), str(path)).services[service]
    return str(svc["labels"]["tierctl.test/definition"])


def _compose() -> tuple[str, ...]:
    found = find_compose_binary()
    assert found is not None
    return found.argv


def _clean(engine: DockerEngine) -> None:
    engine.compose("-p", PROJECT, "down", "-t", "0", check=False)
    left = engine.containers()
    engine.remove_all_containers()
    assert left == [], f"containers left: {left}"


def test_the_docker_driver_rolls_the_example_out_on_a_real_engine(
    docker_engine: DockerEngine, tmp_path: Path
) -> None:
    """DOCKER_HOST: OLD up, then the plan's three steps (dry run, forced up, gates skipped):
    r1, r2 and the collector run NEW, everything else still OLD, the journal completes."""
    old, new = _files(tmp_path)
    env = {**os.environ, **REAL_ENV}
    env.pop("DOCKER_HOST", None)
    driver = DockerDriver(
        tmp_path / "work", compose=_compose(), docker_host=docker_engine.host, env=env
    )
    try:
        plan = plan_files(str(old), str(new))
        old_dep, new_dep = load_sides(plan)
        driver.apply(old_dep, sorted(old_dep.services))
        journal = tmp_path / "journal.jsonl"
        options = RolloutOptions(journal, gates=GateSettings(skip=ALL_GATES))
        result = run_rollout(plan, driver, old_dep, new_dep, options)
        assert [o.status for o in result.outcomes] == ["done", "done", "done"]
        for svc in (R1, R2, COLLECTOR):
            assert _definition(docker_engine, svc) == ["true", _label(new, svc)]
        for svc in ("proxy-glm53", "model-proxy-registrar", "dcgm-exporter"):
            assert _definition(docker_engine, svc) == ["true", _label(old, svc)]
        events = [json.loads(x)["event"] for x in journal.read_text().splitlines()]
        assert events[-1] == "completed"
    finally:
        _clean(docker_engine)


def test_the_docker_driver_through_a_context_rolls_a_failed_gate_back(
    docker_engine: DockerEngine, tmp_path: Path
) -> None:
    """A Docker context (``docker context create``) names the engine: r2's health gate fails
    (nothing listens on its port), r2 goes back to OLD, and nothing else was touched."""
    config = tmp_path / "docker-config"
    subprocess.run(
        ["docker", "--config", str(config), "context", "create", "gpu02",
         "--docker", f"host={docker_engine.host}"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    old, new = _files(tmp_path)
    env = {**os.environ, **REAL_ENV, "DOCKER_CONFIG": str(config)}
    env.pop("DOCKER_HOST", None)
    driver = DockerDriver(tmp_path / "work", compose=_compose(), docker_context="gpu02", env=env)
    try:
        plan = plan_files(str(old), str(new))
        old_dep, new_dep = load_sides(plan)
        driver.apply(old_dep, sorted(old_dep.services))
        options = RolloutOptions(
            tmp_path / "journal.jsonl",
            gates=GateSettings(skip=ALL_GATES - {"health"}, health_timeout_s=0.0),
        )
        with pytest.raises(GateFailed, match="rolled back to OLD"):
            run_rollout(plan, driver, old_dep, new_dep, options)
        for svc in (R1, R2, COLLECTOR):
            assert _definition(docker_engine, svc) == ["true", _label(old, svc)]
    finally:
        _clean(docker_engine)
