"""A fleet of three hosts as network namespaces, for real: each host its own address, its own
dockerd and its own ``tierctl agent`` (:class:`tierctl.testhosts.hostset.HostSet`), engines
as containers (``tierctl sim serve`` in the tiny image, this machine's Python mounted
read-only) behind the real sglang-router (a container too), and clients sending through
every host's router while the fleet rolls out.

Each host's compose file (``hN/compose.yaml`` in one deployment repository) has the router
(``proxy``) and two replicas. A step takes its replica out of its host's router (the
rollout's proxy drain), recreates it through the host's agent, runs the gates against it
across the namespace, and puts it back; the executor changes one replica of a host at a time.

The module shares one set of namespaces, dockerds and agents (a module-scoped fixture, the
tiny image imported once per engine); each test first brings every host to a known tag
(:meth:`Fleet.converge`), so a failed test leaves the next one a defined start. What is
measured (per-step times through the agents, wave times, requests and failures under
traffic) is printed with ``-s``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.docker_engine import commit_tag
from tierctl.realtier.traffic import Traffic
from tierctl.rollout.entrypoints import DriverConfig, execute_fleet, make_fleet_plan
from tierctl.rollout.executor import RolloutOptions
from tierctl.rollout.fleet import FleetResult
from tierctl.rollout.gates import GateSettings
from tierctl.runtime.polling import wait_until
from tierctl.testhosts.dockerd import SIM_ENGINE_IMAGE, SLEEPER, TINY_IMAGE, python_mounts
from tierctl.testhosts.hostset import HostSet, hosts_missing, stopped_cleanly

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HOSTS = ("h1", "h2", "h3")
ROOT = Path(__file__).resolve().parents[2]
ROUTER_PORT = 30000
PORTS = {"model-r1": 30001, "model-r2": 30002}
MODEL = "m"
ROUTER = Path(sys.executable).parent / "sglang-router"


def _engine(port: int, interval: int, *, role: str, broken: bool = False) -> dict[str, Any]:
    return {
        "image": SIM_ENGINE_IMAGE,
        "pull_policy": "never",  # nothing here reaches a registry
        "network_mode": "host",  # the host's namespace: its address, its loopback
        "volumes": python_mounts(ROOT / "src"),
        # The image's entrypoint runs tierctl's simulated engine for this command line.
        "command": ["python3", "-m", "sglang.launch_server", "--model-path", MODEL, "--host", "0.0.0.0", "--port", str(port),
                    "--enable-metrics", "--prefill-decode-interval", str(interval)],
        "labels": {"tierctl.role": role},
        "stop_grace_period": "5s",
        # NEW that never serves: the container runs, its entrypoint never starts the engine.
        **({"entrypoint": SLEEPER} if broken else {}),
    }  # fmt: skip


def _router() -> dict[str, Any]:
    return {
        "image": TINY_IMAGE,
        "pull_policy": "never",
        "network_mode": "host",
        "volumes": python_mounts(ROOT / "src"),
        "environment": {"HOME": "/tmp"},
        "entrypoint": [str(ROUTER)],
        "command": [
            "launch", "--host", "0.0.0.0", "--port", str(ROUTER_PORT),
            "--worker-urls", *(f"http://127.0.0.1:{p}" for p in PORTS.values()),
            "--policy", "round_robin", "--health-check-interval-secs", "1",
            "--health-check-timeout-secs", "3", "--health-failure-threshold", "3",
            "--health-success-threshold", "1", "--prometheus-host", "127.0.0.1",
            "--prometheus-port", "29000", "--log-level", "warn",
        ],
        "labels": {"tierctl.role": "proxy"},
        "stop_grace_period": "2s",
    }  # fmt: skip


def _file(host: str, interval: int, *, broken: str | None = None) -> str:
    services = {
        "proxy": _router(),
        "model-r1": _engine(PORTS["model-r1"], interval, role="control",
                            broken=broken == "model-r1"),
        "model-r2": _engine(PORTS["model-r2"], interval, role="canary",
                            broken=broken == "model-r2"),
    }  # fmt: skip
    return yaml.safe_dump({"name": host, "services": services}, sort_keys=False)


#: Tags of the deployment repository: the engines' --prefill-decode-interval per tag; v5's
#: model-r2 on h1 (the canary host, whose first step it is) never serves.
TAGS = {"v1": 1, "v2": 2, "v3": 3, "v4": 4, "v5": 5}


class Fleet:
    """The hosts, the repository, fleet files, and what the hosts run."""

    def __init__(self, hosts: HostSet, tmp: Path) -> None:
        self.hosts = hosts
        self.tmp = tmp
        self.runs = 0
        self.timings: dict[str, float] = {}

    def fleet_file(self, old: str, new: str) -> Path:
        doc = {
            "fleet": "netns",
            "repo": str(self.hosts.repo),
            "old": old,
            "new": new,
            "hosts": [
                {
                    "name": h.name,
                    "file": f"{h.name}/compose.yaml",
                    "agent_url": h.agent_url,
                    "token_env": f"TOK_{h.name.upper()}",
                    "labels": {"role": "canary" if h.name == "h1" else "control"},
                }
                for h in self.hosts
            ],
            "waves": {"size": 2, "max_parallel": 2},
        }
        self.runs += 1
        path = self.tmp / f"fleet-{self.runs}-{old}-{new}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    def up(self, host: str, tag: str, services: list[str]) -> str:
        """An up through the host's agent; returns its last event line."""
        h = self.hosts[host]
        body = {"tag": tag, "file": f"{host}/compose.yaml", "services": services, "env": {},
                "force_recreate": False, "dry_run": False}  # fmt: skip
        got = httpx.post(
            f"{h.agent_url}/compose/up", json=body, timeout=300,
            headers={"Authorization": f"Bearer {h.token}"},
        )  # fmt: skip
        return got.text.strip().splitlines()[-1]

    def converge(self, tag: str) -> None:
        """Every host runs ``tag`` (what is already so is left alone) and serves through
        its router."""
        for h in self.hosts:
            last = self.up(h.name, tag, ["model-r1", "model-r2", "proxy"])
            assert last == '{"type": "exit", "code": 0}', (h.name, last)
        for h in self.hosts:
            self.register_workers(h.name)
            assert wait_until(lambda h=h: self.router_ready(h.name), 300, poll_s=0.3), h.name

    def register_workers(self, host: str) -> None:
        """Put back in ``host``'s router any replica a failed test left drained."""
        url = f"http://{self.hosts[host].address}:{ROUTER_PORT}"
        assert wait_until(lambda: self.workers(host) is not None, 300, poll_s=0.3), host
        listed = {w.get("url") for w in self.workers(host) or []}
        for port in PORTS.values():
            if f"http://127.0.0.1:{port}" not in listed:
                httpx.post(f"{url}/workers", json={"url": f"http://127.0.0.1:{port}"}, timeout=10)

    def workers(self, host: str) -> list[dict[str, Any]] | None:
        """The router's workers (None: it does not answer)."""
        url = f"http://{self.hosts[host].address}:{ROUTER_PORT}"
        try:
            got = httpx.get(f"{url}/workers", timeout=3).json()
        except (httpx.HTTPError, ValueError):
            return None
        listed = got.get("workers") if isinstance(got, dict) else None
        return listed if isinstance(listed, list) else None

    def router_ready(self, host: str) -> bool:
        listed = self.workers(host) or []
        return len(listed) == 2 and all(w.get("is_healthy") for w in listed)

    def interval(self, host: str, service: str) -> str:
        """The running container's --prefill-decode-interval ('' when not running)."""
        fmt = "{{.State.Running}} {{json .Args}}"
        name = f"{host}-{service}-1"
        out = self.hosts[host].dockerd.docker("inspect", "-f", fmt, name, check=False).stdout
        running, _, args = out.strip().partition(" ")
        argv = json.loads(args) if args else []
        if running != "true" or "--prefill-decode-interval" not in argv:
            return ""
        return str(argv[argv.index("--prefill-decode-interval") + 1])

    def intervals(self) -> dict[str, list[str]]:
        return {h: [self.interval(h, s) for s in PORTS] for h in HOSTS}

    def traffic(self) -> dict[str, Traffic]:
        """Clients for every host's router (bounded in count and time)."""
        return {
            h.name: Traffic(
                f"http://{h.address}:{ROUTER_PORT}", model=MODEL, concurrency=1, pause_s=0.2,
                request_timeout_s=30, max_requests=20_000, max_seconds=600,
            )
            for h in self.hosts
        }  # fmt: skip


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    why = hosts_missing()
    if why is not None:
        import os

        if os.environ.get("CI"):
            pytest.fail(f"the netns fleet cannot run in CI: {why}")
        pytest.skip(why)
    if not ROUTER.exists():
        pytest.fail(f"no sglang-router beside {sys.executable} (`make test` installs it)")
    tmp = tmp_path_factory.mktemp("fleet-netns")
    repo = tmp / "deploy"
    for tag, interval in TAGS.items():
        files = {f"{h}/compose.yaml": _file(h, interval) for h in HOSTS}
        if tag == "v5":
            files["h1/compose.yaml"] = _file("h1", interval, broken="model-r2")
        commit_tag(repo, tag, files)
    mp = pytest.MonkeyPatch()
    hosts = HostSet(HOSTS, repo, agent_args=("--operation-timeout-s", "120"))
    started = time.monotonic()
    with hosts:
        for h in hosts:
            mp.setenv(f"TOK_{h.name.upper()}", h.token)
        f = Fleet(hosts, tmp)
        f.converge("v1")
        f.timings["setup_s"] = time.monotonic() - started
        print(f"\nnetns hosts up in {f.timings['setup_s']:.1f} s: {hosts.timings}")
        print(hosts.describe())
        try:
            yield f
        finally:
            mp.undo()
            print(_operation_times(hosts))
    assert stopped_cleanly(hosts) is None


