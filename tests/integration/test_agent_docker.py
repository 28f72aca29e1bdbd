"""``tierctl agent serve`` on a real dockerd: its refusals, its one-at-a-time rule, its
deadline, a kill in the middle of an operation, and a real engine container recreated.

Each test gets its own deployment repository (a git repository tagged v1, v2), its own agent
process (by pid) and its own compose project on the session's dockerd, and checks at the end
that nothing of it is left: no container, no agent, no compose process.
"""

from __future__ import annotations

import hashlib
import json
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.docker_engine import (
    SLEEPER,
    TINY_IMAGE,
    AgentProcess,
    DockerEngine,
    commit_tag,
    python_mounts,
)
from tierctl.errors import RuntimeFailure
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.compose_manager import ComposeManagerDriver, Target
from tierctl.rollout.normalise import load_services
from tierctl.rollout.source import SourceRef
from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOKEN = "agent-tok-SENTINEL-51d2"
PROJECT = "agenttest"


def _service(**extra: Any) -> dict[str, Any]:
    return {"image": TINY_IMAGE, "network_mode": "host", "entrypoint": SLEEPER, **extra}


def _compose(services: dict[str, dict[str, Any]]) -> str:
    return yaml.safe_dump({"name": PROJECT, "services": services}, sort_keys=False)


#: A service that ignores SIGTERM: stopping it waits out its 5 s grace (a slow operation).
STUBBORN = _service(
    entrypoint=["/bin/sh", "-c", "trap '' TERM; sleep 3600 & wait; sleep 3600", "--"],
    stop_grace_period="5s",
)


class Host:
    """One simulated host: the session's dockerd, a deployment repository, an agent."""

    def __init__(self, engine: DockerEngine, tmp: Path, *extra: str) -> None:
        self.engine = engine
        self.repo = tmp / "deploy"
        self.agent = AgentProcess(engine, self.repo, tmp / "state", TOKEN, extra=extra)
        self.client = httpx.Client(
            base_url=self.agent.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120
        )

    def tag(self, tag: str, services: dict[str, dict[str, Any]], **files: str) -> str:
        text = _compose(services)
        commit_tag(self.repo, tag, {"compose.yaml": text, **files})
        return text

    def post(self, path: str, body: dict[str, Any], **kw: Any) -> httpx.Response:
        return self.client.post(path, json=body, **kw)

    def up(self, tag: str, services: list[str], **kw: Any) -> list[dict[str, Any]]:
        body = {"tag": tag, "file": "compose.yaml", "services": services, "env": {}}
        body |= {"force_recreate": False, "dry_run": False} | kw
        resp = self.post("/compose/up", body)
        assert resp.status_code == 200, resp.text
        return [json.loads(line) for line in resp.text.splitlines() if line.strip()]

    def close(self) -> None:
        self.client.close()
        self.agent.stop()
        self.engine.compose("-p", PROJECT, "down", "-t", "0", check=False)
        left = self.engine.containers()
        self.engine.remove_all_containers()
        assert left == [], f"containers left: {left}"
        assert self.agent.proc is None or self.agent.proc.poll() is not None


@pytest.fixture
def host(docker_engine: DockerEngine, tmp_path: Path) -> Iterator[Host]:
    h = Host(docker_engine, tmp_path)
    yield h
    h.close()


def _exit(events: list[dict[str, Any]]) -> int:
    assert events[-1]["type"] == "exit", events
    return int(events[-1]["code"])


