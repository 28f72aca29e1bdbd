"""Between waves: the manual approval (exit 4, recorded, in order), the pause, the rollback of
a failed wave, one machine listed once; and the same through ``tierctl rollout --fleet``, with
each host's executor standing in (the real agents: tests/integration/test_fleet_demo.py)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.conftest import CliResult
from tests.unit.rollout.test_fleet import Hosts, _plan

from tierctl.errors import GateFailed, InputError
from tierctl.rollout.drivers.base import HostUnreachable
from tierctl.rollout.executor import RolloutResult
from tierctl.rollout.fleet import (
    Approval,
    FleetHost,
    FleetJournal,
    FleetPolicy,
    approver,
    load_fleet,
    run_fleet,
)


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_an_approval_stops_each_later_wave_until_that_wave_is_approved(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 5)  # waves: [gpu00], [gpu01, gpu02], [gpu03, gpu04]
    journal = tmp_path / "j.jsonl"
    policy = FleetPolicy(approval=True)
    hosts = Hosts(fail=set())
    result = run_fleet(plan, journal, hosts, policy=policy)
    assert result.awaiting == 2
    assert [c[0] for c in hosts.calls] == ["gpu00"]
    last = _events(journal)[-1]
    assert (last["event"], last["wave"], last["hosts"]) == (
        "awaiting-approval",
        2,
        ["gpu01", "gpu02"],
    )

    # Resuming without an approval changes nothing and writes nothing.
    before = journal.read_text()
    result = run_fleet(plan, journal, hosts, resume=True, policy=policy)
    assert result.awaiting == 2
    assert journal.read_text() == before
    assert [c[0] for c in hosts.calls] == ["gpu00"]

    # Turning approvals off does not skip the awaited one.
    with pytest.raises(InputError, match="awaits approval") as off:
        run_fleet(plan, journal, hosts, resume=True, policy=FleetPolicy(approval=False))
    assert off.value.exit_code == 2
    assert journal.read_text() == before
    # Out of order: refused, located at the journal, naming the wave it awaits.
    with pytest.raises(InputError, match="awaits approval for wave 2") as info:
        run_fleet(plan, journal, hosts, resume=True, policy=policy, approve=Approval(3, "ana"))
    assert info.value.exit_code == 2
    assert info.value.location is not None
    assert info.value.location.file == str(journal)
    assert journal.read_text() == before
    # Without resume: refused too.
    with pytest.raises(InputError, match="already exists"):
        run_fleet(plan, journal, hosts, policy=policy, approve=Approval(2, "ana"))

    result = run_fleet(
        plan, journal, hosts, resume=True, policy=policy, approve=Approval(2, "ana", "readout ok")
    )
    assert result.awaiting == 3
    assert [c[0] for c in hosts.calls] == ["gpu00", "gpu01", "gpu02"]
    approved = [e for e in _events(journal) if e["event"] == "approved"]
    assert [(e["wave"], e["by"], e["note"]) for e in approved] == [(2, "ana", "readout ok")]
    assert approved[0]["at"].endswith("+00:00")
    # The approval was recorded before its wave began.
    kinds = [(e["event"], e.get("wave")) for e in _events(journal)]
    assert kinds.index(("approved", 2)) < kinds.index(("wave-begin", 2))
    # An approval already given cannot be given again.
    with pytest.raises(InputError, match="awaits approval for wave 3"):
        run_fleet(plan, journal, hosts, resume=True, policy=policy, approve=Approval(2, "ana"))

    # Approving wave 3 with approvals off from here on: recorded, and no further stop.
    result = run_fleet(
        plan, journal, hosts, resume=True, policy=FleetPolicy(approval=False),
        approve=Approval(3, "bo"),
    )  # fmt: skip
    assert result.awaiting is None
    assert not result.halted
    assert _events(journal)[-1]["event"] == "completed"
    assert len(hosts.calls) == 5
    # Nothing awaits now: an approval is refused with what the journal says.
    with pytest.raises(InputError, match=r"nothing awaits approval.*completed"):
        run_fleet(plan, journal, hosts, resume=True, policy=policy, approve=Approval(3, "bo"))


def test_a_pause_between_waves_is_waited_and_journaled(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 3)  # waves: [gpu00], [gpu01, gpu02]
    journal = tmp_path / "j.jsonl"
    slept: list[float] = []
    hosts = Hosts(fail=set())
    run_fleet(plan, journal, hosts, policy=FleetPolicy(pause_s=90.0), sleep=slept.append)
    assert slept == [90.0]  # between the two waves only
    kinds = [e["event"] for e in _events(journal)]
    assert kinds.index("pause") == kinds.index("wave-done") + 1
    assert kinds[kinds.index("pause") + 1] == "wave-begin"


class Rollbacks:
    """A rollback runner that records the hosts it returned to OLD."""

    def __init__(self, fail: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.hosts: list[str] = []
        self.fail = fail

    def __call__(self, host: FleetHost) -> RolloutResult:
        self.hosts.append(host.name)
        if host.name in self.fail:
            raise GateFailed(f"{host.name}: OLD did not come back")
        return RolloutResult(outcomes=(), journal=None)


def test_a_failed_wave_returns_its_finished_hosts_to_old(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 5, max_parallel=2)  # waves: [gpu00], [gpu01, gpu02], [gpu03, gpu04]
    journal = tmp_path / "j.jsonl"
    back = Rollbacks()
    result = run_fleet(plan, journal, Hosts(fail={"gpu02"}), rollback_host=back)
    assert result.halted
    # gpu01 (same wave, finished) goes back; gpu00 (an earlier wave, passed) keeps NEW; the
    # failed host was rolled back by its own executor; wave 3 was never touched.
    assert back.hosts == ["gpu01"]
    assert result.status == {"gpu00": "done", "gpu01": "rolled-back", "gpu02": "failed"}
    kinds = [(e["event"], e.get("host")) for e in _events(journal)]
    assert kinds[-3:] == [
        ("host-rollback-begin", "gpu01"), ("host-rolled-back", "gpu01"), ("halted", None),
    ]  # fmt: skip
    # A rolled-back wave is not resumed (its hosts' journals say done; they are on OLD).
    with pytest.raises(InputError, match="rolled back to OLD"):
        run_fleet(plan, journal, Hosts(fail=set()), resume=True)


class Silent(Hosts):
    """A host runner whose ``silent`` hosts stop answering (their agent never answers)."""

    def __init__(self, silent: set[str], fail: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        super().__init__(set(fail))
        self.silent = silent

    def __call__(self, host: FleetHost, plan: Any, resume: bool) -> RolloutResult:
        if host.name in self.silent:
            raise HostUnreachable(f"{host.name}: the agent never answered")
        return super().__call__(host, plan, resume)


def test_a_host_that_stopped_answering_halts_without_rolling_its_wave_back(
    tmp_path: Path,
) -> None:
    """Nothing says NEW is bad on a host whose agent never answered: the wave's other hosts
    keep NEW, the fleet halts naming the host, and a resume (once it answers) converges it."""
    plan = _plan(tmp_path, 5, max_parallel=2)  # waves: [gpu00], [gpu01, gpu02], [gpu03, gpu04]
    journal = tmp_path / "j.jsonl"
    back = Rollbacks()
    result = run_fleet(plan, journal, Silent({"gpu02"}), rollback_host=back)
    assert result.halted
    assert back.hosts == []
    assert result.status == {"gpu00": "done", "gpu01": "done", "gpu02": "failed"}
    assert result.unreachable == {"gpu02"}
    failed = [e for e in _events(journal) if e["event"] == "host-failed"]
    assert [(e["host"], e["unreachable"]) for e in failed] == [("gpu02", True)]
    again = Hosts(fail=set())
    resumed = run_fleet(plan, journal, again, resume=True, rollback_host=back)
    assert not resumed.halted
    assert [h for h, _ in again.calls] == ["gpu02", "gpu03", "gpu04"]
    # A host that answered and failed beside a silent one: NEW was judged, the wave goes back.
    back = Rollbacks()
    mixed = run_fleet(
        plan, tmp_path / "k.jsonl", Silent({"gpu02"}, fail={"gpu01"}), rollback_host=back
    )
    assert mixed.halted
    assert mixed.unreachable == {"gpu02"}
    assert mixed.status["gpu01"] == "failed"


def test_halt_only_keeps_the_wave_and_a_failed_rollback_is_reported(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 5, max_parallel=2)
    back = Rollbacks()
    result = run_fleet(
        plan, tmp_path / "a.jsonl", Hosts(fail={"gpu02"}), rollback_host=back,
        policy=FleetPolicy(max_parallel=2, on_failure="halt"),
    )  # fmt: skip
    assert back.hosts == []
    assert result.status["gpu01"] == "done"
    back = Rollbacks(fail={"gpu01"})
    result = run_fleet(plan, tmp_path / "b.jsonl", Hosts(fail={"gpu02"}), rollback_host=back)
    assert result.status["gpu01"] == "rollback-failed"
    assert "OLD did not come back" in result.errors["gpu01"]
    assert "host-rollback-failed" in [e["event"] for e in _events(tmp_path / "b.jsonl")]


def test_a_journal_for_other_waves_is_refused(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    run_fleet(_plan(tmp_path, 3), journal, Hosts(fail={"gpu01"}))
    with pytest.raises(InputError, match="not the ones its journal began with"):
        run_fleet(_plan(tmp_path, 5), journal, Hosts(fail=set()), resume=True)


def test_the_approver_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERCTL_APPROVER", "ana")
    assert approver() == "ana"
    monkeypatch.delenv("TIERCTL_APPROVER")
    for name in ("USER", "LOGNAME", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, "bo")
    assert approver() == "bo"


def test_one_machine_listed_twice_is_refused_with_its_line(tmp_path: Path) -> None:
    hosts = [
        {"name": "gpu02", "file": "a.yaml", "agent_url": "http://gpu02:8765"},
        {"name": "gpu02b", "file": "b.yaml", "agent_url": "http://GPU02:8765/"},
    ]
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"fleet": "f", "old": "a", "new": "b", "hosts": hosts}))
    with pytest.raises(InputError, match="gpu02 and gpu02b reach the same agent") as info:
        load_fleet(path)
    assert info.value.location is not None
    assert info.value.location.path == "hosts.1.agent_url"
    assert info.value.location.line is not None


# --- the command line ------------------------------------------------------------------------

COMPOSE = "services:\n  r1:\n    image: busybox:1\n    command: [sleep, '{n}']\n"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@example.invalid", "-c", "user.name=t",
         *args], check=True, capture_output=True,
    )  # fmt: skip


@pytest.fixture
def fleet_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three hosts in a git repository (v1 -> v2 changes r1 on each), approval between waves."""
    repo = tmp_path / "deploy"
    repo.mkdir()
    _git(repo, "init", "-q")
    for tag, n in (("v1", 1), ("v2", 2)):
        for h in ("h1", "h2", "h3"):
            (repo / h).mkdir(exist_ok=True)
            (repo / h / "compose.yaml").write_text(COMPOSE.format(n=n))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", tag)
        _git(repo, "tag", tag)
    doc = {
        "fleet": "tiny", "repo": "deploy", "old": "v1", "new": "v2",
        "hosts": [
            {"name": h, "file": f"{h}/compose.yaml", "agent_url": f"http://127.0.0.1:{9000 + i}",
             "labels": {"role": "canary" if h == "h1" else "control"}}
            for i, h in enumerate(("h1", "h2", "h3"))
        ],
        "waves": {"size": 2, "max_parallel": 2, "approval": True},
    }  # fmt: skip
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setenv("TIERCTL_AGENT_TOKEN", "tok-SECRET")
    return path


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Each host's executor stands in: records (agent URL, plan target) and passes."""
    calls: list[tuple[str, str]] = []

    def run_rollout(plan: Any, driver: Any, *_a: Any, **_k: Any) -> RolloutResult:
        calls.append((str(driver._client.base_url).rstrip("/"), plan.target.spec))
        return RolloutResult(outcomes=(), journal=None)

    monkeypatch.setattr("tierctl.rollout.entrypoints.run_rollout", run_rollout)
    return calls