def _operation_times(hosts: HostSet) -> str:
    """Median and max seconds of each kind of agent operation over the module (from the
    agents' operation logs: ``begin`` and its ``end`` by ``op_id``)."""
    import statistics

    seen: dict[str, list[float]] = {}
    for h in hosts:
        begins = {r["op_id"]: r for r in h.oplog() if r["event"] == "begin"}
        for rec in (r for r in h.oplog() if r["event"] == "end" and r["op_id"] in begins):
            b = begins[rec["op_id"]]
            kind = "dry run" if b.get("dry_run") else str(b.get("operation"))
            seen.setdefault(kind, []).append(float(rec["duration_s"]))  # type: ignore[arg-type]
    return "agent operations across the namespaces: " + "; ".join(
        f"{k} n={len(v)} median {statistics.median(v):.2f} s max {max(v):.2f} s"
        for k, v in sorted(seen.items())
    )


def _options(journal: Path, **gates: Any) -> RolloutOptions:
    # A budget, not a threshold: a loaded CI machine starts a containerised engine slowly.
    settings = GateSettings(
        poll_interval_s=0.2, health_timeout_s=gates.pop("health_timeout_s", 240), **gates
    )
    return RolloutOptions(journal, gates=settings)


def _config(**kw: Any) -> DriverConfig:
    return dataclasses.replace(DriverConfig(name="compose-manager"), **kw)