def test_refusals_come_before_anything_runs(host: Host) -> None:
    """No token, a wrong one, a path out of the projects directory (``..``, absolute, a
    symlink to /etc), a tag git would read as an option, a reserved env name, an empty
    service list, a body too big: each refused with its status, nothing in the operation log,
    no container created."""
    host.tag(
        "v1",
        {"a": _service()},
    )
    (host.repo / "passwd.yaml").symlink_to("/etc/passwd")
    commit_tag(host.repo, "v2", {})
    host.agent.start()
    good = {"tag": "v1", "file": "compose.yaml", "services": ["a"], "env": {}}
    good |= {"force_recreate": False, "dry_run": False}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        resp = httpx.post(f"{host.agent.url}/compose/up", json=good, headers=headers)
        assert resp.status_code == 401, headers
    files = httpx.get(f"{host.agent.url}/files", params={"tag": "v1", "file": "compose.yaml"})
    assert files.status_code == 401
    refused = [
        ({"file": "../compose.yaml"}, 400, "climbs out"),
        ({"file": "/etc/passwd"}, 400, "absolute"),
        ({"file": "passwd.yaml", "tag": "v2"}, 400, "through a symlink"),
        ({"file": "missing.yaml"}, 404, "not in the repository"),
        ({"tag": "--upload-pack=touch /tmp/x"}, 400, "not a tag name"),
        ({"tag": "v9"}, 404, "no tag or commit"),
        ({"env": {"LD_PRELOAD": "/tmp/x.so"}}, 400, "the agent's own"),
        ({"env": {"DOCKER_HOST": "tcp://10.0.0.1:2375"}}, 400, "the agent's own"),
        ({"env": {"TIERCTL_AGENT_TOKEN": "x"}}, 400, "the agent's own"),
        ({"services": []}, 400, "every service"),
        ({"services": ["-v"]}, 400, "not a compose service name"),
        ({"extra": 1}, 400, "keys must be"),
    ]
    for change, status, said in refused:
        resp = host.post("/compose/up", good | change)
        assert (resp.status_code, said in resp.json()["error"]) == (status, True), change
    # The symlink gone from the checkout, still in the commit: git says it is no regular file.
    (host.repo / "passwd.yaml").unlink()
    resp = host.post("/compose/up", good | {"file": "passwd.yaml", "tag": "v2"})
    assert resp.status_code == 400
    assert "not a regular file" in resp.json()["error"]
    assert host.post("/compose/up", good | {"env": {"X": "y" * 2_000_000}}).status_code == 413
    assert host.agent.records() == []
    assert host.engine.containers() == []


def test_up_dry_run_ps_logs_and_files_on_a_real_engine(host: Host) -> None:
    """The dry run names exactly the services that would change (and creates nothing), up
    creates them, ps shows state and health, logs tails, files gives the text and digest;
    the token never reaches compose (a file interpolating it sees it unset)."""
    text = host.tag(
        "v1",
        {
            "a": _service(
                healthcheck={"test": ["CMD", "true"], "interval": "1s"},
                labels={"seen-token": "${TIERCTL_AGENT_TOKEN:-absent}"},
                command=["echo hello-from-a"],
                entrypoint=["/bin/sh", "-c", "echo $$0; trap 'exit 0' TERM; sleep 3600 & wait"],
            ),
            "b": _service(),
        },
    )
    host.agent.start()
    dry = host.up("v1", ["a"], dry_run=True, force_recreate=True)
    assert _exit(dry) == 0
    assert [e for e in dry if e["type"] == "changes"] == [
        {"type": "changes", "services": ["a"], "removed": []}
    ]
    assert host.engine.containers() == []
    assert _exit(host.up("v1", ["a"])) == 0
    assert host.engine.containers() == [f"{PROJECT}-a-1"]
    # b stays untouched, a is running: a dry run of both plans b only.
    dry = host.up("v1", ["a", "b"], dry_run=True)
    assert [e["services"] for e in dry if e["type"] == "changes"] == [["b"]]

    def healthy() -> bool:
        ps = host.post("/compose/ps", {"tag": "v1", "file": "compose.yaml"}).json()
        return [(c["service"], c["state"], c["health"]) for c in ps["containers"]] == [
            ("a", "running", "healthy")
        ]

    assert wait_until(healthy, 60, poll_s=0.3)
    logs = host.post(
        "/compose/logs", {"tag": "v1", "file": "compose.yaml", "service": "a", "tail": 5}
    )
    assert "hello-from-a" in logs.text
    files = host.client.get("/files", params={"tag": "v1", "file": "compose.yaml"}).json()
    assert files["text"] == text
    assert files["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    label = host.engine.docker(
        "inspect", "-f", '{{index .Config.Labels "seen-token"}}', f"{PROJECT}-a-1"
    )
    assert label.stdout.strip() == "absent"
    records = host.agent.records()
    assert [(r["event"], r.get("operation"), r.get("dry_run")) for r in records] == [
        ("begin", "up", True),
        ("end", None, None),
        ("begin", "up", False),
        ("end", None, None),
        ("begin", "up", True),
        ("end", None, None),
    ]
    assert TOKEN not in host.agent.oplog.read_text()


