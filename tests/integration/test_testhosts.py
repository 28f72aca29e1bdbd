"""The simulated hosts' own contract: what a host set makes is gone after it, even when it
fails half-way or its owner died (no dockerd needed: these stop before any starts)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tierctl.errors import RuntimeFailure
from tierctl.testhosts.hostset import HostSet, sweep_stale
from tierctl.testhosts.netns import HostNetwork, ip, netns_missing

pytestmark = [pytest.mark.integration]


@pytest.fixture(autouse=True)
def _needs_netns() -> None:
    why = netns_missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"cannot run in CI: {why}")
        pytest.skip(why)


def _exists(netns: str) -> bool:
    return netns in ip("netns", "list").stdout.split()


def test_a_set_that_fails_half_way_leaves_nothing(tmp_path: Path) -> None:
    """The second host's name cannot name a link: open fails after the bridge and the first
    namespace were made; the ``with`` deletes both and the folder."""
    hosts = HostSet(["h1", "x" * 80], tmp_path)
    with pytest.raises(RuntimeFailure, match="unusable namespace or link name"), hosts:
        pass
    assert hosts.leftovers() == []
    assert not _exists(f"tierctl-{hosts.network.tag}-h1")
    assert ip("link", "show", hosts.network.bridge, check=False).returncode != 0
    assert not hosts.root.exists()


def test_a_cut_link_answers_nothing_and_mends(tmp_path: Path) -> None:
    """Across the bridge a namespace's address answers (a TCP connect is refused: something
    answered); with its link down nothing does (a time-out or no route); mended, it answers
    again."""
    import socket

    net = HostNetwork()
    try:
        net.open()
        link = net.add("h1")

        def probe() -> str:
            with socket.socket() as sock:
                sock.settimeout(3)
                try:
                    sock.connect((link.address, 9))
                except ConnectionRefusedError:
                    return "refused"
                except OSError as exc:
                    return type(exc).__name__
            return "open"

        assert probe() == "refused"
        net.cut("h1")
        assert probe() != "refused"
        net.mend("h1")
        assert probe() == "refused"
    finally:
        net.close()
    assert not _exists(link.netns)


def test_a_set_whose_owner_died_is_swept(tmp_path: Path) -> None:
    """A state file naming a dead owner: the next sweep kills what runs in its namespace (by
    pid), deletes the namespace, the bridge and the folder."""
    net = HostNetwork()
    net.open()
    link = net.add("h1")
    root = Path(f"/tmp/tierctl-hosts-{net.tag}")
    root.mkdir()
    sleeper = subprocess.Popen(["nsenter", f"--net=/run/netns/{link.netns}", "--", "sleep", "600"])
    dead = subprocess.Popen(["true"])
    dead.wait()
    state = {"owner": dead.pid, "bridge": net.bridge, "netns": [link.netns], "veth": [link.veth]}
    (root / "state.json").write_text(json.dumps(state))
    try:
        assert str(root) in sweep_stale()
        assert sleeper.wait(timeout=30) == -9
        assert not _exists(link.netns)
        assert ip("link", "show", net.bridge, check=False).returncode != 0
        assert not root.exists()
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
        net.close()