def _run(
    fleet: Fleet,
    old: str,
    new: str,
    *,
    config: DriverConfig | None = None,
    resume: Path | None = None,
    path: Path | None = None,
    **gates: Any,
) -> tuple[FleetResult, Path, list[str]]:
    """Run OLD -> NEW over the fleet (``resume``: that fleet file's journal, resumed;
    ``path``: this fleet file, new)."""
    path = resume or path or fleet.fleet_file(old, new)
    journal = fleet.tmp / f"{path.stem}.journal.jsonl"
    logged: list[str] = []
    options = dataclasses.replace(_options(journal, **gates), resume=resume is not None)
    result = execute_fleet(
        path, journal, options, config=config or _config(), log=logged.append
    )  # fmt: skip
    return result, journal, logged


def _began(fleet: Fleet, host: str, tag: str) -> bool:
    """``host``'s agent has begun a real (not dry-run) operation at ``tag``."""
    return any(
        r["event"] == "begin" and r.get("tag") == tag and not r.get("dry_run")
        for r in fleet.hosts[host].oplog()
    )


class Background:
    """A fleet run in a thread (the test acts on the hosts meanwhile)."""

    def __init__(self, fleet: Fleet, old: str, new: str, config: DriverConfig) -> None:
        self.out: list[Any] = []
        self.path = fleet.fleet_file(old, new)
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, args=(fleet, old, new, config))
        self.thread.start()

    def _run(self, fleet: Fleet, old: str, new: str, config: DriverConfig) -> None:
        try:
            self.out.append(_run(fleet, old, new, config=config, resume=None, path=self.path))
        except BaseException as exc:  # re-raised by result()
            self.out.append(exc)

    def result(self, timeout_s: float = 400) -> tuple[FleetResult, Path, list[str]]:
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "the fleet run did not end"
        got = self.out[0]
        if isinstance(got, BaseException):
            raise got
        return got  # type: ignore[no-any-return]


def _records(journal: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in journal.read_text().splitlines() if x.strip()]


def _wave_times(journal: Path) -> list[float]:
    """Seconds per wave, from the host journals' first and last timestamps (the fleet journal
    has none): per wave, the span of its hosts' own journals."""
    from datetime import datetime

    out = []
    records = _records(journal)
    for rec in (r for r in records if r["event"] == "wave-begin"):
        stamps: list[float] = []
        for host in rec["hosts"]:
            own = journal.with_name(f"{journal.stem}.{host}.jsonl")
            if own.exists():
                stamps += [datetime.fromisoformat(r["at"]).timestamp() for r in _records(own)]
        out.append(round(max(stamps) - min(stamps), 1) if stamps else float("nan"))
    return out


