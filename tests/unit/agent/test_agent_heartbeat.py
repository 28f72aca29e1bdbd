"""The agent's heartbeat (#37): a silent compose run keeps its stream alive, and a stream that
goes silent (a host cut off) is given up on after the idle time-out, not the call deadline.

The real agent app runs here with a compose command that only sleeps (no daemon needed); the
stand-in agent's ``stall`` fault is a host that stopped answering mid-call."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from tierctl.agent.oplog import OperationLog
from tierctl.agent.projects import ProjectStore
from tierctl.agent.server import AgentConfig, RunningAgent, make_app
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.base import HostUnreachable
from tierctl.rollout.drivers.compose_manager import ComposeManagerDriver, Target
from tierctl.rollout.source import SourceRef
from tierctl.rollout.standin_agent import StandinAgent

COMPOSE = "services:\n  r2:\n    image: busybox\n"
DEP = Deployment("new", SourceRef(spec="n", path="n", sha256="0" * 64), COMPOSE, {"r2": {}})
TARGETS = {"new": Target("v1", "compose.yaml"), "old": Target("v1", "compose.yaml")}


def _repo(root: Path) -> Path:
    repo = root / "deploy"
    repo.mkdir()
    (repo / "compose.yaml").write_text(COMPOSE)
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "v1"], ["tag", "v1"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return repo


@pytest.fixture
def silent_agent(tmp_path: Path) -> Iterator[str]:
    """The real agent app; its compose sleeps 3 s and prints nothing; heartbeats every 0.3 s."""
    config = AgentConfig(
        projects_dir=_repo(tmp_path),
        state_dir=tmp_path / "state",
        token="tok",
        compose=("sh", "-c", "sleep 3", "compose"),
        heartbeat_s=0.3,
    )
    state = RunningAgent(
        config=config,
        store=ProjectStore(config.projects_dir, config.state_dir),
        log=OperationLog(config.state_dir / "operations.jsonl"),
    )
    loop = asyncio.new_event_loop()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    runner = web.AppRunner(make_app(state))

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.SockSite(runner, sock).start())
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    yield url
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    state.log.close()


def test_the_agent_says_it_beats_and_its_stream_beats_while_compose_is_silent(
    silent_agent: str,
) -> None:
    assert httpx.get(f"{silent_agent}/health").json() == {"status": "ok", "heartbeat_s": 0.3}
    body = {"tag": "v1", "file": "compose.yaml", "services": ["r2"], "env": {}, "volumes": False}
    with httpx.stream(
        "POST", f"{silent_agent}/compose/down", json=body,
        headers={"Authorization": "Bearer tok"}, timeout=10,
    ) as resp:  # fmt: skip
        events = [httpx.Response(200, content=line).json() for line in resp.iter_lines() if line]
    beats = [e for e in events if e["type"] == "heartbeat"]
    assert len(beats) >= 5, events  # 3 s of silence at 0.3 s
    assert events[-1] == {"type": "exit", "code": 0}


def test_a_silent_compose_outlives_the_idle_timeout_thanks_to_the_heartbeat(
    silent_agent: str,
) -> None:
    """Without the heartbeat a 1 s idle time-out would cut this 3 s silent run (and retry it
    into a busy agent); the agent says it beats, so the driver waits on the beats."""
    driver = ComposeManagerDriver(silent_agent, "tok", TARGETS, idle_timeout_s=1.0, attempts=1)
    try:
        started = time.monotonic()
        driver.down(DEP, ["r2"])
        assert time.monotonic() - started >= 2.5
    finally:
        driver.close()


def test_a_stream_gone_silent_is_given_up_on_after_the_idle_timeout() -> None:
    with StandinAgent({("v1", "compose.yaml"): COMPOSE}, token="tok") as agent:
        agent.state.heartbeat_s = 0.3
        agent.state.faults = ["stall", "stall"]
        driver = ComposeManagerDriver(
            agent.url, "tok", TARGETS, timeout_s=600, idle_timeout_s=1.0, attempts=2,
            backoff_s=0.1,
        )  # fmt: skip
        started = time.monotonic()
        with pytest.raises(HostUnreachable, match="went silent") as info:
            driver.down(DEP, ["r2"])
        took = time.monotonic() - started
        driver.close()
    assert took < 10, took  # two tries of 1 s each (not the 600 s call deadline)
    assert "never answered" in info.value.message


def test_an_agent_that_does_not_beat_gets_the_whole_call_deadline() -> None:
    """A compose-manager whose /health names no heartbeat: its silence is not a cut host."""
    with StandinAgent({("v1", "compose.yaml"): COMPOSE}, token="tok") as agent:
        agent.state.faults = ["stall"]
        driver = ComposeManagerDriver(
            agent.url, "tok", TARGETS, timeout_s=3.0, idle_timeout_s=0.5, attempts=1
        )
        started = time.monotonic()
        with pytest.raises(HostUnreachable, match="3 s call deadline"):
            driver.down(DEP, ["r2"])
        assert time.monotonic() - started >= 2.5
        driver.close()
