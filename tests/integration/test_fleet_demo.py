"""``tierctl demo --fleet`` end to end on real dockerds, one per host, each with its own real
``tierctl agent``: the plan, wave 1 on the canary host stopping for approval, the fleet readout
on a real Prometheus, the approval recorded, wave 2, and nothing left running after."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from tests.docker_engine import require_docker
from tests.integration.prometheus import needs_prometheus
from tierctl.demo.fleet import HOSTS, run_fleet_demo

pytestmark = [pytest.mark.integration, pytest.mark.slow, needs_prometheus]


def _ours() -> set[int]:
    """Pids of dockerds and agents the fleet demo starts (their folders are tierctl-gpuNN-*)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"tierctl-demo-fleet-" in a or b"/tmp/tierctl-gpu0" in a for a in argv):
            found.add(int(entry.name))
    return found


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> tuple[bool, str, Path]:
    require_docker()
    before = _ours()
    workdir = tmp_path_factory.mktemp("tierctl-demo-fleet-")
    console = Console(record=True, width=160, force_terminal=False)
    os.environ.setdefault("TIERCTL_APPROVER", "test-operator")
    ok = run_fleet_demo(console, workdir)
    assert _ours() - before == set(), "the fleet demo left processes running"
    return ok, console.export_text(), workdir


def test_the_three_host_story_runs_end_to_end(story: tuple[bool, str, Path]) -> None:
    ok, text, _ = story
    assert ok, text[-3000:]
    for line in (
        "awaiting approval for wave 2",
        "design: between-hosts",
        "verdict: PASS",
        "wave 2 approved by",
    ):
        assert line in text, line
    for host in HOSTS:
        assert f"{host}: --prefill-decode-interval 2" in text
        assert f"{host}: removed 1 container(s); nothing left" in text


def test_the_journal_records_the_waves_and_the_approval_in_order(
    story: tuple[bool, str, Path],
) -> None:
    _, _, workdir = story
    events = [json.loads(x) for x in (workdir / "fleet.journal.jsonl").read_text().splitlines()]
    kinds = [(e["event"], e.get("wave"), e.get("host")) for e in events]
    assert kinds.index(("host-done", None, "gpu02")) < kinds.index(("awaiting-approval", 2, None))
    approved = next(e for e in events if e["event"] == "approved")
    assert approved["wave"] == 2
    assert approved["by"]
    assert approved["note"] == "fleet readout: pass"
    assert kinds.index(("approved", 2, None)) < kinds.index(("wave-begin", 2, None))
    assert kinds[-1][0] == "completed"
    # Tokens live in the environment only: never in the journal or the files the demo wrote.
    tokens = [os.environ[f"TIERCTL_AGENT_TOKEN_{h.upper()}"] for h in HOSTS]
    for path in workdir.rglob("*.json*"):
        text = path.read_text(errors="replace")
        assert not any(t in text for t in tokens), path