def test_rollout_fleet_stops_for_approval_with_exit_4_then_approves_in_order(
    fleet_file: Path,
    executed: list[tuple[str, str]],
    run_cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIERCTL_APPROVER", "ana")
    first = run_cli("rollout", "--fleet", str(fleet_file))
    assert first.code == 4, first.err
    assert "awaiting approval for wave 2" in first.out
    assert f"--fleet {fleet_file} --resume --approve-wave 2" in first.out
    assert [u for u, _ in executed] == ["http://127.0.0.1:9000"]
    journal = fleet_file.with_suffix(".journal.jsonl")
    early = run_cli("rollout", "--fleet", str(fleet_file), "--resume", "--approve-wave", "3")
    assert early.code == 2
    assert "wave 3 cannot be approved: the fleet awaits approval for wave 2" in early.err
    assert str(journal) in early.err
    assert "Traceback" not in early.err
    # The alias is the same command.
    done = run_cli("fleet", "rollout", str(fleet_file), "--resume", "--approve-wave", "2",
                   "--note", "canary readout passed")  # fmt: skip
    assert done.code == 0, done.err
    assert sorted(u for u, _ in executed) == [f"http://127.0.0.1:{p}" for p in (9000, 9001, 9002)]
    approved = [e for e in FleetJournal(journal).records() if e["event"] == "approved"]
    assert [(e["wave"], e["by"], e["note"]) for e in approved] == [
        (2, "ana", "canary readout passed")
    ]
    assert "tok-SECRET" not in journal.read_text()


def test_rollout_fleet_refuses_one_host_options_and_the_other_way_round(
    fleet_file: Path, run_cli: Callable[..., CliResult]
) -> None:
    mixed = run_cli("rollout", "--fleet", str(fleet_file), "--agent-url", "http://x:1")
    assert mixed.code == 2
    assert "--agent-url: not with --fleet" in mixed.err
    alone = run_cli("rollout", "--driver", "local", "--approve-wave", "2", "--plan", "p.json")
    assert alone.code == 2
    assert "--approve-wave: only with --fleet" in alone.err
    neither = run_cli("rollout")
    assert neither.code == 2
    assert "or --fleet FLEET" in neither.err
    plan_both = run_cli("plan", "--fleet", str(fleet_file), "--from", "a.yaml")
    assert plan_both.code == 2
    assert "--from: not with --fleet" in plan_both.err


def test_plan_and_runbook_fleet_show_the_waves_hosts_steps_and_approvals(
    fleet_file: Path, run_cli: Callable[..., CliResult]
) -> None:
    shown = run_cli("plan", "--fleet", str(fleet_file))
    assert shown.code == 0, shown.err
    assert "3 hosts in 2 waves, at most 2 at once" in shown.out
    assert "a manual approval" in shown.out
    assert "wave 1:\n  h1 (h1/compose.yaml): 01-recreate-r1" in shown.out
    as_json = json.loads(run_cli("plan", "--fleet", str(fleet_file), "--format", "json").out)
    assert [[h["host"] for h in w] for w in as_json["waves"]] == [["h1"], ["h2", "h3"]]
    assert as_json == json.loads(run_cli("fleet", "plan", str(fleet_file), "--format", "json").out)
    book = run_cli("runbook", "--fleet", str(fleet_file))
    assert book.code == 0, book.err
    text = book.out
    assert text.startswith("# Fleet runbook: tiny (v1 → v2)")
    assert "| 1 (canary) | h1 | **stop: approve wave 2** |" in text
    assert "--resume --approve-wave 2" in text
    assert "### Wave 2, h3: `h3/compose.yaml`" in text
    assert "http://127.0.0.1:9002/compose/up" in text  # each host's steps call its own agent
    assert "`awaiting-approval` | wave, hosts" in text
    assert "tok-SECRET" not in text
    out = fleet_file.parent / "fleet.md"
    assert run_cli("runbook", "--fleet", str(fleet_file), "-o", str(out)).code == 0
    assert out.read_text().rstrip() == text.rstrip()
    out.write_text("my notes\n")
    refused = run_cli("runbook", "--fleet", str(fleet_file), "-o", str(out))
    assert refused.code == 2
    assert out.read_text() == "my notes\n"


def test_a_host_is_never_changed_twice_at_once_rollback_included(tmp_path: Path) -> None:
    """Across its rollout and its wave's rollback, one host has one operation in flight."""
    import threading

    plan = _plan(tmp_path, 7, max_parallel=3)  # waves: [gpu00], [gpu01, gpu02], ...
    lock = threading.Lock()
    busy: set[str] = set()
    overlaps: list[str] = []

    def enter(name: str) -> None:
        with lock:
            if name in busy:
                overlaps.append(name)
            busy.add(name)

    def leave(name: str) -> None:
        with lock:
            busy.discard(name)

    def run_host(host: FleetHost, _plan: Any, _resume: bool) -> RolloutResult:
        enter(host.name)
        try:
            if host.name == "gpu02":
                raise GateFailed("gpu02: failed")
            return RolloutResult(outcomes=(), journal=None)
        finally:
            leave(host.name)

    def rollback(host: FleetHost) -> RolloutResult:
        enter(host.name)
        leave(host.name)
        return RolloutResult(outcomes=(), journal=None)

    result = run_fleet(
        plan, tmp_path / "j.jsonl", run_host, rollback_host=rollback,
        policy=FleetPolicy(max_parallel=3),
    )  # fmt: skip
    assert result.status["gpu01"] == "rolled-back"
    assert overlaps == []


def test_a_token_file_hosts_runbook_calls_read_its_file(
    fleet_file: Path, run_cli: Callable[..., CliResult]
) -> None:
    doc = yaml.safe_load(fleet_file.read_text())
    doc["hosts"][1]["token_file"] = "secrets/h2.token"
    fleet_file.write_text(yaml.safe_dump(doc))
    text = run_cli("runbook", "--fleet", str(fleet_file)).out
    h2 = text[text.index("### Wave 2, h2") : text.index("### Wave 2, h3")]
    assert 'Bearer $(cat secrets/h2.token)"' in h2
    assert "$TIERCTL_AGENT_TOKEN" not in h2


def test_readout_refuses_fleet_options_without_fleet(run_cli: Callable[..., CliResult]) -> None:
    got = run_cli("readout", "--spec", "t.yaml", "--prometheus", "http://x:1", "--since", "5")
    assert got.code == 2
    assert "--since: only with --fleet" in got.err
    bare = run_cli("readout")
    assert bare.code == 2
    assert "or --fleet FLEET" in bare.err


def test_rollout_fleet_dry_run_writes_no_journal_and_the_real_run_starts_with_the_canary(
    fleet_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: Callable[..., CliResult],
) -> None:
    """The severe #37 case: a fleet dry run wrote `host-done` for the canary into the real
    journal, the real run was refused, and `--resume` then skipped the canary host."""
    calls: list[tuple[str, bool]] = []

    def run_rollout(plan: Any, driver: Any, _old: Any, _new: Any, options: Any, **_k: Any) -> Any:
        calls.append((str(driver._client.base_url).rstrip("/"), options.dry_run))
        return RolloutResult(outcomes=(), journal=None)

    monkeypatch.setattr("tierctl.rollout.entrypoints.run_rollout", run_rollout)
    monkeypatch.setenv("TIERCTL_APPROVER", "ana")
    journal = fleet_file.with_suffix(".journal.jsonl")
    dry = run_cli("rollout", "--fleet", str(fleet_file), "--dry-run")
    assert dry.code == 0, dry.err
    assert not journal.exists()
    assert "h1: checked" in dry.out
    assert "h3: checked" in dry.out
    assert "the real run stops before wave 2 for its approval" in dry.err
    assert f"to roll out: tierctl rollout --fleet {fleet_file}\n" in dry.out
    # Every host was dry-run, the canary first (wave 2's two run at once), nothing for real.
    assert calls[0] == ("http://127.0.0.1:9000", True)
    assert sorted(calls[1:]) == [(f"http://127.0.0.1:{p}", True) for p in (9001, 9002)]
    calls.clear()
    real = run_cli("rollout", "--fleet", str(fleet_file))  # no --resume: no journal was left
    assert real.code == 4, real.err
    assert calls == [("http://127.0.0.1:9000", False)]
    # A dry run in the middle of the real run leaves its journal as it was.
    before = journal.read_bytes()
    again = run_cli("rollout", "--fleet", str(fleet_file), "--dry-run")
    assert again.code == 0, again.err
    assert journal.read_bytes() == before
    assert "--resume" in again.out
    refused = run_cli(
        "rollout", "--fleet", str(fleet_file), "--dry-run", "--resume", "--approve-wave", "2"
    )
    assert refused.code == 2
    assert "cannot be approved by a dry run" in refused.err


def test_a_fleet_host_with_an_override_file_plans_and_rolls_out_both_files(
    fleet_file: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., CliResult]
) -> None:
    """#37: base + override projects in a fleet. Only h2 merges an override, which relabels
    its r1 between o1 and o2: its plan sees the change, its agent calls name both files."""
    repo = fleet_file.parent / "deploy"
    for tag, label in (("o1", "a"), ("o2", "b")):
        (repo / "h2" / "override.yaml").write_text(
            f"services:\n  r1:\n    labels: {{v: {label}}}\n"
        )
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", tag)
        _git(repo, "tag", tag)
    doc = yaml.safe_load(fleet_file.read_text())
    doc.update(old="o1", new="o2")
    doc["hosts"][1]["overrides"] = ["h2/override.yaml"]
    doc["waves"]["approval"] = False
    fleet_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    shown = run_cli("plan", "--fleet", str(fleet_file))
    assert shown.code == 0, shown.err
    assert "h2 (h2/compose.yaml + h2/override.yaml): 01-recreate-r1" in shown.out
    assert "h1 (h1/compose.yaml): nothing to change" in shown.out
    book = run_cli("runbook", "--fleet", str(fleet_file)).out
    assert "### Wave 2, h2: `h2/compose.yaml` + `h2/override.yaml`" in book
    assert '"file": "h2/compose.yaml", "overrides": ["h2/override.yaml"]' in book
    seen: list[dict[str, Any]] = []

    def run_rollout(plan: Any, driver: Any, old: Any, new: Any, *_a: Any, **_k: Any) -> Any:
        seen.append({"target": driver._targets["new"].body(), "services": new.services})
        return RolloutResult(outcomes=(), journal=None)

    monkeypatch.setattr("tierctl.rollout.entrypoints.run_rollout", run_rollout)
    done = run_cli("rollout", "--fleet", str(fleet_file))
    assert done.code == 0, done.err
    h2 = next(s for s in seen if s["target"]["file"] == "h2/compose.yaml")
    assert h2["target"] == {
        "tag": "o2",
        "file": "h2/compose.yaml",
        "overrides": ["h2/override.yaml"],
    }
    assert h2["services"]["r1"]["labels"] == {"v": "b"}  # the side as both files merge it