def _report(name: str, traffic: dict[str, Traffic]) -> None:
    for host, t in traffic.items():
        print(f"{name}: {host} router: {t.result.sent} requests, {len(t.result.failures)} failed "
              f"{dict(t.result.outcomes)}")  # fmt: skip


def test_two_waves_under_traffic_lose_no_request(fleet: Fleet) -> None:
    """v1 -> v2 over the three hosts in two waves (h1, then h2 and h3 at once), each replica
    drained from its host's router before its recreate: every request through every router
    is answered 200, and every replica ends on v2."""
    fleet.converge("v1")
    plan = make_fleet_plan(fleet.fleet_file("v1", "v2"))
    assert plan.waves == [["h1"], ["h2", "h3"]]
    assert all(len(p.steps) == 2 for p in plan.plans.values())
    traffic = fleet.traffic()
    for t in traffic.values():
        t.__enter__()
    try:
        for t in traffic.values():
            t.wait_for(5, timeout_s=120)
        started = time.monotonic()
        result, journal, logged = _run(fleet, "v1", "v2")
        took = time.monotonic() - started
        for t in traffic.values():
            t.wait_for(t.result.sent + 5, timeout_s=120)
    finally:
        for t in traffic.values():
            t.__exit__(None, None, None)
    _report("two waves", traffic)
    print(f"two waves: fleet run {took:.1f} s, waves {_wave_times(journal)}")
    assert result.status == {"h1": "done", "h2": "done", "h3": "done"}, (result.errors, logged)
    assert fleet.intervals() == {h: ["2", "2"] for h in HOSTS}
    for host, t in traffic.items():
        assert t.result.failures == [], (host, t.result.outcomes)
    # Every step drained its replica from the router and put it back.
    for host in HOSTS:
        own = [r["event"] for r in _records(journal.with_name(f"{journal.stem}.{host}.jsonl"))]
        assert (own.count("proxy-drained"), own.count("proxy-restored")) == (2, 2), (host, own)
    for h in fleet.hosts:
        assert h.token not in journal.read_text() + "\n".join(logged)


def test_a_host_cut_off_mid_wave_halts_the_fleet_and_a_resume_converges(fleet: Fleet) -> None:
    """v2 -> v3; once h2's agent has begun its first real operation (wave 2), h2's link goes
    down (``ip link set VETH down``): h2 keeps running but nothing reaches it. Its step fails
    within the driver's deadline with a message naming the host and the unreachable agent, the
    fleet halts, h3 (same wave) finishes. With the link back, a resume converges h2 on v3.
    h1 and h3's routers lose no request throughout. With the driver's defaults (#37: the agent's
    stream beats, a silent one is given up on after 15 s) h2 fails within 60 s of the cut."""
    fleet.converge("v2")
    config = _config()
    traffic = {k: v for k, v in fleet.traffic().items() if k != "h2"}
    for t in traffic.values():
        t.__enter__()
    try:
        run = Background(fleet, "v2", "v3", config)
        assert wait_until(lambda: _began(fleet, "h2", "v3"), 300, poll_s=0.05)
        fleet.hosts.network.cut("h2")
        cut_at = time.monotonic()
        journal = fleet.tmp / f"{run.path.stem}.journal.jsonl"
        try:
            failed = wait_until(
                lambda: any(
                    r["event"] == "host-failed" and r["host"] == "h2" for r in _records(journal)
                ),
                90,
                poll_s=0.2,
            )
            failed_after = time.monotonic() - cut_at
            result, journal, _logged = run.result()
        finally:
            fleet.hosts.network.mend("h2")
        print(f"cut off: h2 failed {failed_after:.1f} s after the cut, halted "
              f"{time.monotonic() - cut_at:.1f} s after it")  # fmt: skip
        assert failed
        assert failed_after < 60, failed_after
        assert result.halted
        assert result.status.get("h1") == "done"
        assert result.status.get("h2") == "failed"
        assert result.status.get("h3") == "done"
        print(f"cut off: h2's error: {result.errors['h2']}")
        assert "the host stopped answering" in result.errors["h2"]
        assert "never answered" in result.errors["h2"]
        last = {k: v for k, v in _records(journal)[-1].items() if k != "at"}
        assert last == {"event": "halted", "failed": ["h2"], "wave": 2}
        own = _records(journal.with_name(f"{journal.stem}.h2.jsonl"))
        assert own[-1]["event"] == "unreachable", own
        assert fleet.intervals()["h3"] == ["3", "3"]
        resumed, journal2, logged2 = _run(fleet, "v2", "v3", config=config, resume=run.path)
        print(f"cut off: resumed {resumed.status} {resumed.errors}")
        assert resumed.status == {"h1": "skipped", "h2": "done", "h3": "skipped"}, logged2
        assert journal2 == journal
        assert _records(journal)[-1]["event"] == "completed"
    finally:
        for t in traffic.values():
            t.__exit__(None, None, None)
    _report("cut off", traffic)
    assert fleet.intervals() == {h: ["3", "3"] for h in HOSTS}
    for host, t in traffic.items():
        assert t.result.failures == [], (host, t.result.outcomes)


