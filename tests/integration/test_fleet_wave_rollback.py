"""The rollback of a failed wave on real dockerds: wave 2's h3 cannot start its NEW while h2,
changing at the same time, finishes; the fleet halts, h3's step is rolled back by its own
executor, h2 is returned to OLD by the wave rollback, and h1 (wave 1, passed) keeps NEW.
Then an approval-gated run stops before wave 2 and exits with it awaiting."""

from __future__ import annotations

import json

import pytest

from tests.docker_engine import commit_tag
from tests.integration.test_agent_docker_fleet import (  # noqa: F401  (fleet: the fixture)
    HOSTS,
    Fleet,
    _file,
    _options,
    fleet,
)
from tierctl.rollout.entrypoints import execute_fleet
from tierctl.rollout.fleet import Approval, FleetPolicy

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_failed_wave_is_rolled_back_and_earlier_waves_keep_new(fleet: Fleet) -> None:  # noqa: F811
    v4 = {f"{h}/compose.yaml": _file(h, 4) for h in HOSTS}
    v4["h3/compose.yaml"] = _file("h3", 4, entrypoint=["/bin/no-such-engine"])
    commit_tag(fleet.repo, "v4", v4)
    path = fleet.fleet_file("v1", "v4")
    journal = fleet.tmp / "wave.journal.jsonl"
    logged: list[str] = []
    result = execute_fleet(path, journal, _options(journal), log=logged.append)
    assert result.halted
    assert result.status == {"h1": "done", "h2": "rolled-back", "h3": "failed"}, result.errors
    # h1 passed wave 1: NEW; h2 finished wave 2, which failed: back on OLD; h3 rolled back its
    # own step to OLD.
    assert [fleet.interval(h) for h in HOSTS] == [("true", "4"), ("true", "1"), ("true", "1")]
    events = [json.loads(x)["event"] for x in journal.read_text().splitlines()]
    assert events[-4:] == ["wave-failed", "host-rollback-begin", "host-rolled-back", "halted"]
    assert (fleet.tmp / "wave.journal.h2.rollback.jsonl").exists()
    text = journal.read_text() + "\n".join(logged)
    assert all(a.token not in text for a in fleet.agents.values())


def test_an_approval_gated_fleet_stops_before_wave_2_on_real_agents(fleet: Fleet) -> None:  # noqa: F811
    path = fleet.fleet_file("v1", "v2")
    journal = fleet.tmp / "approve.journal.jsonl"
    policy = FleetPolicy(max_parallel=2, approval=True)
    result = execute_fleet(path, journal, _options(journal), policy=policy)
    assert result.awaiting == 2
    assert [fleet.interval(h)[1] for h in HOSTS] == ["2", "1", "1"]
    options = _options(journal)
    options = type(options)(journal, resume=True, gates=options.gates)
    result = execute_fleet(path, journal, options, policy=policy, approve=Approval(2, "ana"))
    assert result.awaiting is None
    assert not result.halted
    assert [fleet.interval(h)[1] for h in HOSTS] == ["2", "2", "2"]
