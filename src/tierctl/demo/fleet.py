"""``tierctl demo --fleet`` (``make demo-fleet``): the three-host story, end to end.

Three hosts, each its own dockerd and its own ``tierctl agent`` (:mod:`tierctl.demo.fleet_hosts`),
run OLD (an engine container, ``tierctl sim serve`` on the tiny image with this machine's Python
mounted read-only) from one deployment repository. A fleet file rolls NEW (one scheduler flag)
out in two waves, canary host first, with a manual approval between them: the fleet plan; wave 1
(dry run, scoped apply, gates on the real container), which stops with exit status 4 and
``awaiting-approval`` in the journal; the fleet readout (canary host vs control hosts, host as a
blocking factor); the approval, recorded with who and when; wave 2; the engines checked on NEW;
then every container, agent and dockerd stopped by pid, and checked gone.

The readout reads a real Prometheus, but this machine cannot serve hours of traffic to three
hosts: it holds six hours of synthetic history for them (:mod:`tierctl.demo.history`,
backfilled with promtool), in which the canary host's decode got faster at the change and one
control host is slower all along; the narrative says so.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from rich.console import Console
from rich.rule import Rule
from rich.table import Table

from tierctl.demo.fleet_hosts import (
    TINY_IMAGE,
    LoopbackHost,
    missing_parts,
    python_mounts,
    wait_engine,
)
from tierctl.runtime.process import free_port
from tierctl.testhosts.repo import commit_tag

HOSTS = ("gpu02", "gpu03", "gpu04")
#: How long an engine container has to answer /health (Python starting on a loaded machine).
ENGINE_START_S = 180.0
#: The synthetic history's end (2026-01-01T00:00Z) and the readout's "no change" band.
HISTORY_END_S = 1_767_225_600
READOUT_TOLERANCE = 0.10


@dataclass
class FleetDemo:
    """The demo's hosts, repository, fleet file and journal."""

    console: Console
    workdir: Path
    hosts: dict[str, LoopbackHost]
    ports: dict[str, int]
    #: Why the story stopped before its end (empty while it goes on).
    stopped: str = ""

    def stop(self, reason: str) -> bool:
        """Record and print why the story cannot go on; False, for ``return demo.stop(...)``."""
        self.stopped = reason
        self.console.print(f"[red]{reason}[/]")
        return False

    @property
    def repo(self) -> Path:
        return self.workdir / "deploy"

    @property
    def fleet_path(self) -> Path:
        return self.workdir / "fleet.yaml"

    @property
    def journal(self) -> Path:
        return self.workdir / "fleet.journal.jsonl"


def _engine(port: int, interval: int) -> dict[str, Any]:
    """One engine service: ``tierctl sim serve`` (SGLang's flags) in the tiny image."""
    src = str(Path(__file__).resolve().parents[2])
    return {
        "image": TINY_IMAGE,
        "pull_policy": "never",  # nothing here reaches a registry
        "network_mode": "host",
        "volumes": python_mounts(),
        "environment": {"PYTHONPATH": src, "HOME": "/tmp"},
        "entrypoint": [sys.executable, "-m", "tierctl", "sim", "serve"],
        # The engine's own argv only (the server-info gate holds the engine to all of it).
        "command": ["--", "--host", "127.0.0.1", "--port", str(port),
                    "--model-path", "/models/tiny", "--enable-metrics",
                    "--prefill-decode-interval", str(interval)],
        "stop_grace_period": "5s",
    }  # fmt: skip


def _repository(demo: FleetDemo) -> None:
    """v1 (OLD: --prefill-decode-interval 1) and v2 (NEW: 2) of every host's compose file."""
    for tag, interval in (("v1", 1), ("v2", 2)):
        files = {
            f"{h}/compose.yaml": yaml.safe_dump(
                {"name": h, "services": {"model-r1": _engine(demo.ports[h], interval)}},
                sort_keys=False,
            )
            for h in HOSTS
        }
        commit_tag(demo.repo, tag, files)


def _fleet_file(demo: FleetDemo) -> None:
    doc = {
        "fleet": "glm53-demo",
        "repo": "deploy",
        "old": "v1",
        "new": "v2",
        "hosts": [
            {"name": h, "file": f"{h}/compose.yaml", "agent_url": demo.hosts[h].agent_url,
             "token_env": f"TIERCTL_AGENT_TOKEN_{h.upper()}",
             "labels": {"region": "eu-west", "zone": "abc"[i], "role": "canary" if i == 0 else "control"}}
            for i, h in enumerate(HOSTS)
        ],
        "waves": {"size": 2, "max_parallel": 2, "approval": True},
    }  # fmt: skip
    demo.fleet_path.write_text(yaml.safe_dump(doc, sort_keys=False))


