"""A fleet of three hosts, each its own dockerd and its own ``tierctl agent``: a rollout in two
waves (the canary host, then the other two at once), and a canary whose NEW cannot start,
which halts the fleet with its step rolled back and the other hosts untouched.

The hosts share this machine's loopback (network namespaces, and a host cut off mid-wave, are
left: docs/fleet.md); each agent serves one deployment repository, where host ``hN``'s file is
``hN/compose.yaml`` (compose project ``hN``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.docker_engine import (
    SLEEPER,
    TINY_IMAGE,
    AgentProcess,
    DockerEngine,
    commit_tag,
    require_docker,
    running_engine,
)
from tierctl.rollout.entrypoints import execute_fleet, make_fleet_plan
from tierctl.rollout.executor import RolloutOptions
from tierctl.rollout.gates import GateSettings, gate_names

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HOSTS = ("h1", "h2", "h3")


def _file(host: str, interval: int, entrypoint: list[str] = SLEEPER) -> str:
    engine = {
        "image": TINY_IMAGE,
        "pull_policy": "never",  # nothing here reaches a registry
        "network_mode": "host",
        "entrypoint": entrypoint,
        "command": ["python3", "-m", "sglang.launch_server", "--model-path", "/m",
                    "--port", "30001", "--prefill-decode-interval", str(interval)],
    }  # fmt: skip
    return yaml.safe_dump({"name": host, "services": {"r1": engine}}, sort_keys=False)


class Fleet:
    """Three engines, their agents, the repository and fleet files."""

    def __init__(self, tmp: Path, engines: list[DockerEngine]) -> None:
        self.tmp = tmp
        self.repo = tmp / "deploy"
        self.engines = dict(zip(HOSTS, engines, strict=True))
        commit_tag(self.repo, "v1", {f"{h}/compose.yaml": _file(h, 1) for h in HOSTS})
        commit_tag(self.repo, "v2", {f"{h}/compose.yaml": _file(h, 2) for h in HOSTS})
        # v3: the canary's NEW cannot start (no such program in the image): its dry run passes
        # (nothing starts in a dry run), its up fails after the scoped down, on that host only.
        v3 = {f"{h}/compose.yaml": _file(h, 3) for h in HOSTS}
        v3["h1/compose.yaml"] = _file("h1", 3, entrypoint=["/bin/no-such-engine"])
        commit_tag(self.repo, "v3", v3)
        self.agents = {
            h: AgentProcess(e, self.repo, tmp / f"state-{h}", f"tok-{h}-SECRET")
            for h, e in self.engines.items()
        }

    def fleet_file(self, old: str, new: str) -> Path:
        doc = {
            "fleet": "tiny",
            "repo": "deploy",
            "old": old,
            "new": new,
            "hosts": [
                {
                    "name": h,
                    "file": f"{h}/compose.yaml",
                    "agent_url": a.url,
                    "token_env": f"TOK_{h.upper()}",
                    "labels": {"role": "canary"} if h == "h1" else {"role": "control"},
                }
                for h, a in self.agents.items()
            ],
            "waves": {"size": 2, "max_parallel": 2},
        }
        path = self.tmp / f"fleet-{old}-{new}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    def interval(self, host: str) -> tuple[str, str]:
        """(running?, the engine's --prefill-decode-interval) of host's r1."""
        fmt = "{{.State.Running}} {{json .Args}}"
        out = self.engines[host].docker("inspect", "-f", fmt, f"{host}-r1-1", check=False).stdout
        running, _, args = out.strip().partition(" ")
        argv = json.loads(args) if args else []
        return running, argv[argv.index("--prefill-decode-interval") + 1] if argv else ""


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fleet]:
    require_docker()
    with contextlib.ExitStack() as stack:
        engines = [stack.enter_context(running_engine(h)) for h in HOSTS]
        f = Fleet(tmp_path, engines)
        for h, agent in f.agents.items():
            monkeypatch.setenv(f"TOK_{h.upper()}", agent.token)
            stack.callback(agent.stop)
            agent.start()
            body = {"tag": "v1", "file": f"{h}/compose.yaml", "services": ["r1"], "env": {},
                    "force_recreate": False, "dry_run": False}  # fmt: skip
            got = httpx.post(
                f"{agent.url}/compose/up", json=body, timeout=120,
                headers={"Authorization": f"Bearer {agent.token}"},
            )  # fmt: skip
            assert got.text.strip().endswith('{"type": "exit", "code": 0}'), got.text
        yield f
        for h, engine in f.engines.items():
            engine.compose("-p", h, "down", "-t", "0", check=False)
            assert engine.containers() == [], h


def _options(journal: Path) -> RolloutOptions:
    return RolloutOptions(journal, gates=GateSettings(skip=frozenset(gate_names())))


def test_a_fleet_rolls_out_in_two_waves_and_a_failed_canary_halts_the_next(fleet: Fleet) -> None:
    path = fleet.fleet_file("v1", "v2")
    plan = make_fleet_plan(path)
    assert plan.waves == [["h1"], ["h2", "h3"]]
    assert all([s.id for s in p.steps] == ["01-recreate-r1"] for p in plan.plans.values())
    logged: list[str] = []
    journal = fleet.tmp / "fleet-1.journal.jsonl"
    result = execute_fleet(path, journal, _options(journal), log=logged.append)
    assert result.status == {"h1": "done", "h2": "done", "h3": "done"}
    assert not result.halted
    assert [fleet.interval(h) for h in HOSTS] == [("true", "2")] * 3
    events = [json.loads(x) for x in journal.read_text().splitlines()]
    assert [e["event"] for e in events if e["event"].startswith("wave")] == [
        "wave-begin", "wave-done", "wave-begin", "wave-done",
    ]  # fmt: skip
    # The canary's host finished before the second wave began.
    order = [(e["event"], e.get("host")) for e in events]
    assert order.index(("host-done", "h1")) < order.index(("host-begin", "h2"))

    path = fleet.fleet_file("v2", "v3")
    journal = fleet.tmp / "fleet-2.journal.jsonl"
    result = execute_fleet(path, journal, _options(journal), log=logged.append)
    assert result.halted
    assert result.status == {"h1": "failed"}
    assert "rolled back to OLD" in result.errors["h1"]
    # h1 is back on v2; h2 and h3 were never touched.
    assert [fleet.interval(h) for h in HOSTS] == [("true", "2")] * 3
    for host in ("h2", "h3"):
        tags = {r.get("tag") for r in fleet.agents[host].records() if r["event"] == "begin"}
        assert "v3" not in tags, host
    assert json.loads(journal.read_text().splitlines()[-1])["event"] == "halted"
    text = journal.read_text() + "\n".join(logged)
    for agent in fleet.agents.values():
        assert agent.token not in text