def test_one_operation_per_project_at_a_time(host: Host) -> None:
    """While a slow down runs (a service that ignores SIGTERM), another up of the project is
    answered 409 at once; the driver waits it out (409 is retried) and then succeeds."""
    host.tag("v1", {"slow": STUBBORN, "b": _service()})
    host.agent.start()
    assert _exit(host.up("v1", ["slow", "b"])) == 0
    down = {"tag": "v1", "file": "compose.yaml", "services": ["slow"], "env": {}, "volumes": False}
    slow = threading.Thread(target=host.post, args=("/compose/down", down))
    slow.start()
    try:
        assert wait_until(lambda: len(host.agent.records()) >= 3, 30, poll_s=0.05)
        up = {k: v for k, v in down.items() if k != "volumes"}
        busy = host.post("/compose/up", up | {"force_recreate": False, "dry_run": True})
        assert busy.status_code == 409
        assert "busy with operation" in busy.json()["error"]
        sleeps: list[float] = []
        dep = _deployment(host, "v1")
        driver = ComposeManagerDriver(
            host.agent.url,
            TOKEN,
            {"new": Target("v1", "compose.yaml")},
            sleep=lambda s: (sleeps.append(s), time.sleep(s)),  # type: ignore[func-returns-value]
            backoff_s=1.0,
            attempts=8,
        )
        try:
            result = driver.dry_run(dep, ["b"])
        finally:
            driver.close()
        assert result.changed == frozenset({"b"})  # the step dry run forces a recreate
        assert sleeps, "the 409 was retried"
    finally:
        slow.join(60)


def test_the_operation_deadline_kills_compose(docker_engine: DockerEngine, tmp_path: Path) -> None:
    """An agent with a 2 s operation deadline: the down of a service that takes 5 s to stop
    ends at the deadline with exit 124, logged as timed out; the project is free again."""
    h = Host(docker_engine, tmp_path, "--operation-timeout-s", "2")
    try:
        h.tag("v1", {"slow": STUBBORN})
        h.agent.start()
        assert _exit(h.up("v1", ["slow"])) == 0
        started = time.monotonic()
        body = {"tag": "v1", "file": "compose.yaml", "services": ["slow"], "env": {}}
        resp = h.post("/compose/down", body | {"volumes": False})
        took = time.monotonic() - started
        events = [json.loads(x) for x in resp.text.splitlines()]
        assert _exit(events) == 124
        assert "operation deadline" in events[-2]["line"]
        assert took < 5  # before the 5 s the stop alone takes
        assert h.agent.records()[-1]["timed_out"] is True
        assert _exit(h.up("v1", ["slow"], dry_run=True)) == 0  # no 409: the project is free
    finally:
        h.close()


def _compose_children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _deployment(host: Host, tag: str) -> Deployment:
    """The ``new`` side at ``tag``, read back through the agent's ``GET /files``."""
    got = host.client.get("/files", params={"tag": tag, "file": "compose.yaml"}).json()
    services = load_services(got["text"], "compose.yaml").services
    ref = SourceRef(
        spec=f"git:{tag}:compose.yaml", path="compose.yaml", git_ref=tag, sha256=got["sha256"]
    )
    return Deployment(side="new", ref=ref, text=got["text"], services=services)