def _start_hosts(demo: FleetDemo) -> None:
    c = demo.console
    c.print(Rule("three hosts: each its own dockerd and its own tierctl agent"))
    table = Table("host", "dockerd", "agent", "engine port", "token")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(demo.hosts)) as pool:
        for future in [pool.submit(h.start, demo.repo) for h in demo.hosts.values()]:
            future.result()
    c.print(f"  3 dockerds and 3 agents up in {time.monotonic() - started:.1f} s")
    for name, host in demo.hosts.items():
        table.add_row(
            name, host.docker_host, host.agent_url, str(demo.ports[name]),
            f"$TIERCTL_AGENT_TOKEN_{name.upper()} (never on a command line)",
        )  # fmt: skip
    c.print(table)


def _old_everywhere(demo: FleetDemo) -> bool:
    """Bring v1 up on every host through its agent; wait for each engine's /health."""
    c = demo.console
    c.print(Rule("OLD everywhere: v1 up on each host through its agent"))
    for name, host in demo.hosts.items():
        body = {"tag": "v1", "file": f"{name}/compose.yaml", "services": ["model-r1"], "env": {},
                "force_recreate": False, "dry_run": False}  # fmt: skip
        got = httpx.post(
            f"{host.agent_url}/compose/up", json=body, timeout=300,
            headers={"Authorization": f"Bearer {host.token}"},
        )  # fmt: skip
        if not got.text.strip().endswith('{"type": "exit", "code": 0}'):
            return demo.stop(f"{name}: compose up of v1 failed: {got.text[-400:]}")
    for name in HOSTS:
        if not wait_engine(demo.ports[name], ENGINE_START_S):
            return demo.stop(
                f"{name}: the engine did not answer /health in {ENGINE_START_S:g} s (its "
                "container's log: docker logs, with that host's DOCKER_HOST)"
            )
        c.print(f"  {name}: engine {_interval(demo, name)} answering on :{demo.ports[name]}")
    return True


