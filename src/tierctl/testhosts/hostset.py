"""N simulated hosts, each a network namespace with its own address, dockerd and agent.

:class:`HostSet` is what a test module or an operator's demo opens once::

    with HostSet(["h1", "h2", "h3"], repo=Path("deploy")) as hosts:
        hosts["h1"].agent_url          # http://10.X.Y.11:8765, from this machine
        hosts.network.cut("h2")        # h2 unreachable; hosts.network.mend("h2")
        hosts["h3"].kill_agent()       # SIGKILL by pid; hosts["h3"].start_agent()

Each host gets: a namespace on a bridge of its own (:class:`~tierctl.testhosts.netns.HostNetwork`),
a dockerd started in it with ``ip netns exec`` (:class:`~tierctl.testhosts.dockerd.HostDockerd`)
with the tiny image imported, and ``tierctl agent serve`` started in it, listening on the
host's address, serving the deployment repository ``repo`` (the token in its environment,
never argv). Everything is stopped by pid on :meth:`HostSet.close` (which a ``with`` calls
even after a failure): the agents, the dockerds, then whatever is still inside a namespace
(containerd, shims, containers), then the namespaces and the bridge. A state file
(``/tmp/tierctl-hosts-TAG/state.json``) names what was made, so a set whose owner died (a
killed test run) is cleaned up by the next :class:`HostSet` to open (:func:`sweep_stale`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import httpx

from tierctl.errors import RuntimeFailure
from tierctl.readers import read_text
from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import ServerProcess, log_tail
from tierctl.testhosts.dockerd import HostDockerd
from tierctl.testhosts.netns import HostLink, HostNetwork, in_netns, ip

#: The agents' port, the same on every host (each has its own address).
AGENT_PORT = 8765
_STATE_GLOB = "tierctl-hosts-*"


@dataclass
class NetnsHost:
    """One simulated host: its link, its dockerd, its agent (a process by pid)."""

    name: str
    link: HostLink
    dockerd: HostDockerd
    repo: Path
    state: Path
    token: str = field(repr=False)
    agent: ServerProcess | None = None
    agent_args: tuple[str, ...] = ()

    @property
    def address(self) -> str:
        """The host's address (from this machine and from the other hosts)."""
        return self.link.address

    @property
    def agent_url(self) -> str:
        """The agent's URL."""
        return f"http://{self.address}:{AGENT_PORT}"

    def start_agent(self, timeout_s: float = 60.0) -> None:
        """Start ``tierctl agent serve`` in the namespace and wait for its /health.

        Raises:
            RuntimeFailure: it exited or did not answer in ``timeout_s``.
        """
        self.launch_agent()
        self.wait_agent(timeout_s)

    def launch_agent(self) -> None:
        """Start the agent (the token in its environment, never argv); see :meth:`wait_agent`."""
        src = Path(__file__).resolve().parents[2]
        argv = [
            *in_netns(self.link.netns), sys.executable, "-m", "tierctl", "agent", "serve",
            "--projects-dir", str(self.repo), "--state-dir", str(self.state),
            "--listen", f"{self.address}:{AGENT_PORT}", *self.agent_args,
        ]  # fmt: skip
        env = {
            **self.dockerd.env(),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")])),
            "TIERCTL_AGENT_TOKEN": self.token,
        }
        self.state.mkdir(parents=True, exist_ok=True)
        log = self.state / f"agent-{time.time_ns()}.out"
        self.agent = ServerProcess(argv, log, env=env, name=f"agent on {self.name}")
        self.agent.start()

    def wait_agent(self, timeout_s: float = 60.0) -> None:
        """Wait for the agent's /health.

        Raises:
            RuntimeFailure: it exited or did not answer in ``timeout_s`` (its log's tail).
        """
        assert self.agent is not None, "launch_agent() first"
        self.agent.wait_ready(self._healthy, timeout_s, poll_s=0.1)

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"{self.agent_url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def kill_agent(self) -> None:
        """SIGKILL the agent by its pid, as a crash would; waits until it is gone."""
        if self.agent is not None and self.agent.proc is not None and self.agent.running():
            os.kill(self.agent.proc.pid, signal.SIGKILL)
            self.agent.proc.wait(timeout=30)

    def stop_agent(self) -> None:
        """SIGTERM the agent (its process group) and wait; idempotent."""
        if self.agent is not None:
            self.agent.stop(timeout_s=30)

    def oplog(self) -> list[dict[str, object]]:
        """The agent's operation log."""
        path = self.state / "operations.jsonl"
        if not path.exists():
            return []
        lines = read_text(path, what="operation log").splitlines()
        return [json.loads(x) for x in lines if x.strip()]