def test_an_agent_killed_mid_operation_halts_its_host_and_a_resume_converges(
    fleet: Fleet,
) -> None:
    """v3 -> v4; h3's agent is SIGKILLed (by pid) while it runs h3's first real operation and
    stays down: the compose run dies with it, h3's step gets no answer, the fleet halts naming
    h3. The agent restarted logs the operation as interrupted; a resume converges h3 on v4.
    The drained replica was out of h3's router the whole time: no router loses a request."""
    fleet.converge("v3")
    config = _config(agent_timeout_s=15.0, agent_attempts=2)
    traffic = fleet.traffic()
    for t in traffic.values():
        t.__enter__()
    try:
        run = Background(fleet, "v3", "v4", config)
        assert wait_until(lambda: _began(fleet, "h3", "v4"), 300, poll_s=0.05)
        fleet.hosts["h3"].kill_agent()
        killed_at = time.monotonic()
        try:
            result, _, _ = run.result()
        finally:
            fleet.hosts["h3"].start_agent()
        print(f"agent killed: halted {time.monotonic() - killed_at:.1f} s after the kill")
        print(f"agent killed: h3's error: {result.errors.get('h3')}")
        assert result.halted
        assert result.status == {"h1": "done", "h2": "done", "h3": "failed"}
        assert "never answered" in result.errors["h3"]
        oplog = fleet.hosts["h3"].oplog()
        begins = {r["op_id"]: r for r in oplog if r["event"] == "begin"}
        interrupted = [begins[r["op_id"]] for r in oplog if r["event"] == "interrupted"]
        assert [(r["operation"], r["tag"]) for r in interrupted] == [("down", "v4")], oplog
        resumed, _, logged = _run(fleet, "v3", "v4", config=config, resume=run.path)
        assert resumed.status == {"h1": "skipped", "h2": "skipped", "h3": "done"}, logged
    finally:
        for t in traffic.values():
            t.__exit__(None, None, None)
    _report("agent killed", traffic)
    assert fleet.intervals() == {h: ["4", "4"] for h in HOSTS}
    for host, t in traffic.items():
        assert t.result.failures == [], (host, t.result.outcomes)


def test_a_canary_whose_gate_fails_halts_the_fleet_with_its_wave_rolled_back(
    fleet: Fleet,
) -> None:
    """v4 -> v5, where v5's model-r2 on h1 (the canary host; its first step) never serves:
    the container runs, its health gate across the namespace never passes, the step is
    rolled back to v4 and put back in h1's router, the fleet halts after wave 1: h2 and h3 are
    never touched. No router loses a request."""
    fleet.converge("v4")
    traffic = fleet.traffic()
    for t in traffic.values():
        t.__enter__()
    try:
        for t in traffic.values():
            t.wait_for(5, timeout_s=120)
        result, journal, _ = _run(fleet, "v4", "v5", health_timeout_s=60)
        for t in traffic.values():
            t.wait_for(t.result.sent + 5, timeout_s=120)
    finally:
        for t in traffic.values():
            t.__exit__(None, None, None)
    _report("canary gate fails", traffic)
    print(f"canary gate fails: h1's error: {result.errors.get('h1')}")
    assert result.halted
    assert result.status == {"h1": "failed"}
    assert "health" in result.errors["h1"]
    assert "rolled back to OLD" in result.errors["h1"]
    assert fleet.intervals() == {h: ["4", "4"] for h in HOSTS}
    for host in ("h2", "h3"):
        tags = {r.get("tag") for r in fleet.hosts[host].oplog() if r["event"] == "begin"}
        assert "v5" not in tags, host
    own = [r["event"] for r in _records(journal.with_name(f"{journal.stem}.h1.jsonl"))]
    assert own[-3:] == ["gate-failed", "rolled-back", "proxy-restored"], own
    for host, t in traffic.items():
        assert t.result.failures == [], (host, t.result.outcomes)
