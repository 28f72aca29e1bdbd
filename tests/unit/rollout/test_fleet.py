"""Fleet files, waves and the wave runner (a host runner stands in for the agents here; the
real agents on real engines are tests/integration/test_agent_docker_fleet.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tierctl.errors import GateFailed, InputError
from tierctl.rollout.executor import RolloutResult
from tierctl.rollout.fleet import (
    Fleet,
    FleetFile,
    FleetHost,
    FleetPlan,
    FleetWaves,
    load_fleet,
    plan_waves,
    run_fleet,
)
from tierctl.rollout.plan_schema import Plan


def _hosts(n: int, canary: int = 0) -> list[FleetHost]:
    return [
        FleetHost(
            name=f"gpu{i:02d}",
            file=f"gpu{i:02d}/tier.yaml",
            agent_url=f"http://10.0.0.{i}:8765",
            labels={"role": "canary"} if i < canary else {},
        )
        for i in range(n)
    ]


@given(
    st.integers(1, 60),
    st.integers(0, 5),
    st.one_of(st.integers(1, 70), st.integers(1, 100).map(lambda p: f"{p}%")),
)
def test_waves_hold_every_host_once_canaries_first(n: int, canary: int, size: int | str) -> None:
    hosts = _hosts(n, canary)
    waves = plan_waves(hosts, FleetWaves(size=size))
    flat = [h for wave in waves for h in wave]
    assert sorted(flat) == sorted(h.name for h in hosts)
    assert len(flat) == len(set(flat))
    assert all(waves)
    canaries = [h.name for h in hosts if h.labels.get("role") == "canary"]
    if canaries:
        assert waves[0] == canaries
    later = waves[1:] if canaries else waves
    per = size if isinstance(size, int) else max(1, -(-n * int(size[:-1]) // 100))
    assert all(len(w) <= per for w in later)
    assert all(len(w) == per for w in later[:-1])


def test_named_canaries_win_over_labels_and_a_percentage_rounds_up() -> None:
    hosts = _hosts(10, canary=3)
    waves = plan_waves(hosts, FleetWaves(canary=["gpu05"], size="25%"))
    assert waves[0] == ["gpu05"]
    assert [len(w) for w in waves[1:]] == [3, 3, 3]


def _write(tmp: Path, doc: dict[str, object]) -> Path:
    path = tmp / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


BASE = {
    "fleet": "glm53",
    "old": "v1",
    "new": "v2",
    "hosts": [{"name": "gpu02", "file": "gpu02/tier.yaml", "agent_url": "http://gpu02:8765"}],
}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"hosts": []}, "hosts"),
        ({"hosts": [{**BASE["hosts"][0], "agent_url": "gpu02:8765"}]}, "http"),  # type: ignore[index]
        ({"hosts": [BASE["hosts"][0], BASE["hosts"][0]]}, "listed twice"),  # type: ignore[index]
        ({"waves": {"canary": ["gpu99"]}}, "not in hosts"),
        ({"waves": {"size": "0%"}}, "percentage"),
        ({"waves": {"max_parallel": 0}}, "max_parallel"),
        ({"token": "s3cret"}, "token"),
    ],
)
def test_a_bad_fleet_file_is_refused_with_its_place(
    tmp_path: Path, change: dict[str, object], said: str
) -> None:
    path = _write(tmp_path, {**BASE, **change})
    with pytest.raises(InputError, match=said) as info:
        load_fleet(path)
    assert info.value.exit_code == 2
    assert info.value.location is not None
    assert info.value.location.file == str(path)


def _plan(tmp: Path, n: int, max_parallel: int = 1) -> FleetPlan:
    spec = FleetFile(
        fleet="f", old="v1", new="v2", hosts=_hosts(n, canary=1),
        waves=FleetWaves(size=2, max_parallel=max_parallel),
    )  # fmt: skip
    fleet = Fleet(spec=spec, path=tmp / "fleet.yaml", repo=tmp)
    empty = Plan.model_construct()
    return FleetPlan(fleet, plan_waves(spec.hosts, spec.waves), {h.name: empty for h in spec.hosts})


class Hosts:
    """A host runner that records calls and fails the hosts it is told to."""

    def __init__(self, fail: set[str]) -> None:
        self.fail = fail
        self.calls: list[tuple[str, bool]] = []
        self.running = 0
        self.most = 0
        self._lock = threading.Lock()

    def __call__(self, host: FleetHost, plan: Plan, resume: bool) -> RolloutResult:
        with self._lock:
            self.calls.append((host.name, resume))
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            if host.name in self.fail:
                raise GateFailed(f"{host.name}: health gate failed; rolled back to OLD")
            return RolloutResult(outcomes=(), journal=None)
        finally:
            with self._lock:
                self.running -= 1


def test_the_first_failed_host_halts_the_fleet_and_resume_skips_the_done(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 5)  # waves: [gpu00], [gpu01, gpu02], [gpu03, gpu04]
    journal = tmp_path / "fleet.journal.jsonl"
    hosts = Hosts(fail={"gpu02"})
    result = run_fleet(plan, journal, hosts)
    assert result.halted
    assert hosts.calls == [("gpu00", False), ("gpu01", False), ("gpu02", False)]
    assert result.status == {"gpu00": "done", "gpu01": "done", "gpu02": "failed"}
    events = [json.loads(x)["event"] for x in journal.read_text().splitlines()]
    assert events[-3:] == ["host-failed", "wave-failed", "halted"]
    with pytest.raises(InputError, match="pass `resume`"):
        run_fleet(plan, journal, hosts)
    hosts = Hosts(fail=set())
    result = run_fleet(plan, journal, hosts, resume=True)
    # gpu02 had begun: it resumes from its own journal; the others start fresh.
    assert hosts.calls == [("gpu02", True), ("gpu03", False), ("gpu04", False)]
    assert result.status["gpu00"] == "skipped"
    assert not result.halted
    assert json.loads(journal.read_text().splitlines()[-1])["event"] == "completed"


def test_no_more_hosts_change_at_once_than_the_cap(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 9, max_parallel=2)
    hosts = Hosts(fail=set())
    run_fleet(plan, tmp_path / "j.jsonl", hosts)
    assert hosts.most <= 2
    assert len(hosts.calls) == 9