def _interval(demo: FleetDemo, name: str) -> str:
    """The engine's --prefill-decode-interval, as its /server_info reports it."""
    try:
        info = httpx.get(f"http://127.0.0.1:{demo.ports[name]}/server_info", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return "(not answering)"
    return f"--prefill-decode-interval {info.get('prefill_decode_interval')}"


def _show_plan(demo: FleetDemo) -> None:
    from tierctl.rollout.entrypoints import make_fleet_plan

    c = demo.console
    c.print(Rule(f"the fleet plan: tierctl plan --fleet {demo.fleet_path.name}"))
    plan = make_fleet_plan(demo.fleet_path)
    table = Table("wave", "host", "labels", "steps and gates")
    for number, wave in enumerate(plan.waves, 1):
        for h in wave:
            steps = "; ".join(f"{s.id} (gates: {', '.join(s.gates)})" for s in plan.plans[h].steps)
            labels = ", ".join(f"{k}={v}" for k, v in plan.fleet.host(h).labels.items())
            table.add_row(str(number), h, labels, steps)
    c.print(table)
    c.print(
        "between waves: a manual approval; at most 2 hosts change at once; a failed host halts "
        "the fleet and its wave's finished hosts go back to OLD"
    )


def _journal_tail(demo: FleetDemo, since: int) -> int:
    lines = demo.journal.read_text().splitlines()
    for line in lines[since:]:
        r = json.loads(line)
        extra = {k: v for k, v in r.items() if k not in ("event", "at")}
        demo.console.print(f"  [dim]{r['at']}[/] [bold]{r['event']}[/] {json.dumps(extra)}")
    return len(lines)


def _rollout(demo: FleetDemo, approve: Any = None) -> Any:
    from tierctl.rollout.entrypoints import execute_fleet
    from tierctl.rollout.executor import RolloutOptions
    from tierctl.rollout.gates import GateSettings

    options = RolloutOptions(
        demo.journal,
        resume=approve is not None,
        # No Prometheus scrapes these engines live: its gates are the readout's to answer.
        gates=GateSettings(
            health_timeout_s=ENGINE_START_S, skip=frozenset({"prometheus-variants", "soak"})
        ),
        proxy_drain=False,  # one engine per host, no proxy in front of it
    )
    return execute_fleet(
        demo.fleet_path, demo.journal, options, approve=approve,
        log=lambda m: demo.console.print(f"  [dim]{m}[/]"),
    )  # fmt: skip


@contextlib.contextmanager
def _hosts(console: Console) -> Iterator[dict[str, LoopbackHost]]:
    hosts = {h: LoopbackHost(h, token=secrets.token_hex(16)) for h in HOSTS}
    try:
        yield hosts
    finally:
        console.print(Rule("teardown: every container, agent and dockerd, stopped by pid"))
        for name, host in hosts.items():
            containers = host.containers()
            left = host.stop()
            said = f"[red]still running: {', '.join(left)}[/]" if left else "nothing left"
            console.print(f"  {name}: removed {len(containers)} container(s); {said}")


def run_fleet_demo(console: Console, workdir: Path) -> bool:
    """The story, start to end; False at the first step that fails (details printed)."""
    missing = missing_parts()
    if missing:
        console.print(f"[red]the fleet demo cannot run here: it needs {'; '.join(missing)}[/]")
        console.print(
            "next: `make demo-fleet` as root (it installs Debian's docker.io and prometheus "
            "first: scripts/ensure-docker, scripts/ensure-prometheus)"
        )
        return False
    import os

    started = time.monotonic()
    with _hosts(console) as hosts:
        demo = FleetDemo(console, workdir, hosts, {h: free_port() for h in HOSTS})
        for name, host in hosts.items():
            os.environ[f"TIERCTL_AGENT_TOKEN_{name.upper()}"] = host.token
        _repository(demo)
        _fleet_file(demo)
        _start_hosts(demo)
        if not _old_everywhere(demo):
            return False
        _show_plan(demo)
        ok = _waves(demo)
    console.print(Rule("done" if ok else "verdict: not reached", style="" if ok else "red"))
    console.print(f"the fleet demo took {time.monotonic() - started:.0f} s; files in {workdir}")
    if not ok:
        # Never one red line alone (#37): where it stopped, what it left, what to run next.
        console.print(f"stopped: {demo.stopped or 'see the lines above'}")
        journal = f"the fleet journal {demo.journal}" if demo.journal.exists() else "no journal"
        console.print(
            f"next: read {journal} and each host's FLEET.journal.HOST.jsonl beside it; every "
            "host was stopped; `make demo-fleet` starts three fresh ones"
        )
    return ok


def _waves(demo: FleetDemo) -> bool:
    from tierctl.rollout.fleet import Approval, approver

    c = demo.console
    c.print(Rule(f"wave 1, the canary host: tierctl rollout --fleet {demo.fleet_path.name}"))
    result = _rollout(demo)
    seen = _journal_tail(demo, 0)
    if result.awaiting != 2:
        return demo.stop(
            f"wave 1 (the canary host) did not stop for wave 2's approval: {result.status} "
            f"{result.errors}"
        )
    c.print(
        "[yellow]stopped: awaiting approval for wave 2[/] (exit status 4); "
        f"gpu02 runs {_interval(demo, 'gpu02')}, gpu03 {_interval(demo, 'gpu03')}"
    )
    verdict = _readout(demo)
    if verdict not in ("pass", "skipped"):
        return demo.stop(f"the readout says {verdict}: wave 2 is not approved")
    who = approver()
    c.print(Rule(f"approval: tierctl rollout --fleet ... --resume --approve-wave 2 (by {who})"))
    result = _rollout(demo, Approval(2, who, f"fleet readout: {verdict}"))
    _journal_tail(demo, seen)
    if result.halted or result.awaiting is not None:
        return demo.stop(f"wave 2 did not finish: {result.status} {result.errors}")
    on_new = {h: _interval(demo, h) for h in HOSTS}
    for h, said in on_new.items():
        c.print(f"  {h}: {said}")
    return all(s.endswith(" 2") for s in on_new.values())


def _readout(demo: FleetDemo) -> str:
    """The fleet readout over six hours of synthetic history in a real Prometheus."""
    from tierctl.demo.history import ArmData, openmetrics
    from tierctl.readout.fleet import FleetReadoutHost, run_fleet_readout
    from tierctl.readout.report import print_fleet_readout
    from tierctl.runtime.local_prom import LocalPrometheus, backfill, prometheus_binaries
    from tierctl.runtime.promapi import PrometheusClient

    c = demo.console
    c.print(Rule("the fleet readout: canary host vs control hosts, host as a blocking factor"))
    binaries = prometheus_binaries()
    if binaries is None:
        c.print("[yellow]skipped: no Prometheus here (scripts/ensure-prometheus installs it)[/]")
        return "skipped"
    # A fixed past day (the same history every run, so the same verdict).
    end = HISTORY_END_S
    change, start = end - 3 * 3600, end - 6 * 3600
    c.print(
        "[dim]this machine cannot serve hours of traffic to three hosts: the Prometheus holds "
        "6 h of synthetic history (backfilled with promtool), in which gpu02's decode is 15 % "
        "faster after the change and gpu04 is 25 % slower than the others all along; "
        f"changes within ±{READOUT_TOLERANCE:.0%} count as none[/]"
    )
    arms = [
        ArmData("model-r1", "v1", host="gpu02", change_s=change, after_tpot_x=0.85),
        ArmData("model-r1", "v1", host="gpu03"),
        ArmData("model-r1", "v1", host="gpu04", ttft_x=1.25, tpot_x=1.25),
    ]
    data = demo.workdir / "prometheus"
    backfill(openmetrics(arms, start, end, scrape_s=60, seed=3), data / "data", binaries[1])
    prom = LocalPrometheus(data, "global: {}\n", data_dir=data / "data", binary=binaries[0])
    with prom, PrometheusClient(prom.url) as client:
        hosts = [
            FleetReadoutHost(h, "canary" if h == "gpu02" else "control", client,
                             f'host_machine="{h}"')
            for h in HOSTS
        ]  # fmt: skip
        result = run_fleet_readout(
            hosts, start_s=change, end_s=end, step_s=300, baseline=(start, change),
            tolerance=READOUT_TOLERANCE,
        )  # fmt: skip
    print_fleet_readout(result, c)
    return result.verdict