def test_an_agent_killed_mid_operation_leaves_a_log_that_says_so_and_a_retry_converges(
    host: Host,
) -> None:
    """SIGKILL the agent while its compose run stops a slow service: compose dies with it (no
    orphan keeps changing the host), the restarted agent logs the operation as interrupted,
    and the driver's retry of the (idempotent) down + up brings NEW up."""
    host.tag("v1", {"slow": STUBBORN})
    host.tag("v2", {"slow": {**STUBBORN, "labels": {"v": "2"}}})
    host.agent.start()
    assert _exit(host.up("v1", ["slow"])) == 0
    failures: list[BaseException] = []
    driver = ComposeManagerDriver(
        host.agent.url,
        TOKEN,
        {"new": Target("v2", "compose.yaml")},
        backoff_s=2.0,
        attempts=5,
    )
    dep = _deployment(host, "v2")

    def apply() -> None:
        try:
            driver.apply(dep, ["slow"])
        except BaseException as exc:  # reported below
            failures.append(exc)

    worker = threading.Thread(target=apply)
    worker.start()
    try:
        assert wait_until(lambda: len(host.agent.records()) >= 3, 30, poll_s=0.05)
        assert host.agent.proc is not None
        pid = host.agent.proc.pid
        assert wait_until(lambda: _compose_children(pid) != [], 30, poll_s=0.05)
        kids = _compose_children(pid)
        host.agent.kill()
        assert wait_until(lambda: not any(Path(f"/proc/{k}").exists() for k in kids), 30)
        host.agent.start()
    finally:
        worker.join(120)
        driver.close()
    assert failures == []
    records = host.agent.records()
    interrupted = [r for r in records if r["event"] == "interrupted"]
    assert [r["operation"] for r in interrupted] == ["down"]
    fmt = '{{.State.Running}} {{index .Config.Labels "v"}}'
    seen = host.engine.docker("inspect", "-f", fmt, f"{PROJECT}-slow-1").stdout.split()
    assert seen == ["true", "2"]


def test_a_real_engine_container_is_recreated_with_its_new_argv(host: Host) -> None:
    """``tierctl sim serve`` in a container (the tiny image, this machine's Python mounted
    read-only, host networking): up through the agent, healthy; v2 changes one engine flag and
    the driver's apply recreates it: a new container whose server reports the new value."""
    port = free_port()
    mounts = python_mounts()
    src = str(Path(__file__).resolve().parents[2] / "src")

    def engine_service(interval: int) -> dict[str, Any]:
        return {
            "image": TINY_IMAGE,
            "network_mode": "host",
            "volumes": mounts,
            "environment": {"PYTHONPATH": src, "HOME": "/tmp"},
            # The venv's python (not its target): the venv is found from its path.
            "entrypoint": [sys.executable, "-m", "tierctl", "sim", "serve"],
            "command": [
                "--time-scale",
                "100",
                "--",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--model-path",
                "/models/tiny",
                "--prefill-decode-interval",
                str(interval),
            ],
            "stop_grace_period": "5s",
        }

    host.tag("v1", {"engine": engine_service(1)})
    host.tag("v2", {"engine": engine_service(2)})
    host.agent.start()

    def info() -> dict[str, Any] | None:
        try:
            resp = httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=2)
        except httpx.HTTPError:
            return None
        return resp.json() if resp.status_code == 200 else None

    assert _exit(host.up("v1", ["engine"])) == 0
    assert wait_until(lambda: info() is not None, 90, poll_s=0.3)
    assert (info() or {})["prefill_decode_interval"] == 1
    before = host.engine.docker("inspect", "-f", "{{.Id}}", f"{PROJECT}-engine-1").stdout
    driver = ComposeManagerDriver(host.agent.url, TOKEN, {"new": Target("v2", "compose.yaml")})
    try:
        dep = _deployment(host, "v2")
        assert driver.dry_run(dep, ["engine"]).changed == frozenset({"engine"})
        driver.apply(dep, ["engine"])
    finally:
        driver.close()
    after = host.engine.docker("inspect", "-f", "{{.Id}}", f"{PROJECT}-engine-1").stdout
    assert after != before
    assert wait_until(lambda: (info() or {}).get("prefill_decode_interval") == 2, 90, poll_s=0.3)


