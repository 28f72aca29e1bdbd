"""The executor's contract with any driver: write-ahead journal, exact dry runs, rollback,
dry-run mode; and the soak gate's error-rate check. A recording driver and httpx's
MockTransport stand in for the outside world."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from rollout_examples import COLLECTOR, R1, R2, render_variant, without_ingestion

from tierctl.errors import ContractViolation, GateFailed, InputError
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.base import HostUnreachable
from tierctl.rollout.dryrun import DryRunResult
from tierctl.rollout.entrypoints import make_plan
from tierctl.rollout.executor import RolloutOptions, load_sides, run_rollout
from tierctl.rollout.gates import GateContext, GateSettings, gate_soak
from tierctl.rollout.plan_schema import Plan, Step
from tierctl.rollout.planner import plan_files


class RecordingDriver:
    """Records calls with the side used and the journal's last event at that moment."""

    name = "recording"

    def __init__(self, journal: Path, extra: frozenset[str] = frozenset()) -> None:
        self.journal = journal
        self.extra = extra
        self.calls: list[tuple[str, str, str, str | None]] = []

    def _last(self) -> str | None:
        if not self.journal.exists():
            return None
        last = json.loads(self.journal.read_text().splitlines()[-1])
        return f"{last['event']}:{last.get('step', '')}"

    def dry_run(self, dep: Deployment, services: list[str]) -> DryRunResult:
        self.calls.append(("dry_run", dep.side, services[0], self._last()))
        return DryRunResult(frozenset(services) | self.extra, frozenset())

    def apply(self, dep: Deployment, services: list[str]) -> None:
        self.calls.append(("apply", dep.side, services[0], self._last()))

    def down(self, dep: Deployment, services: list[str]) -> None:
        self.calls.append(("down", dep.side, services[0], self._last()))

    def endpoint(self, dep: Deployment, service: str) -> str:
        return "http://127.0.0.1:1"

    def secrets(self) -> tuple[str, ...]:
        return ()


NO_GATES = GateSettings(
    skip=frozenset({"health", "server-info", "metrics-variant", "prometheus-variants", "soak"})
)


@pytest.fixture
def ingestion(tmp_path: Path) -> tuple[Plan, Deployment, Deployment]:
    plan = plan_files(
        str(render_variant(tmp_path, "old", without_ingestion)),
        str(render_variant(tmp_path, "new")),
    )
    old, new = load_sides(plan)
    return plan, old, new


def test_each_step_is_journaled_before_its_action(
    tmp_path: Path, ingestion: tuple[Plan, Deployment, Deployment]
) -> None:
    plan, old, new = ingestion
    journal = tmp_path / "j.jsonl"
    driver = RecordingDriver(journal)
    run_rollout(plan, driver, old, new, RolloutOptions(journal, gates=NO_GATES))
    assert driver.calls == [
        ("dry_run", "new", R2, f"begin:01-recreate-{R2}"),
        ("apply", "new", R2, f"begin:01-recreate-{R2}"),
        ("dry_run", "new", R1, f"begin:02-recreate-{R1}"),
        ("apply", "new", R1, f"begin:02-recreate-{R1}"),
        ("dry_run", "new", COLLECTOR, f"begin:03-recreate-{COLLECTOR}"),
        ("apply", "new", COLLECTOR, f"begin:03-recreate-{COLLECTOR}"),
    ]


def test_dry_run_mode_applies_nothing_and_writes_no_journal(
    tmp_path: Path, ingestion: tuple[Plan, Deployment, Deployment]
) -> None:
    plan, old, new = ingestion
    journal = tmp_path / "j.jsonl"
    driver = RecordingDriver(journal)
    result = run_rollout(
        plan, driver, old, new, RolloutOptions(journal, dry_run=True, gates=NO_GATES)
    )
    assert [c[0] for c in driver.calls] == ["dry_run"] * 3
    assert [o.status for o in result.outcomes] == ["checked"] * 3
    assert not journal.exists()


def test_a_dry_run_touching_another_service_stops_before_any_action(
    tmp_path: Path, ingestion: tuple[Plan, Deployment, Deployment]
) -> None:
    plan, old, new = ingestion
    driver = RecordingDriver(tmp_path / "j.jsonl", extra=frozenset({"proxy-glm53"}))
    with pytest.raises(
        ContractViolation,
        match=r"the dry run plans \['model-sg-glm53-w4afp8-tp4-r2', 'proxy-glm53'\]",
    ):
        run_rollout(plan, driver, old, new, RolloutOptions(tmp_path / "j.jsonl", gates=NO_GATES))
    assert [c[0] for c in driver.calls] == ["dry_run"]


