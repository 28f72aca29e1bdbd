"""The rollout takes a replica out of the real proxy before stopping it, and puts it back.

Two simulated engines under the local driver behind a real ``sglang-router`` (the wheel the
real-engine venv installs, or one on PATH), with clients sending through the router the whole
time. The router is started by the test from the proxy service's own rendered command (the
local driver runs engines only).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tierctl.errors import TierctlError
from tierctl.proxies.sglang_router import RouterClient, SglangRouter, settings_from_argv
from tierctl.realengine.env import router_binary
from tierctl.realtier.traffic import Traffic
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.rollout.executor import RolloutOptions, load_sides, run_rollout
from tierctl.rollout.gates import GateSettings
from tierctl.rollout.journal import Journal
from tierctl.rollout.plan_schema import plan_digest
from tierctl.rollout.planner import plan_files
from tierctl.runtime.process import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODEL = "m"


def _compose(ports: dict[str, int], router_port: int, r2_extra: list[str]) -> str:
    services: dict[str, object] = {}
    for name in ("r1", "r2"):
        services[f"model-{name}"] = {
            "image": "sglang@sha256:1",
            "command": [
                "python3",
                "-m",
                "sglang.launch_server",
                "--model-path",
                MODEL,
                "--host",
                "127.0.0.1",
                "--port",
                str(ports[name]),
                "--enable-metrics",
                *(r2_extra if name == "r2" else []),
            ],
            "labels": {"tierctl.role": "canary" if name == "r2" else "control"},
        }
    services["proxy"] = {
        "image": "lmsysorg/sglang-router@sha256:2",
        "labels": {"tierctl.role": "proxy"},
        "command": [
            "sglang-router",
            "launch",
            "--host",
            "127.0.0.1",
            "--port",
            str(router_port),
            "--worker-urls",
            *(f"http://127.0.0.1:{p}" for p in ports.values()),
            "--policy",
            "round_robin",
            "--health-check-interval-secs",
            "2",
            "--health-check-timeout-secs",
            "3",
            "--health-failure-threshold",
            "3",
            "--health-success-threshold",
            "1",
        ],
    }
    return yaml.safe_dump({"services": services}, sort_keys=False)


class Tier:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports = {"r1": free_port(), "r2": free_port()}
        self.router_port = free_port()
        self.driver = LocalDriver(tmp / "state", time_scale=200.0, start_timeout_s=120)
        self.journal = tmp / "journal.jsonl"
        self.router: SglangRouter | None = None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def files(self, r2_new: list[str]) -> tuple[Path, Path]:
        old, new = self.tmp / "old.yaml", self.tmp / "new.yaml"
        old.write_text(_compose(self.ports, self.router_port, ["--prefill-decode-interval", "1"]))
        new.write_text(_compose(self.ports, self.router_port, r2_new))
        return old, new

    def start(self, old_path: Path, new_path: Path) -> tuple[object, object, object]:
        plan = plan_files(str(old_path), str(new_path))
        old, new = load_sides(plan)
        for svc in ("model-r1", "model-r2"):
            self.driver.apply(old, [svc])
        settings = dataclasses.replace(
            settings_from_argv(old.argv("proxy")), metrics_port=free_port(), log_level="info"
        )
        self.router = SglangRouter(settings, self.tmp / "router.log")
        self.router.start(ready_timeout_s=120)
        return plan, old, new

    @property
    def client(self) -> RouterClient:
        assert self.router is not None
        return self.router.client


@pytest.fixture
def tier(tmp_path: Path) -> Iterator[Tier]:
    if router_binary() is None and shutil.which("sglang-router") is None:
        pytest.fail("sglang-router is not installed: `make test` runs scripts/ensure-vllm")
    t = Tier(tmp_path)
    try:
        yield t
    finally:
        if t.router is not None:
            t.router.stop()
        t.driver.down_all()


def _events(journal: Path) -> list[str]:
    return [json.loads(x)["event"] for x in journal.read_text().splitlines()]


def _options(tier: Tier, **kw: object) -> RolloutOptions:
    gates = GateSettings(poll_interval_s=0.1, health_timeout_s=120)
    return RolloutOptions(tier.journal, gates=gates, **kw)  # type: ignore[arg-type]


def test_r2_leaves_the_router_before_it_stops_and_rejoins_after_its_gates(tier: Tier) -> None:
    old_p, new_p = tier.files(["--prefill-decode-interval", "2"])
    plan, old, new = tier.start(old_p, new_p)
    with Traffic(tier.client.url, model=MODEL, concurrency=2, pause_s=0.02) as traffic:
        traffic.wait_for(10, timeout_s=120)
        result = run_rollout(plan, tier.driver, old, new, _options(tier))  # type: ignore[arg-type]
        traffic.wait_for(traffic.result.sent + 10, timeout_s=120)
    events = _events(tier.journal)
    step = [e for e in events if e not in ("start", "completed")]
    # Out of the router before the stop, back in only after the gates passed.
    assert step == [
        "begin", "proxy-drained", "applied", "gates-passed", "proxy-restored", "done"
    ], events  # fmt: skip
    notes = result.outcomes[0].notes
    assert any("drained from" in n for n in notes), notes
    assert any("back in" in n for n in notes), notes
    assert tier.client.health_of() == {tier.url("r1"): True, tier.url("r2"): True}
    # While r2 was out, r1 carried every request; none failed.
    assert traffic.result.failures == [], traffic.result.outcomes


def test_the_soak_judges_traffic_with_the_replica_back_in_the_router(tier: Tier) -> None:
    old_p, new_p = tier.files(["--prefill-decode-interval", "2"])
    plan, old, new = tier.start(old_p, new_p)
    options = _options(tier)
    options = dataclasses.replace(options, gates=dataclasses.replace(options.gates, soak_s=4))
    with Traffic(tier.client.url, model=MODEL, concurrency=2, pause_s=0.02) as traffic:
        traffic.wait_for(10, timeout_s=120)
        result = run_rollout(plan, tier.driver, old, new, options)  # type: ignore[arg-type]
    records = [json.loads(x) for x in tier.journal.read_text().splitlines()]
    step = [r["event"] for r in records if r["event"] not in ("start", "completed")]
    # Drain -> apply -> health/argv/metrics gates -> back in the router -> soak with traffic.
    assert step == [
        "begin", "proxy-drained", "applied", "gates-passed", "proxy-restored", "soak-passed",
        "done",
    ], step  # fmt: skip
    soak = next(r for r in records if r["event"] == "soak-passed")["notes"]
    # The router sent r2 requests during its soak: an error rate, not "no traffic".
    assert any(n.startswith("soak: 4 s, error rate 0.00%") for n in soak), soak
    assert not any("no traffic" in n for n in result.outcomes[0].notes), result.outcomes[0].notes
    assert traffic.result.failures == [], traffic.result.outcomes


def test_a_failed_soak_takes_the_replica_out_again_before_its_rollback(tier: Tier) -> None:
    old_p, new_p = tier.files(["--prefill-decode-interval", "2"])
    plan, old, new = tier.start(old_p, new_p)
    options = _options(tier)
    # A bound no traffic can meet (a negative error rate): the soak fails once r2 served any.
    gates = dataclasses.replace(options.gates, soak_s=3, max_error_rate=-1.0)
    options = dataclasses.replace(options, gates=gates)
    with Traffic(tier.client.url, model=MODEL, concurrency=2, pause_s=0.02) as traffic:
        traffic.wait_for(10, timeout_s=120)
        with pytest.raises(TierctlError, match="aborted during the soak"):
            run_rollout(plan, tier.driver, old, new, options)  # type: ignore[arg-type]
        traffic.wait_for(traffic.result.sent + 10, timeout_s=120)
    step = [e for e in _events(tier.journal) if e not in ("start", "completed")]
    # Back in the router for the soak; out again before the rollback stops it; back as OLD.
    assert step == [
        "begin", "proxy-drained", "applied", "gates-passed", "proxy-restored", "gate-failed",
        "proxy-drained", "rolled-back", "proxy-restored",
    ], step  # fmt: skip
    assert tier.client.health_of() == {tier.url("r1"): True, tier.url("r2"): True}
    assert traffic.result.failures == [], traffic.result.outcomes


def test_a_failed_step_is_rolled_back_and_old_rejoins_the_router(tier: Tier) -> None:
    # The simulated engine refuses a value SGLang's parser refuses, and exits at start-up.
    old_p, new_p = tier.files(["--prefill-decode-interval", "two"])
    plan, old, new = tier.start(old_p, new_p)
    with pytest.raises(TierctlError, match="rolled back to OLD"):
        run_rollout(plan, tier.driver, old, new, _options(tier))  # type: ignore[arg-type]
    events = _events(tier.journal)
    assert events[-3:] == ["failed", "rolled-back", "proxy-restored"], events
    assert tier.client.health_of() == {tier.url("r1"): True, tier.url("r2"): True}


def test_a_resumed_rollout_puts_back_the_replica_an_interrupted_one_took_out(
    tier: Tier,
) -> None:
    old_p, new_p = tier.files(["--prefill-decode-interval", "2"])
    plan, old, new = tier.start(old_p, new_p)
    step = plan.steps[0]  # type: ignore[attr-defined]
    # What a rollout killed between its drain and its stop leaves: r2 out of the router,
    # and the drain in the journal.
    tier.client.drain(tier.url("r2"), timeout_s=30)
    journal = Journal(tier.journal, plan_digest(plan))  # type: ignore[arg-type]
    journal.write("start")
    journal.write("begin", step.id, action=step.action, service=step.service)
    journal.write("proxy-drained", step.id, worker=tier.url("r2"), proxy=tier.client.url)
    assert tier.url("r2") not in tier.client.health_of()
    result = run_rollout(plan, tier.driver, old, new, _options(tier, resume=True))  # type: ignore[arg-type]
    assert any("already out of" in n for n in result.outcomes[0].notes)
    assert tier.client.health_of() == {tier.url("r1"): True, tier.url("r2"): True}


def test_without_a_reachable_router_the_step_says_so_and_goes_on(tier: Tier) -> None:
    old_p, new_p = tier.files(["--prefill-decode-interval", "2"])
    plan = plan_files(str(old_p), str(new_p))
    old, new = load_sides(plan)
    for svc in ("model-r1", "model-r2"):
        tier.driver.apply(old, [svc])
    result = run_rollout(plan, tier.driver, old, new, _options(tier))
    assert any("not reachable" in n and "not drained" in n for n in result.outcomes[0].notes)
    assert "proxy-drained" not in _events(tier.journal)


def test_no_proxy_drain_leaves_the_router_alone(tier: Tier) -> None:
    old_p, new_p = tier.files(["--prefill-decode-interval", "2"])
    plan, old, new = tier.start(old_p, new_p)
    run_rollout(plan, tier.driver, old, new, _options(tier, proxy_drain=False))  # type: ignore[arg-type]
    assert not {"proxy-drained", "proxy-restored"} & set(_events(tier.journal))
