"""The compose-manager driver and the executor against a stand-in agent on loopback, and
(where the real agent can be made to show the same thing) against ``tierctl agent serve`` on a
real dockerd.

The stand-in speaks the agent's API (tierctl.rollout.standin_agent); faults are injected per
request. The real agent runs the real docker compose over a deployment repository holding the
OLD and NEW files (the example tier, its images swapped for the tests' tiny one), tagged v1 and
v2. Gates that need engines are skipped here (no engines run); the rollback test uses the
health gate against a port nothing listens on.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.docker_engine import SLEEPER, TINY_IMAGE, AgentProcess, DockerEngine, commit_tag
from tests.secret_search import holds_fragment
from tierctl.errors import ContractViolation, GateFailed, InputError, RuntimeFailure
from tierctl.render import render_compose
from tierctl.rollout.drivers.compose_manager import ComposeManagerDriver, Target
from tierctl.rollout.executor import RolloutOptions, RolloutResult, load_sides, run_rollout
from tierctl.rollout.gates import GateSettings
from tierctl.rollout.normalise import load_services
from tierctl.rollout.plan_schema import Plan
from tierctl.rollout.planner import plan_files
from tierctl.rollout.standin_agent import StandinAgent
from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import free_port
from tierctl.spec import load_spec

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "glm53-long-context" / "tier.yaml"
R1 = "model-sg-glm53-w4afp8-tp4-r1"
R2 = "model-sg-glm53-w4afp8-tp4-r2"
COLLECTOR = "otelcol-contrib"
TOKEN = "tok-SENTINEL-8c1f"
ALL_GATES = frozenset({"health", "server-info", "metrics-variant", "prometheus-variants", "soak"})


def _render(tmp: Path, name: str, ingestion: bool, ports: tuple[int, int]) -> Path:
    doc = yaml.safe_load(EXAMPLE.read_text())
    if not ingestion:
        doc["engine"].pop("overlays")
    doc["replicas"]["r1"]["args"]["port"] = ports[0]
    doc["replicas"]["r2"]["args"]["port"] = ports[1]
    spec = tmp / f"{name}.tier.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp / f"{name}.yaml"
    out.write_text(render_compose(load_spec(spec), spec_path=spec))
    return out


def dockerise(text: str) -> str:
    """The example's compose file, runnable on a bare dockerd: every service on the tiny
    image, sleeping (its argv kept as arguments, so the planner reads the same engines), no GPU
    reservation, mount or ulimit, and a label with a digest of its definition (what
    :meth:`World.running_as` compares). Applied alike to OLD and NEW, it keeps the plan."""
    doc = yaml.safe_load(text)
    for svc in doc["services"].values():
        for key in ("deploy", "volumes", "ulimits", "cap_add", "ipc", "shm_size", "logging"):
            svc.pop(key, None)
        svc.update(image=TINY_IMAGE, network_mode="host", entrypoint=SLEEPER, restart="no")
        svc["healthcheck"] = {"test": ["CMD", "true"], "interval": "1s"}
        digest = hashlib.sha256(json.dumps(svc, sort_keys=True).encode()).hexdigest()[:16]
        svc.setdefault("labels", {})["tierctl.test/definition"] = digest
    return yaml.safe_dump(doc, sort_keys=False)


#: What the real compose needs to interpolate the example (its `${VAR:?}` variables).
REAL_ENV = {
    "HF_TOKEN": "hf-SECRET-VALUE",
    "GATEWAY_TOKEN": "gw-SECRET-VALUE",
    "METRICS_REMOTE_WRITE_URL": "http://127.0.0.1:9/write",
}


class World:
    """OLD/NEW files, the plan, the agent with OLD running, and a driver factory."""

    def __init__(self, tmp: Path, engine: DockerEngine | None = None) -> None:
        ports = (free_port(), free_port())
        old_path, new_path = _render(tmp, "old", False, ports), _render(tmp, "new", True, ports)
        self.engine = engine
        if engine is not None:
            for path in (old_path, new_path):
                path.write_text(dockerise(path.read_text()))
        self.plan: Plan = plan_files(str(old_path), str(new_path))
        self.old, self.new = load_sides(self.plan)
        self.sleeps: list[float] = []
        self.journal = tmp / "journal.jsonl"
        self.log: list[str] = []
        self.drivers: list[ComposeManagerDriver] = []
        self.env = dict(REAL_ENV) if engine is not None else {"HF_TOKEN": "hf-SECRET-VALUE"}
        self.real: AgentProcess | None = None
        self.agent = StandinAgent(
            {("v1", "tier.yaml"): self.old.text, ("v2", "tier.yaml"): self.new.text}, TOKEN
        )
        if engine is None:
            self.agent.start()
            self.agent.state.running = {
                n: json.dumps(s, sort_keys=True)
                for n, s in load_services(self.old.text, "tier.yaml").services.items()
            }
            self.url = self.agent.url
            return
        repo = tmp / "deploy"
        commit_tag(repo, "v1", {"tier.yaml": self.old.text})
        commit_tag(repo, "v2", {"tier.yaml": self.new.text})
        self.real = AgentProcess(engine, repo, tmp / "agent-state", TOKEN)
        self.real.start()
        self.url = self.real.url
        # OLD runs everywhere before the rollout, brought up through the agent itself.
        with httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            body = {"tag": "v1", "file": "tier.yaml", "env": self.env, "force_recreate": False,
                    "dry_run": False, "services": sorted(load_services(self.old.text, "x").services)}  # fmt: skip
            answer = c.post("/compose/up", json=body, timeout=120).text
        assert answer.strip().endswith('{"type": "exit", "code": 0}'), answer
        self.setup_ops = len(self.real.records())

    def close(self) -> None:
        """Close the drivers; stop the agent; bring the real project down and check that
        nothing of it is left."""
        for d in self.drivers:
            d.close()
        self.agent.stop()
        if self.real is not None and self.engine is not None:
            self.real.stop()
            self.engine.compose("-p", "glm53-long-context", "down", check=False)
            left = self.engine.containers()
            self.engine.remove_all_containers()
            assert left == [], f"containers left running: {left}"

    def driver(self, **kw: Any) -> ComposeManagerDriver:
        kw.setdefault("backoff_s", 0.01)
        driver = ComposeManagerDriver(
            self.url,
            TOKEN,
            {"old": Target("v1", "tier.yaml"), "new": Target("v2", "tier.yaml")},
            env=self.env,
            sleep=self.sleeps.append,
            **kw,
        )
        self.drivers.append(driver)
        return driver

    def run(
        self,
        driver: ComposeManagerDriver,
        skip: frozenset[str] = ALL_GATES,
        resume: bool = False,
        **gates: Any,
    ) -> RolloutResult:
        options = RolloutOptions(
            self.journal, resume=resume, gates=GateSettings(skip=skip, **gates)
        )
        return run_rollout(self.plan, driver, self.old, self.new, options, log=self.log.append)

    def calls(self) -> list[tuple[str, bool | None, str, tuple[str, ...]]]:
        """The calls the agent acted on: the stand-in's requests, or the real agent's
        operation log (its ``begin`` lines, after the set-up's)."""
        if self.real is not None:
            begun = [r for r in self.real.records() if r["event"] == "begin"]
            return [
                (
                    f"/compose/{r['operation']}",
                    r["dry_run"] if r["operation"] == "up" else None,
                    str(r["tag"]),
                    tuple(r["services"]),  # type: ignore[arg-type]
                )
                for r in begun[1:]
            ]
        return [
            (r["path"], r.get("dry_run"), r["tag"], tuple(r["services"]))
            for r in self.agent.state.requests
        ]

    def events(self) -> list[str]:
        return [json.loads(line)["event"] for line in self.journal.read_text().splitlines()]

    def running_as(self, side: str, svc: str) -> bool:
        text = self.old.text if side == "old" else self.new.text
        if self.engine is not None:
            want = load_services(text, "x").services[svc]["labels"]["tierctl.test/definition"]
            fmt = '{{.State.Running}} {{index .Config.Labels "tierctl.test/definition"}}'
            seen = self.engine.docker("inspect", "-f", fmt, svc, check=False).stdout.split()
            return seen == ["true", want]
        want = json.dumps(load_services(text, "x").services[svc], sort_keys=True)
        return self.agent.state.running.get(svc) == want


@pytest.fixture
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    """The stand-in world; ``docker`` (parametrised indirectly) is the real agent's."""
    engine = None
    if getattr(request, "param", "standin") == "docker":
        engine = request.getfixturevalue("docker_engine")
    w = World(tmp_path, engine)
    yield w
    w.close()


#: The tests whose scenario the real agent can show too run against both.
BOTH = pytest.mark.parametrize(
    "world", ["standin", pytest.param("docker", marks=pytest.mark.slow)], indirect=True
)


def _step_calls(tag: str, svc: str) -> list[tuple[str, bool | None, str, tuple[str, ...]]]:
    return [
        ("/compose/up", True, tag, (svc,)),
        ("/compose/down", None, tag, (svc,)),
        ("/compose/up", False, tag, (svc,)),
    ]


@BOTH
def test_ingestion_rollout_calls_exactly_the_planned_services(world: World) -> None:
    result = world.run(world.driver())
    assert [o.status for o in result.outcomes] == ["done", "done", "done"]
    assert world.calls() == (
        _step_calls("v2", R2) + _step_calls("v2", R1) + _step_calls("v2", COLLECTOR)
    )
    if world.real is None:
        assert set(world.agent.state.auth_headers) == {f"Bearer {TOKEN}"}
    for svc in (R1, R2, COLLECTOR):
        assert world.running_as("new", svc)
    for svc in ("proxy-glm53", "model-proxy-registrar", "dcgm-exporter"):
        assert world.running_as("old", svc)
    assert world.events()[-1] == "completed"


def test_tokens_and_env_values_never_reach_the_journal_or_the_log(world: World) -> None:
    world.agent.state.faults = ["", "", "exit1"]
    with pytest.raises(RuntimeFailure, match="exited 1"):
        world.run(world.driver())
    text = world.journal.read_text() + "\n".join(world.log)
    assert "injected failure" in text
    assert TOKEN not in text
    assert "hf-SECRET-VALUE" not in text
    # The env did reach the agent, under its key.
    assert world.agent.state.requests[0]["env"] == {"HF_TOKEN": "hf-SECRET-VALUE"}


def test_500s_are_retried_with_growing_backoff(world: World) -> None:
    world.agent.state.faults = ["500", "500"]
    world.run(world.driver(backoff_s=0.5))
    assert world.sleeps == [0.5, 1.0]
    assert world.calls()[:3] == [("/compose/up", True, "v2", (R2,))] * 3


def test_each_retry_is_reported_as_it_happens(world: World) -> None:
    world.agent.state.faults = ["500", "500"]
    lines: list[str] = []

    def sleep(delay: float) -> None:
        # The line for a retry is out before its wait starts, not after the call gives up.
        assert len(lines) == len(world.sleeps) + 1
        world.sleeps.append(delay)

    driver = world.driver(backoff_s=0.5, log=lines.append)
    driver._sleep = sleep
    driver.dry_run(world.new, [R2])
    assert world.sleeps == [0.5, 1.0]
    assert [line.split(": HTTP 500")[0] for line in lines] == [
        f"compose-manager /compose/up for {R2}"
    ] * 2
    assert lines[0].endswith("try 2 of 4 in 0.5 s")
    assert lines[1].endswith("try 3 of 4 in 1 s")


def test_a_time_out_is_retried(world: World) -> None:
    world.agent.state.slow_s = 1.0
    world.agent.state.faults = ["timeout"]
    result = world.run(world.driver(timeout_s=0.3))
    assert result.outcomes[-1].status == "done"
    assert world.sleeps == [0.01]


def test_a_cut_event_stream_is_retried(world: World) -> None:
    world.agent.state.faults = ["cut"]
    world.run(world.driver())
    assert world.calls()[:2] == [("/compose/up", True, "v2", (R2,))] * 2


def test_retries_give_up_after_the_attempts(world: World) -> None:
    world.agent.state.faults = ["500"] * 3
    with pytest.raises(RuntimeFailure, match="failed 3 times: HTTP 500"):
        world.driver(attempts=3).dry_run(world.new, [R2])


def test_a_forced_recreate_is_not_retried(world: World) -> None:
    world.agent.state.faults = ["500"]
    with pytest.raises(RuntimeFailure, match=r"once \(not idempotent\)"):
        world.driver().recreate_in_place(world.new, [R2])
    assert len(world.agent.state.requests) == 1


def test_a_dry_run_that_plans_an_extra_service_is_refused(world: World) -> None:
    world.agent.state.faults = [f"extra:{R1}"]
    with pytest.raises(ContractViolation, match=r"plans \[.*r1.*r2.*\], the step plans exactly"):
        world.run(world.driver())
    assert world.calls() == [("/compose/up", True, "v2", (R2,))]
    assert world.events() == ["start", "begin", "refused"]
    assert world.running_as("old", R1)
    assert world.running_as("old", R2)


@BOTH
def test_a_failed_gate_rolls_that_replica_back_and_stops(world: World) -> None:
    with pytest.raises(GateFailed, match="rolled back to OLD") as info:
        world.run(world.driver(), skip=ALL_GATES - {"health"}, health_timeout_s=0.0)
    assert info.value.exit_code == 1
    assert world.calls()[3:] == [
        ("/compose/down", None, "v1", (R2,)),
        ("/compose/up", False, "v1", (R2,)),
    ]
    assert world.running_as("old", R2)
    assert world.running_as("old", R1)
    assert world.events()[-2:] == ["gate-failed", "rolled-back"]
    # A journal that ends in a rollback is not resumed: the plan's premise did not hold.
    with pytest.raises(InputError, match="rolled back"):
        world.run(world.driver(), resume=True)


def test_resume_continues_without_repeating_a_finished_step(world: World) -> None:
    world.agent.state.faults = ["", "", "", "exit1"]
    with pytest.raises(RuntimeFailure):
        world.run(world.driver())
    assert world.calls() == [*_step_calls("v2", R2), ("/compose/up", True, "v2", (R1,))]
    with pytest.raises(InputError, match="pass `resume` to continue"):
        world.run(world.driver())
    first = len(world.agent.state.requests)
    result = world.run(world.driver(), resume=True)
    assert [o.status for o in result.outcomes] == ["skipped", "done", "done"]
    assert world.calls()[first:] == _step_calls("v2", R1) + _step_calls("v2", COLLECTOR)


def test_a_wrong_token_fails_at_once(world: World) -> None:
    driver = ComposeManagerDriver(
        world.url, "wrong", {"new": Target("v2", "tier.yaml")}, sleep=world.sleeps.append
    )
    world.drivers.append(driver)
    with pytest.raises(RuntimeFailure, match="refused the token"):
        driver.dry_run(world.new, [R2])
    assert world.sleeps == []


def test_env_keys_are_validated_like_the_agent_does(world: World) -> None:
    with pytest.raises(InputError, match="not accepted by compose-manager"):
        ComposeManagerDriver(world.agent.url, TOKEN, {}, env={"BAD-KEY": "x"})


def test_an_empty_service_list_is_never_sent(world: World) -> None:
    with pytest.raises(ValueError, match="empty means all"):
        world.driver().down(world.new, [])
    assert world.calls() == []


def test_a_trickling_agent_is_given_up_on_at_the_call_deadline(world: World) -> None:
    """Lines keep coming but no exit event: the per-call deadline (--agent-timeout-s) ends it."""
    world.agent.state.slow_s = 30.0
    world.agent.state.faults = ["trickle", "trickle"]
    with pytest.raises(RuntimeFailure, match="call deadline"):
        world.driver(timeout_s=0.5, attempts=2).dry_run(world.new, [R2])


def test_a_failed_apply_rolls_back_and_resume_is_refused(world: World) -> None:
    """Apply answers 500 on every try: the replica goes back to OLD, the message says to make a
    new plan, and --resume is refused (docs/rollout.md: a journal ending in a rollback)."""
    world.agent.state.faults = ["ok", "500", "500"]  # dry run ok; the scoped down fails twice
    with pytest.raises(RuntimeFailure, match="rolled back to OLD") as info:
        world.run(world.driver(attempts=2))
    assert "new plan" in (info.value.fix or "")
    assert "`resume`" not in (info.value.fix or "")
    assert world.running_as("old", R2)
    assert world.events()[-2:] == ["failed", "rolled-back"]
    with pytest.raises(InputError, match="rolled back after a failed apply"):
        world.run(world.driver(), resume=True)
    assert world.running_as("old", R2)


def test_a_stalled_agent_is_given_up_on_before_anything_changes(world: World) -> None:
    """The agent accepts every call and never answers (no status line): each try ends at the
    call deadline, the step stops at its dry run, nothing changed, and the journal says so."""
    world.agent.state.faults = ["stall", "stall"]
    with pytest.raises(RuntimeFailure) as info:
        world.run(world.driver(timeout_s=0.5, attempts=2))
    err = info.value
    step = f"01-recreate-{R2}"
    assert err.message.startswith(f"{step}: the dry run of {R2} failed, nothing was changed")
    assert "no answer within the 0.5 s call deadline" in err.message
    assert "`agent_timeout_s`" in (err.rule or "")
    assert "stalled agent needs a restart" in (err.fix or "")
    assert "`resume`" in (err.fix or "")
    assert set(err.params) >= {"resume", "agent_timeout_s"}
    assert world.calls() == [("/compose/up", True, "v2", (R2,))] * 2
    assert world.running_as("old", R2)
    records = [json.loads(line) for line in world.journal.read_text().splitlines()]
    assert [r["event"] for r in records] == ["start", "begin", "dry-run-failed"]
    assert "call deadline" in records[-1]["error"]
    # Nothing was touched, so --resume retries that step from its dry run, and completes.
    result = world.run(world.driver(), resume=True)
    assert [o.status for o in result.outcomes] == ["done", "done", "done"]
    assert world.running_as("new", R2)


def test_an_agent_that_stalls_during_apply_is_rolled_back_and_not_resumed(world: World) -> None:
    """Dry run and scoped down answer; the up of NEW stalls on every try: the step gives up at
    the deadline, R2 goes back to OLD, the journal has failed + rolled-back, resume refuses."""
    world.agent.state.faults = ["", "", "stall", "stall"]
    with pytest.raises(RuntimeFailure) as info:
        world.run(world.driver(timeout_s=0.5, attempts=2))
    err = info.value
    step = f"01-recreate-{R2}"
    assert err.message.startswith(f"{step} failed: compose-manager /compose/up for {R2}")
    assert "no answer within the 0.5 s call deadline" in err.message
    assert f"{R2} was rolled back to OLD" in err.message
    assert "`agent_timeout_s`" in (err.rule or "")
    assert "new plan" in (err.fix or "")
    assert world.calls()[-2:] == [
        ("/compose/down", None, "v1", (R2,)),
        ("/compose/up", False, "v1", (R2,)),
    ]
    assert world.running_as("old", R2)
    assert world.running_as("old", R1)
    records = [json.loads(line) for line in world.journal.read_text().splitlines()]
    assert [r["event"] for r in records][-2:] == ["failed", "rolled-back"]
    assert "call deadline" in records[-2]["error"]
    with pytest.raises(InputError, match="rolled back after a failed apply"):
        world.run(world.driver(), resume=True)


def _cli_rollout(
    world: World, tmp: Path, *extra: str, health: bool = True
) -> tuple[list[str], dict[str, str]]:
    """``tierctl rollout`` against the stand-in agent, as an operator runs it: the plan from
    a file, the token (and a forwarded secret) from the environment. Every gate is skipped
    but ``health`` (unless ``health`` is false), which fails at once: no engine listens."""
    plan_path = tmp / "plan.json"
    if not plan_path.exists():
        plan_path.write_text(world.plan.model_dump_json(indent=2))
        # The CLI asks for each side's file at its tag, by the plan's path.
        world.agent.state.files[("v1", world.plan.source.path)] = world.old.text
        world.agent.state.files[("v2", world.plan.target.path)] = world.new.text
    kept = {"health"} if health else set()
    skip = [a for g in sorted((ALL_GATES | {"running-args"}) - kept) for a in ("--skip-gate", g)]
    args = [
        sys.executable, "-m", "tierctl", "rollout", "--plan", str(plan_path),
        "--driver", "compose-manager", "--agent-url", world.agent.url,
        "--tag-old", "v1", "--tag-new", "v2", "--journal", str(world.journal),
        "--pass-env", "HF_TOKEN", "--health-timeout-s", "0", "--agent-attempts", "1",
        *skip, *extra,
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
        "TIERCTL_AGENT_TOKEN": TOKEN,
        "HF_TOKEN": "hf-SECRET-VALUE",
    }
    return args, env


def test_a_rollout_killed_inside_its_rollback_is_refused_on_resume(
    world: World, tmp_path: Path
) -> None:
    """`tierctl rollout` (a real process): r2's health gate fails, its rollback's scoped down
    stalls at the agent, and the process is SIGKILLed there. `--resume` must refuse (r2 is in
    an unknown state), name the step, the rule and the fix, and call the agent no more."""
    world.agent.state.faults = ["", "", "", "stall"]  # dry run, down, up; the rollback stalls
    args, env = _cli_rollout(world, tmp_path, "--agent-timeout-s", "600")
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # The fourth call (the rollback's down of r2) has reached the agent and stalls.
        wait_until(
            lambda: proc.poll() is not None or len(world.agent.state.requests) >= 4,
            120,
            poll_s=0.05,
        )
        assert proc.poll() is None, "the rollout ended before its rollback"
        proc.send_signal(signal.SIGKILL)
    finally:
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert world.calls()[-1] == ("/compose/down", None, "v1", (R2,))
    step = f"01-recreate-{R2}"
    records = [json.loads(line) for line in world.journal.read_text().splitlines()]
    assert [r["event"] for r in records] == ["start", "begin", "applied", "gate-failed"]
    assert records[-1]["step"] == step

    calls_before = len(world.agent.state.requests)
    resumed = subprocess.run([*args, "--resume"], env=env, capture_output=True, text=True,
                             timeout=120)  # fmt: skip
    assert resumed.returncode == 2, resumed.stderr
    assert f"step {step} failed and its rollback to OLD did not finish" in resumed.stderr
    assert "rule: a rollout is never resumed over a service in an unknown state" in resumed.stderr
    assert "fix: restore that step's service by hand from the OLD file" in resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert len(world.agent.state.requests) == calls_before  # refused before any call
    # Neither run let the token or the forwarded secret out.
    for text in (out.decode(), err.decode(), resumed.stdout, resumed.stderr,
                 world.journal.read_text()):  # fmt: skip
        assert TOKEN not in text
        assert "hf-SECRET-VALUE" not in text


def _kill_when_stalled(args: list[str], env: dict[str, str], world: World, calls: int) -> None:
    """Run ``args``, wait until the agent holds its ``calls``-th call (stalled), SIGKILL it."""
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(
            lambda: proc.poll() is not None or len(world.agent.state.requests) >= calls,
            120,
            poll_s=0.05,
        )
        assert proc.poll() is None, "the rollout ended before the kill point"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


# The kill lands inside the call the agent holds: R2's dry run (the step begun, nothing done),
# its scoped down (about to stop it), its up (stopped, NEW not started), and R1's dry run (R2's
# step done).
@pytest.mark.parametrize(("stalled_call", "r2_begins"), [(1, 2), (2, 2), (3, 2), (4, 1)])
def test_tierctl_rollout_killed_at_a_step_boundary_resumes_without_repeating_a_done_step(
    world: World, tmp_path: Path, stalled_call: int, r2_begins: int
) -> None:
    world.agent.state.faults = [""] * (stalled_call - 1) + ["stall"]
    args, env = _cli_rollout(world, tmp_path, "--agent-timeout-s", "600", health=False)
    _kill_when_stalled(args, env, world, stalled_call)
    before = [json.loads(x) for x in world.journal.read_text().splitlines()]
    killed_in = f"02-recreate-{R1}" if stalled_call == 4 else f"01-recreate-{R2}"
    assert (before[-1]["event"], before[-1]["step"]) == ("begin", killed_in)
    assert [r["step"] for r in before if r["event"] == "done"] == (
        [f"01-recreate-{R2}"] if stalled_call == 4 else []
    )

    resumed = subprocess.run([*args, "--resume"], env=env, capture_output=True, text=True,
                             timeout=120)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    status = "skipped" if stalled_call == 4 else "done"
    assert resumed.stdout.splitlines()[:3] == [
        f"01-recreate-{R2}: {status}",
        f"02-recreate-{R1}: done",
        f"03-recreate-{COLLECTOR}: done",
    ]
    records = [json.loads(x) for x in world.journal.read_text().splitlines()]
    begins = [r["step"] for r in records if r["event"] == "begin"]
    dones = [r["step"] for r in records if r["event"] == "done"]
    assert begins.count(f"01-recreate-{R2}") == r2_begins
    assert sorted(dones) == sorted(
        [f"01-recreate-{R2}", f"02-recreate-{R1}", f"03-recreate-{COLLECTOR}"]
    )  # each step done exactly once
    assert records[-1]["event"] == "completed"
    for svc in (R1, R2, COLLECTOR):
        assert world.running_as("new", svc)


def test_a_rollback_that_fails_too_is_journaled_and_resume_refuses_with_the_hand_fix(
    world: World,
) -> None:
    """NEW's up exits 1, then the rollback's scoped down answers 500 on every try: the error
    says the rollback failed and how to restore by hand, the journal ends in rollback-failed,
    and --resume refuses without calling the agent."""
    world.agent.state.faults = ["", "", "exit1", "500", "500"]
    with pytest.raises(RuntimeFailure) as info:
        world.run(world.driver(attempts=2))
    err = info.value
    step = f"01-recreate-{R2}"
    assert err.message.startswith(f"{step}: rolling {R2} back to OLD failed too:")
    assert "HTTP 500" in err.message
    assert "restore the service by hand from the OLD file" in (err.fix or "")
    records = [json.loads(line) for line in world.journal.read_text().splitlines()]
    assert [r["event"] for r in records][-2:] == ["failed", "rollback-failed"]
    assert "exited 1" in records[-2]["error"]
    assert "HTTP 500" in records[-1]["error"]
    calls = len(world.agent.state.requests)
    with pytest.raises(InputError, match=f"step {step} failed and its rollback to OLD did not"):
        world.run(world.driver(), resume=True)
    assert len(world.agent.state.requests) == calls


def test_an_agent_answering_html_is_not_taken_for_success(world: World) -> None:
    """200 with an HTML page (a proxy in front of the agent): no exit event, so no success;
    retried, then the step stops at its dry run with nothing changed."""
    world.agent.state.faults = ["html", "html"]
    with pytest.raises(RuntimeFailure) as info:
        world.run(world.driver(attempts=2))
    err = info.value
    assert err.message.startswith(f"01-recreate-{R2}: the dry run of {R2} failed, nothing was")
    assert "failed 2 times: event stream ended without an exit event" in err.message
    assert "exit event of code 0" in (err.rule or "")
    assert world.running_as("old", R2)
    assert world.events() == ["start", "begin", "dry-run-failed"]


@pytest.mark.parametrize("faults", [["echo"] * 6, ["echo-exit1"], ["", "", "echo-400"]])
def test_an_agent_echoing_the_request_encoded_leaks_no_secret(
    world: World, faults: list[str]
) -> None:
    """The agent echoes the request (token, HF_TOKEN) raw, JSON-escaped, URL-encoded (%XX and
    +), base64 (both alphabets, inside larger blobs), hex and cut short: none of it reaches the
    log, the error or the journal in any reading (tests.secret_search decodes them all)."""
    world.agent.state.faults = list(faults)
    error = ""
    try:
        world.run(world.driver(attempts=1))
    except RuntimeFailure as exc:
        error = f"{exc.message} {exc.rule} {exc.fix} {exc.value}"
    shown = "\n".join([*world.log, error, world.journal.read_text()])
    if faults != ["echo"] * 6:
        # A failure shows what the agent said: the echo arrived, masked (not a silence).
        assert "***" in error
    for secret in (TOKEN, "hf-SECRET-VALUE"):
        assert not holds_fragment(shown, secret), secret