def test_a_failed_server_info_gate_rolls_back_with_the_old_file(
    tmp_path: Path, ingestion: tuple[Plan, Deployment, Deployment]
) -> None:
    plan, old, new = ingestion
    journal = tmp_path / "j.jsonl"
    driver = RecordingDriver(journal)

    def engine(request: httpx.Request) -> httpx.Response:
        # The engine runs without the new flag: it reports it off.
        return httpx.Response(200, json={"enable_dynamic_batch_tokenizer": False})

    gates = GateSettings(skip=frozenset({"health", "metrics-variant", "soak"}))
    with (
        httpx.Client(transport=httpx.MockTransport(engine)) as client,
        pytest.raises(
            GateFailed,
            match=r"--enable-dynamic-batch-tokenizer: rendered \(set\), engine reports False",
        ),
    ):
        run_rollout(plan, driver, old, new, RolloutOptions(journal, gates=gates), client=client)
    assert driver.calls[-1][:3] == ("apply", "old", R2)
    assert [c[2] for c in driver.calls] == [R2, R2, R2]


def test_the_collector_gate_reads_the_plans_variant_label(tmp_path: Path) -> None:
    def tier_variant(doc: dict) -> None:  # type: ignore[type-arg]
        doc["telemetry"]["label"] = "tier_variant"

    old = render_variant(tmp_path, "old", lambda d: (tier_variant(d), without_ingestion(d)))
    new = render_variant(tmp_path, "new", tier_variant)
    plan = make_plan(str(old), str(new), spec=tmp_path / "new.tier.yaml")
    old_dep, new_dep = load_sides(plan)
    variants = {s.container_name: s.variant for s in plan.steps if s.role == "engine"}
    queries: list[str] = []

    def prometheus(request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        queries.append(query)
        container = next(c for c in variants if f'"{c}"' in query)
        metric = {"container_name": container, "tier_variant": variants[container]}
        result = [{"metric": metric, "value": [0, "1"]}]
        return httpx.Response(200, json={"status": "success", "data": {"result": result}})

    gates = GateSettings(
        prometheus_url="http://prom",
        metrics_timeout_s=0,
        skip=frozenset({"health", "server-info", "metrics-variant", "soak"}),
    )
    with httpx.Client(transport=httpx.MockTransport(prometheus)) as client:
        result = run_rollout(
            plan,
            RecordingDriver(tmp_path / "j.jsonl"),
            old_dep,
            new_dep,
            RolloutOptions(tmp_path / "j.jsonl", gates=gates),
            client=client,
        )
    assert [o.status for o in result.outcomes] == ["done"] * 3
    # Per container: which series names it has (the prefix), then its variants under it.
    variant_queries = [q for q in queries if not q.startswith("count by (__name__)")]
    assert len(variant_queries) == 2
    assert len(queries) == 4
    assert all(q.startswith("count by (container_name, tier_variant) ") for q in variant_queries)


def _soak_ctx(counts: list[tuple[float, float]], healthy: bool = True) -> GateContext:
    scrapes = iter(counts)
    now = [0.0]

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200 if healthy else 503)
        finished, aborted = next(scrapes)
        return httpx.Response(
            200,
            text=f'sglang:e2e_request_latency_seconds_count{{m="x"}} {finished}\n'
            f'sglang:num_aborted_requests_total{{m="x"}} {aborted}\n',
        )

    def sleep(s: float) -> None:
        now[0] += s

    step = Step(
        id="01", action="recreate", service=R2, role="engine", side="new", why="", rollback=""
    )
    return GateContext(
        step=step,
        base_url="http://engine",
        new=None,  # type: ignore[arg-type]
        settings=GateSettings(soak_s=10, poll_interval_s=1, max_error_rate=0.1),
        client=httpx.Client(transport=httpx.MockTransport(handler)),
        sleep=sleep,
        clock=lambda: now[0],
    )


def test_soak_fails_when_the_error_rate_rises() -> None:
    ctx = _soak_ctx([(100, 0), (105, 5)])
    with pytest.raises(GateFailed, match=r"50\.0% of requests aborted"):
        gate_soak(ctx)


def test_soak_passes_under_the_threshold_and_without_traffic() -> None:
    ctx = _soak_ctx([(100, 0), (200, 2)])
    gate_soak(ctx)
    assert ctx.notes == ["soak: 10 s, error rate 1.96%"]
    quiet = _soak_ctx([(5, 0), (5, 0)])
    gate_soak(quiet)
    assert "no traffic" in quiet.notes[0]


def test_soak_fails_when_health_stops_answering() -> None:
    with pytest.raises(GateFailed, match="stopped answering /health"):
        gate_soak(_soak_ctx([(0, 0), (0, 0)], healthy=False))