def test_a_wrong_token_is_named_by_the_driver(host: Host) -> None:
    host.tag("v1", {"a": _service()})
    host.agent.start()
    driver = ComposeManagerDriver(host.agent.url, "wrong", {"new": Target("v1", "compose.yaml")})
    try:
        with pytest.raises(RuntimeFailure, match="refused the token"):
            driver.dry_run(_deployment(host, "v1"), ["a"])
    finally:
        driver.close()


def test_the_agent_speaks_tls_with_its_certificate(
    docker_engine: DockerEngine, tmp_path: Path
) -> None:
    """--tls-cert/--tls-key: the agent answers https (a client trusting that certificate
    gets the file), and plain http on that port gets no answer."""
    cert, key = tmp_path / "agent.pem", tmp_path / "agent.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
         "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    h = Host(docker_engine, tmp_path, "--tls-cert", str(cert), "--tls-key", str(key))
    h.agent.url = h.agent.url.replace("http://", "https://")
    try:
        h.tag("v1", {"a": _service()})
        trust = ssl.create_default_context(cafile=str(cert))
        h.agent.start(verify=trust)
        with httpx.Client(verify=trust, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            got = c.get(f"{h.agent.url}/files", params={"tag": "v1", "file": "compose.yaml"})
        assert got.status_code == 200
        assert got.json()["file"] == "compose.yaml"
        with pytest.raises(httpx.HTTPError):
            httpx.get(h.agent.url.replace("https://", "http://") + "/health", timeout=5)
    finally:
        h.close()


def test_an_override_file_is_merged_over_the_file_on_a_real_engine(host: Host) -> None:
    """#37: base + override. The override relabels `a` and names its container; the dry run
    reads the container name from the merged files (`changes` names `a`), the up runs both
    files, and the container carries the override's label."""
    override = yaml.safe_dump(
        {"services": {"a": {"labels": {"layer": "override"}, "container_name": "agenttest-over-a"}}}
    )
    host.tag("v1", {"a": _service(labels={"layer": "base"})}, **{"override.yaml": override})
    host.agent.start()
    layered = {"overrides": ["override.yaml"]}
    dry = host.up("v1", ["a"], dry_run=True, force_recreate=True, **layered)
    assert _exit(dry) == 0
    assert [e for e in dry if e["type"] == "changes"] == [
        {"type": "changes", "services": ["a"], "removed": []}
    ]
    assert _exit(host.up("v1", ["a"], **layered)) == 0
    assert host.engine.containers() == ["agenttest-over-a"]
    label = host.engine.docker(
        "inspect", "-f", '{{index .Config.Labels "layer"}}', "agenttest-over-a"
    )
    assert label.stdout.strip() == "override"
    assert [r.get("overrides") for r in host.agent.records() if r["event"] == "begin"] == [
        ["override.yaml"],
        ["override.yaml"],
    ]
    bad = host.post("/compose/up", {"tag": "v1", "file": "compose.yaml", "services": ["a"],
                                    "env": {}, "force_recreate": False, "dry_run": False,
                                    "overrides": ["missing.yaml"]})  # fmt: skip
    assert bad.status_code == 404, bad.text
    host.engine.docker("rm", "-f", "agenttest-over-a", check=False)
