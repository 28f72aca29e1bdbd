"""A fleet dry run writes nothing a real run reads (#37): after any sequence of dry runs, real
runs, halts, resumes and approvals, the canary host is the first host changed for real, and no
host of a later wave changes before every host of the earlier waves is done. The hosts'
executors stand in (the real agents: tests/integration/test_fleet_demo.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.rollout.test_fleet import _plan

from tierctl.errors import GateFailed, InputError
from tierctl.rollout.executor import RolloutResult
from tierctl.rollout.fleet import Approval, FleetHost, FleetJournal, FleetPolicy, run_fleet


class Fleet:
    """Five stand-in hosts: what each ran for real, in order, and what each only dry-ran."""

    def __init__(self) -> None:
        self.applied: list[str] = []
        self.dry: list[str] = []
        self.fail: set[str] = set()

    def real(self, host: FleetHost, _plan: Any, _resume: bool) -> RolloutResult:
        if host.name in self.fail:
            raise GateFailed(f"{host.name}: health gate failed; rolled back to OLD")
        self.applied.append(host.name)
        return RolloutResult(outcomes=(), journal=None)

    def dry_run(self, host: FleetHost, _plan: Any, _resume: bool) -> RolloutResult:
        self.dry.append(host.name)
        return RolloutResult(outcomes=(), journal=None)


ACTIONS = st.lists(
    st.one_of(
        st.just(("dry", None)),
        st.tuples(st.just("real"), st.sampled_from([None, "gpu00", "gpu01", "gpu03"])),
        st.just(("approve", None)),
    ),
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(ACTIONS, st.booleans())
def test_the_canary_is_first_after_any_sequence_of_runs(
    tmp_path_factory: pytest.TempPathFactory, actions: list[tuple[str, str | None]], gated: bool
) -> None:
    tmp = tmp_path_factory.mktemp("fleet")
    plan = _plan(tmp, 5)  # waves: [gpu00], [gpu01, gpu02], [gpu03, gpu04]
    journal = tmp / "fleet.journal.jsonl"
    policy = FleetPolicy(approval=gated, on_failure="halt")
    fleet = Fleet()
    for kind, failing in actions:
        before = journal.read_bytes() if journal.exists() else None
        if kind == "dry":
            result = run_fleet(plan, journal, fleet.dry_run, policy=policy, dry_run=True)
            assert not result.halted
            # Every host of every wave, in wave order; nothing written, nothing applied.
            assert fleet.dry[-5:] == ["gpu00", "gpu01", "gpu02", "gpu03", "gpu04"]
            assert (journal.read_bytes() if journal.exists() else None) == before
            assert set(result.status.values()) == {"checked"}
            continue
        fleet.fail = {failing} if failing else set()
        try:
            if kind == "real":
                run_fleet(plan, journal, fleet.real, policy=policy, resume=journal.exists())
            else:
                awaiting = FleetJournal(journal).records() and [
                    r["wave"]
                    for r in FleetJournal(journal).records()
                    if r["event"] == "awaiting-approval"
                ]
                wave = awaiting[-1] if awaiting else 2
                run_fleet(plan, journal, fleet.real, policy=policy, resume=True,
                          approve=Approval(wave, "ana"))  # fmt: skip
        except InputError:
            pass  # nothing to approve, or not yet: refused, and the journal is unchanged
    waves = plan.waves
    order = {h: n for n, wave in enumerate(waves) for h in wave}
    if fleet.applied:
        assert fleet.applied[0] == "gpu00"
    # A host of wave k changes only once every host of the waves before it has changed.
    for i, host in enumerate(fleet.applied):
        earlier = {h for h, n in order.items() if n < order[host]}
        assert earlier <= set(fleet.applied[:i])


def test_a_dry_run_with_a_journal_in_place_neither_reads_nor_writes_it(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 3)
    journal = tmp_path / "j.jsonl"
    fleet = Fleet()
    fleet.fail = {"gpu01"}
    run_fleet(plan, journal, fleet.real, policy=FleetPolicy(on_failure="halt"))
    before = journal.read_bytes()
    # No `resume` needed, the existing journal is not refused, and it is left as it was.
    result = run_fleet(plan, journal, fleet.dry_run, dry_run=True)
    assert result.status == {"gpu00": "checked", "gpu01": "checked", "gpu02": "checked"}
    assert journal.read_bytes() == before
    with pytest.raises(InputError, match="cannot be approved by a dry run"):
        run_fleet(plan, journal, fleet.dry_run, dry_run=True, approve=Approval(2, "ana"))


def test_a_failing_dry_run_halts_the_check_and_says_nothing_was_applied(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 5)
    fleet = Fleet()
    said: list[str] = []

    def dry(host: FleetHost, p: Any, r: bool) -> RolloutResult:
        if host.name == "gpu01":
            raise GateFailed("gpu01: the dry run plans more than r2")
        return fleet.dry_run(host, p, r)

    result = run_fleet(plan, tmp_path / "j.jsonl", dry, dry_run=True, log=said.append)
    assert result.halted
    assert result.status["gpu00"] == "checked"
    assert result.status["gpu01"] == "failed"
    assert "gpu03" not in result.status
    assert not (tmp_path / "j.jsonl").exists()
    assert any("nothing was applied anywhere" in m for m in said)