def test_a_finished_plan_rerun_does_nothing_and_says_so(
    tmp_path: Path, ingestion: tuple[Plan, Deployment, Deployment]
) -> None:
    plan, old, new = ingestion
    journal = tmp_path / "j.jsonl"
    run_rollout(plan, RecordingDriver(journal), old, new, RolloutOptions(journal, gates=NO_GATES))
    for resume in (False, True):
        lines: list[str] = []
        driver = RecordingDriver(journal)
        result = run_rollout(
            plan,
            driver,
            old,
            new,
            RolloutOptions(journal, resume=resume, gates=NO_GATES),
            log=lines.append,
        )
        assert driver.calls == []
        assert result.already_completed
        assert [o.status for o in result.outcomes] == ["skipped"] * 3
        assert len(lines) == 1
        assert "this plan already completed; nothing to do" in lines[0]
        assert "--resume" not in lines[0]


def test_resume_announces_the_skipped_steps_once(
    tmp_path: Path, ingestion: tuple[Plan, Deployment, Deployment]
) -> None:
    plan, old, new = ingestion
    journal = tmp_path / "j.jsonl"

    class FailSecond(RecordingDriver):
        def apply(self, dep: Deployment, services: list[str]) -> None:
            if services == [R1]:
                raise KeyboardInterrupt  # the rollout dies inside step 02
            super().apply(dep, services)

    with pytest.raises(KeyboardInterrupt):
        run_rollout(plan, FailSecond(journal), old, new, RolloutOptions(journal, gates=NO_GATES))
    lines: list[str] = []
    result = run_rollout(
        plan,
        RecordingDriver(journal),
        old,
        new,
        RolloutOptions(journal, resume=True, gates=NO_GATES),
        log=lines.append,
    )
    assert [o.status for o in result.outcomes] == ["skipped", "done", "done"]
    assert not result.already_completed
    assert sum("earlier run" in line for line in lines) == 1
    assert not any(line.startswith(f"01-recreate-{R2}") for line in lines)
    assert lines[0].startswith("resuming ")
    assert "1 of 3 step(s) done in an earlier run are skipped" in lines[0]


class Unreachable(RecordingDriver):
    """A host that stops answering at the second step's apply; ``rollback_answers``: it
    answers again by the time of the rollback (a blip), else it stays away."""

    def __init__(self, journal: Path, rollback_answers: bool) -> None:
        super().__init__(journal)
        self.rollback_answers = rollback_answers

    def apply(self, dep: Deployment, services: list[str]) -> None:
        if services == [R1] and (dep.side == "new" or not self.rollback_answers):
            super().apply(dep, services)
            raise HostUnreachable("the agent at http://h:1 never answered")
        super().apply(dep, services)


def test_a_host_that_stops_answering_is_not_rolled_back_over_and_a_resume_re_runs_its_step(
    tmp_path: Path, ingestion: tuple[Plan, Deployment, Deployment]
) -> None:
    """Its apply and its rollback get no answer: the journal says ``unreachable`` (not a
    failed rollback), the error names the host's state as unknown and says resume, and the
    resume re-runs that step from its dry run and finishes the plan."""
    plan, old, new = ingestion
    journal = tmp_path / "j.jsonl"
    with pytest.raises(HostUnreachable) as info:
        run_rollout(plan, Unreachable(journal, False), old, new, RolloutOptions(journal, gates=NO_GATES))  # fmt: skip
    err = info.value
    assert "then the host stopped answering" in err.message
    assert "state there is unknown" in err.message
    assert "resume re-runs this step" in (err.fix or "")
    events = [json.loads(x)["event"] for x in journal.read_text().splitlines()]
    assert events[-2:] == ["failed", "unreachable"], events
    driver = RecordingDriver(journal)
    result = run_rollout(
        plan, driver, old, new, RolloutOptions(journal, resume=True, gates=NO_GATES)
    )
    assert [o.status for o in result.outcomes] == ["skipped", "done", "done"]
    assert driver.calls[:2] == [
        ("dry_run", "new", R1, f"begin:02-recreate-{R1}"),
        ("apply", "new", R1, f"begin:02-recreate-{R1}"),
    ]


def test_a_host_that_answers_again_by_the_rollback_is_rolled_back_as_before(
    tmp_path: Path, ingestion: tuple[Plan, Deployment, Deployment]
) -> None:
    """Mutation guard: only a rollback with no answer is ``unreachable``; one that succeeds
    leaves the usual rolled-back journal, which resume refuses."""
    plan, old, new = ingestion
    journal = tmp_path / "j.jsonl"
    with pytest.raises(HostUnreachable, match="rolled back to OLD"):
        run_rollout(plan, Unreachable(journal, True), old, new, RolloutOptions(journal, gates=NO_GATES))  # fmt: skip
    events = [json.loads(x)["event"] for x in journal.read_text().splitlines()]
    assert events[-2:] == ["failed", "rolled-back"], events
    with pytest.raises(InputError, match="rolled back after a failed apply"):
        run_rollout(plan, RecordingDriver(journal), old, new, RolloutOptions(journal, resume=True, gates=NO_GATES))  # fmt: skip