class HostSet:
    """Simulated hosts on one machine; a context manager that tears everything down."""

    def __init__(
        self,
        names: Sequence[str],
        repo: Path,
        *,
        agent_args: Sequence[str] = (),
        time_scale: float = 100.0,
    ) -> None:
        """Describe the set; nothing is made until :meth:`open` (or ``with``).

        Args:
            names: The hosts' names (short: they name namespaces).
            repo: The deployment repository every agent serves (a git checkout).
            agent_args: More ``tierctl agent serve`` options (``--operation-timeout-s 60``).
            time_scale: The simulated engine image's ``--time-scale``.
        """
        self.names = list(names)
        self.repo = repo
        self.agent_args = tuple(agent_args)
        self.time_scale = time_scale
        self.network = HostNetwork()
        self.root = Path(f"/tmp/tierctl-hosts-{self.network.tag}")
        self.hosts: dict[str, NetnsHost] = {}
        self.timings: dict[str, float] = {}

    def __getitem__(self, name: str) -> NetnsHost:
        """The host called ``name``."""
        return self.hosts[name]

    def __iter__(self) -> Iterator[NetnsHost]:
        """The hosts in order."""
        return iter(self.hosts.values())

    def __enter__(self) -> HostSet:
        """:meth:`open`; on a failure everything made so far is torn down."""
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """:meth:`close`."""
        self.close()

    def open(self) -> None:
        """Make the network, then per host its namespace, dockerd (tiny image in) and agent."""
        sweep_stale()
        self.root.mkdir(parents=True, exist_ok=False)
        started = time.monotonic()
        self.network.open()
        self._save_state()
        for name in self.names:
            link = self.network.add(name)
            dockerd = HostDockerd(name, link.netns, root=self.root / name)
            self.hosts[name] = NetnsHost(
                name=name,
                link=link,
                dockerd=dockerd,
                repo=self.repo,
                state=self.root / f"{name}-agent",
                token=f"tok-{name}-{secrets.token_hex(12)}",
                agent_args=self.agent_args,
            )
            self._save_state()
        self.timings["network_s"] = time.monotonic() - started
        started = time.monotonic()
        for host in self.hosts.values():
            host.dockerd.launch()
        for host in self.hosts.values():
            host.dockerd.wait_ready()
        self.timings["dockerd_s"] = time.monotonic() - started
        started = time.monotonic()
        tar: bytes | None = None
        src = Path(__file__).resolve().parents[2]
        for host in self.hosts.values():
            tar = host.dockerd.import_tiny(tar)
            host.dockerd.build_sim_engine(src, self.time_scale)
        self.timings["image_s"] = time.monotonic() - started
        started = time.monotonic()
        for host in self.hosts.values():
            host.launch_agent()
        for host in self.hosts.values():
            host.wait_agent()
        self.timings["agents_s"] = time.monotonic() - started

    def _save_state(self) -> None:
        state = {
            "owner": os.getpid(),
            "bridge": self.network.bridge,
            "netns": [link.netns for link in self.network.links.values()],
            "veth": [link.veth for link in self.network.links.values()],
        }
        (self.root / "state.json").write_text(json.dumps(state))

    def leftovers(self) -> list[str]:
        """What of this set still exists (empty after :meth:`close`): processes in its
        namespaces, the namespaces, the bridge."""
        out = []
        listed = ip("netns", "list", check=False).stdout.split()
        for netns in (f"tierctl-{self.network.tag}-{h}" for h in self.names):
            if netns in listed:
                got = ip("netns", "pids", netns, check=False).stdout.split()
                out += [f"pid {p} in {netns}" for p in got] or [f"namespace {netns}"]
        if ip("link", "show", self.network.bridge, check=False).returncode == 0:
            out.append(f"bridge {self.network.bridge}")
        return out

    def close(self) -> None:
        """Stop every agent and dockerd by pid, kill what is left inside the namespaces
        (by pid: ``ip netns pids``), delete the namespaces, the bridge and the folder.
        Idempotent; safe after a failed :meth:`open`."""
        for host in self.hosts.values():
            with contextlib.suppress(Exception):
                host.stop_agent()
        for host in self.hosts.values():
            with contextlib.suppress(Exception):
                host.dockerd.stop()
        for link in list(self.network.links.values()):
            _kill_inside(self.network, link.host)
        self.network.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def describe(self) -> str:
        """One line per host: name, address, agent URL, dockerd socket."""
        return "\n".join(
            f"{h.name}: {h.address} agent {h.agent_url} docker {h.dockerd.host}"
            for h in self.hosts.values()
        )

    def agent_log_tail(self, name: str) -> str:
        """The end of ``name``'s current agent log (for a failure message)."""
        agent = self.hosts[name].agent
        return log_tail(agent.log) if agent is not None else "(no agent)"


def _kill_inside(network: HostNetwork, host: str) -> None:
    """SIGKILL every process still in ``host``'s namespace (ours: we made the namespace)."""
    for _ in range(5):
        pids = network.pids(host)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not network.pids(host), 10, poll_s=0.1)


def sweep_stale() -> list[str]:
    """Tear down host sets whose owner process is gone (a killed run): their namespaces'
    processes (by pid), namespaces, bridge and folder. Returns what was swept."""
    swept = []
    for root in Path("/tmp").glob(_STATE_GLOB):
        try:
            state = json.loads(read_text(root / "state.json", what="host-set state"))
            owner = int(state["owner"])
        except Exception:  # a torn or foreign state file: not ours to sweep
            continue
        if Path(f"/proc/{owner}").exists():
            continue
        for netns in state.get("netns", []):
            got = ip("netns", "pids", str(netns), check=False).stdout
            for pid in (int(p) for p in got.split() if p.isdigit()):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            ip("netns", "del", str(netns), check=False)
        for veth in state.get("veth", []):
            ip("link", "del", str(veth), check=False)
        ip("link", "del", str(state.get("bridge", "")), check=False)
        from tierctl.testhosts.dockerd import unmount_below

        unmount_below(root)
        shutil.rmtree(root, ignore_errors=True)
        swept.append(str(root))
    return swept


def hosts_missing() -> str | None:
    """Why a :class:`HostSet` cannot be made here, or None."""
    from tierctl.testhosts.dockerd import dockerd_missing
    from tierctl.testhosts.netns import netns_missing

    return netns_missing() or dockerd_missing()


def stopped_cleanly(hosts: HostSet) -> RuntimeFailure | None:
    """None when nothing of ``hosts`` is left; else the error naming what is."""
    left = hosts.leftovers()
    if not left:
        return None
    return RuntimeFailure(
        f"simulated hosts left behind: {', '.join(left)}",
        rule="closing a host set stops everything it started",
        fix="stop them by pid and delete the namespaces (`ip netns del NAME`)",
    )
