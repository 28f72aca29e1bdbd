"""The library entry points behind ``tierctl plan``, ``rollout`` and ``runbook``.

They take what an operator gives (paths, a spec, a driver's configuration) and call the
pieces: :func:`~tierctl.rollout.planner.plan_files`, :func:`make_driver` and
:func:`~tierctl.rollout.executor.run_rollout` (which runs a plan, step by step),
:func:`~tierctl.rollout.runbook.render_runbook`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import ValidationError

from tierctl.compose.binary import find_compose_binary
from tierctl.credentials import mask_credentials
from tierctl.errors import InputError, Location
from tierctl.readers import read_text
from tierctl.rollout.drivers.base import Driver
from tierctl.rollout.drivers.compose_manager import ComposeManagerDriver, Target
from tierctl.rollout.drivers.docker import DockerDriver
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.rollout.executor import RolloutOptions, RolloutResult, load_sides, run_rollout
from tierctl.rollout.fleet import (
    Approval,
    FleetHost,
    FleetPlan,
    FleetPolicy,
    FleetResult,
    load_fleet,
    plan_fleet,
    run_fleet,
    server_url,
)
from tierctl.rollout.plan_schema import Plan, SourceRef
from tierctl.rollout.planner import PlanOptions, plan_files
from tierctl.rollout.progress import RolloutProgress
from tierctl.rollout.runbook import compose_host, render_runbook
from tierctl.rollout.source import read_source
from tierctl.rollout.spec_roles import options_from_spec

DriverName = Literal["compose-manager", "docker", "local"]


@dataclass(frozen=True)
class DriverConfig:
    """Everything needed to build a driver; secrets are read from the environment or a file.

    Attributes:
        name: Which driver.
        agent_url: compose-manager's URL.
        token_env: Environment variable holding the agent token.
        token_file: File holding the agent token (wins over ``token_env``).
        tags: ``old``/``new`` tag overrides for compose-manager.
        pass_env: Names of local environment variables sent to the agent for interpolation.
        project: Compose project name.
        workdir: Where the docker driver writes ``git:`` sides.
        state_dir: The local driver's state directory.
        time_scale: Modelled seconds per wall second of the local driver's simulated engine.
        engine: The local driver's engine: ``sim`` or ``real`` (a local install).
        start_timeout_s: How long the local driver gives an engine to become ready.
        gate_host: The host the gates reach engines on (compose-manager, docker).
        agent_timeout_s: Deadline of one compose-manager call, its answer stream included.
        agent_idle_timeout_s: A beating agent's stream silent this long: the host stopped
            answering (0: only the call deadline).
        agent_attempts: Tries of an idempotent compose-manager call.
        docker_host: The docker driver's engine (``DOCKER_HOST``).
        docker_context: The docker driver's Docker context (``DOCKER_CONTEXT``).
        compose_binary: The docker driver's compose command (default: the one found).
    """

    name: DriverName
    agent_url: str | None = None
    token_env: str = "TIERCTL_AGENT_TOKEN"
    token_file: Path | None = None
    tags: dict[str, str] = field(default_factory=dict)
    pass_env: tuple[str, ...] = ()
    project: str | None = None
    workdir: Path = Path(".tierctl-rollout")
    state_dir: Path = Path(".tierctl-rollout/local")
    time_scale: float = 100.0
    engine: Literal["sim", "real"] = "sim"
    start_timeout_s: float = 420.0
    gate_host: str = "127.0.0.1"
    agent_timeout_s: float = 600.0
    agent_idle_timeout_s: float = 15.0
    agent_attempts: int = 4
    docker_host: str | None = None
    docker_context: str | None = None
    compose_binary: str | None = None


def make_plan(
    old: str | Sequence[str],
    new: str | Sequence[str],
    *,
    spec: Path | None = None,
    allow: frozenset[str] = frozenset(),
    protect: frozenset[str] = frozenset(),
    repo: Path | None = None,
    profiles: tuple[str, ...] | None = None,
) -> Plan:
    """Plan the rollout from OLD to NEW; roles come from ``spec`` when given; with
    ``profiles``, only the services those compose profiles run are planned."""
    options = options_from_spec(spec, allow) if spec else PlanOptions(allow=allow)
    if protect:
        options = replace(options, protected_services=options.protected_services | protect)
    if profiles is not None:
        options = replace(options, profiles=profiles)
    return plan_files(old, new, options, repo)


def load_plan(path: Path) -> Plan:
    """Read a plan written by ``tierctl plan --format json``."""
    text = read_text(
        path,
        what="plan",
        missing=f"cannot read plan {path}: no such file",
        missing_fix="write one with `tierctl plan` in its JSON form (or `plan_files`)",
    )
    try:
        return Plan.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(
            f"{path} is not a tierctl plan: {first['msg']}",
            location=Location(file=str(path), path=".".join(str(p) for p in first["loc"])),
            rule="`plan_path` names a plan `tierctl plan` wrote in its JSON form",
            fix="write one with `tierctl plan` in its JSON form (or `plan_files`)",
            params=("plan_path",),
        ) from None


def _paths(refs: Sequence[SourceRef]) -> tuple[str, ...]:
    return tuple(r.path for r in refs)


def _same_ref(side: str, refs: Sequence[SourceRef]) -> None:
    """An agent applies one commit per side: every file of the side is at the first's ref."""
    first = refs[0].git_ref
    other = [r.spec for r in refs[1:] if r.git_ref is not None and r.git_ref != first]
    if other:
        raise InputError(
            f"the {side} side's files are at different refs ({', '.join(other)} vs {refs[0].spec})",
            location=Location(file=other[0]),
            rule="compose-manager applies a side's files from one tag of the deployment repository",
            fix="plan the override files at the same git ref as the first file",
        )


def make_driver(
    config: DriverConfig,
    plan: Plan,
    repo: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> Driver:
    """Build a driver from its configuration; the token is read here, never from argv.

    ``log`` receives the driver's own progress (a compose-manager retry as it happens).
    """
    if config.name == "local":
        return LocalDriver(
            config.state_dir,
            time_scale=config.time_scale,
            engine=config.engine,
            start_timeout_s=config.start_timeout_s,
            stop_timeout_s=60.0 if config.engine == "real" else 10.0,
        )
    if config.name == "docker":
        return DockerDriver(
            config.workdir,
            project=config.project,
            repo_root=repo,
            gate_host=config.gate_host,
            compose=_compose_argv(config.compose_binary),
            docker_host=config.docker_host,
            docker_context=config.docker_context,
        )
    if not config.agent_url:
        raise InputError(
            "the compose-manager driver needs `agent_url`",
            rule="compose-manager is reached over HTTP",
            fix="pass `agent_url` http://HOST:PORT",
            params=("agent_url",),
        )
    try:
        # The fleet file's rules for an agent URL (a host DNS can hold, a port in range,
        # brackets closed): `--agent-url http://[::1` and a 300-character host were httpx's
        # InvalidURL and the resolver's UnicodeError at the first call (file fuzzer, #38).
        server_url(config.agent_url, "agent_url", credentials=True)
    except ValueError as exc:
        raise InputError(
            str(exc),
            rule="compose-manager is reached over HTTP",
            value=mask_credentials(config.agent_url)[:120],
            fix="pass `agent_url` http://HOST:PORT",
            params=("agent_url",),
        ) from None
    token = _token(config)
    targets: dict[str, Target] = {}
    for side, refs in (
        ("old", (plan.source, *plan.source_overrides)),
        ("new", (plan.target, *plan.target_overrides)),
    ):
        tag = config.tags.get(side) or refs[0].git_ref
        if tag:
            _same_ref(side, refs)
            targets[side] = Target(tag=tag, file=refs[0].path, overrides=_paths(refs[1:]))
    env: dict[str, str] = {}
    for name in config.pass_env:
        if name not in os.environ:
            raise InputError(
                f"`pass_env` {name}: not set in this environment",
                rule="`pass_env` forwards variables that are set",
                fix=f"export {name} first",
                params=("pass_env",),
            )
        env[name] = os.environ[name]
    return ComposeManagerDriver(
        config.agent_url,
        token,
        targets,
        env=env,
        gate_host=config.gate_host,
        project=config.project,
        log=log,
        timeout_s=config.agent_timeout_s,
        idle_timeout_s=config.agent_idle_timeout_s,
        attempts=config.agent_attempts,
    )


def _compose_argv(explicit: str | None) -> tuple[str, ...] | None:
    """The docker driver's compose command: the one asked for, else the first found (the
    ``docker compose`` plugin, ``docker-compose`` v2, the compose extra's binary); None leaves
    ``docker compose``, whose absence the driver then names."""
    found = find_compose_binary(explicit)
    if found is None and explicit:
        raise InputError(
            f"`compose_binary` {explicit} is not a Docker Compose v2",
            rule="the docker driver runs Compose v2",
            fix="point `compose_binary` at docker-compose v2, or leave it out",
            params=("compose_binary",),
        )
    return found.argv if found is not None else None


def _token(config: DriverConfig) -> str:
    return read_token(config.token_file, config.token_env, what="compose-manager token")


def read_token(token_file: Path | None, token_env: str, *, what: str = "agent token") -> str:
    """A token from ``token_file`` (wins) or the variable ``token_env``; never from argv.

    Raises:
        InputError: the file cannot be read, or the token is empty.
    """
    if token_file is not None:
        try:
            token = read_text(token_file, what="token").strip()
        except InputError as exc:
            raise InputError(
                exc.message.replace("cannot read token file", "cannot read the token file"),
                location=Location(file=str(token_file)),
                rule="`token_file` names a readable file holding the agent token",
                fix=exc.fix or "check the path and its permissions",
                params=("token_file",),
            ) from None
    else:
        token = os.environ.get(token_env, "").strip()
    if not token:
        raise InputError(
            f"no {what}",
            rule="the token comes from an environment variable or a file, never the command line",
            fix=f"export {token_env}=... or pass `token_file` PATH",
            params=("token_file",),
        )
    return token


def execute_plan(
    plan_path: Path,
    config: DriverConfig,
    options: RolloutOptions,
    *,
    repo: Path | None = None,
    log: Callable[[str], None] = lambda _m: None,
    progress: RolloutProgress | None = None,
) -> RolloutResult:
    """Run a plan file with a driver: re-read and check both files, then :func:`run_rollout`
    (``progress`` receives the gates' waits)."""
    plan = load_plan(plan_path)
    old, new = load_sides(plan, repo)
    if options.gates.host_label is None:
        host = compose_host(new.text)
        options = replace(options, gates=replace(options.gates, host_label=host))
    driver = make_driver(config, plan, repo, log=log)
    try:
        return run_rollout(plan, driver, old, new, options, log=log, progress=progress)
    finally:
        close = getattr(driver, "close", None)
        if callable(close):
            close()


def make_runbook(
    old: str | Sequence[str],
    new: str | Sequence[str],
    *,
    spec: Path | None = None,
    allow: frozenset[str] = frozenset(),
    protect: frozenset[str] = frozenset(),
    repo: Path | None = None,
) -> str:
    """Plan OLD -> NEW (each a file, or a file and its override files) and write its Markdown
    runbook."""
    plan = make_plan(old, new, spec=spec, allow=allow, protect=protect, repo=repo)
    files = [new] if isinstance(new, str) else list(new)
    # The host label as compose would read it: the last file that says one wins.
    hosts = [compose_host(read_source(f, repo).text) for f in files]
    host = next((h for h in reversed(hosts) if h), None)
    return render_runbook(plan, host=host, spec=str(spec) if spec else None)


def make_fleet_runbook(fleet_path: Path, *, spec: Path | None = None) -> str:
    """Plan the fleet and write its Markdown runbook."""
    from tierctl.rollout.fleet_runbook import render_fleet_runbook

    plan = make_fleet_plan(fleet_path, spec=spec)
    labels = {h.name: h.host_label or h.name for h in plan.fleet.spec.hosts}
    return render_fleet_runbook(plan, str(fleet_path), str(spec) if spec else None, labels)


def make_fleet_plan(fleet_path: Path, *, spec: Path | None = None) -> FleetPlan:
    """Read a fleet file and plan every host (roles from ``spec`` when given)."""
    fleet = load_fleet(fleet_path)
    return plan_fleet(fleet, lambda old, new, repo: make_plan(old, new, spec=spec, repo=repo))


def execute_fleet(
    fleet_path: Path,
    journal_path: Path,
    options: RolloutOptions,
    *,
    spec: Path | None = None,
    config: DriverConfig | None = None,
    log: Callable[[str], None] = lambda _m: None,
    policy: FleetPolicy | None = None,
    approve: Approval | None = None,
) -> FleetResult:
    """Plan the fleet and run its waves (:func:`~tierctl.rollout.fleet.run_fleet`), each host
    through its own agent with the compose-manager driver; ``options`` are every host's gates
    (each host's journal is ``JOURNAL.HOST.jsonl`` beside the fleet's; a host returned to OLD
    after its wave failed has ``JOURNAL.HOST.rollback.jsonl``). ``policy`` overrides the fleet
    file's waves settings; ``approve`` approves the wave the journal awaits."""
    plan = make_fleet_plan(fleet_path, spec=spec)
    base = config or DriverConfig(name="compose-manager")

    def run(host: FleetHost, host_plan: Plan, journal: Path, resume: bool) -> RolloutResult:
        gate_host = host.gate_host or urlsplit(host.agent_url).hostname or "127.0.0.1"
        host_config = replace(
            base,
            name="compose-manager",
            agent_url=host.agent_url,
            token_env=host.token_env,
            token_file=(plan.fleet.path.parent / host.token_file) if host.token_file else None,
            gate_host=gate_host,
        )
        old, new = load_sides(host_plan, plan.fleet.repo)
        gates = options.gates
        if host.prometheus is not None and gates.prometheus_url is None:
            gates = replace(gates, prometheus_url=host.prometheus)
        if gates.host_label is None:
            gates = replace(gates, host_label=host.host_label or compose_host(new.text))
        host_options = replace(options, journal_path=journal, resume=resume, gates=gates)
        driver = make_driver(host_config, host_plan, plan.fleet.repo, log=log)
        try:
            return run_rollout(
                host_plan, driver, old, new, host_options, log=lambda m: log(f"{host.name}: {m}")
            )
        finally:
            close = getattr(driver, "close", None)
            if callable(close):
                close()

    def run_host(host: FleetHost, host_plan: Plan, resume: bool) -> RolloutResult:
        return run(
            host,
            host_plan,
            journal_path.with_name(f"{journal_path.stem}.{host.name}.jsonl"),
            resume,
        )

    def rollback_host(host: FleetHost) -> RolloutResult:
        # The host's NEW -> OLD rollout: the same steps' services back to OLD, gated.
        spec_ = plan.fleet.spec
        back = make_plan(
            host.sources(spec_.new), host.sources(spec_.old), spec=spec, repo=plan.fleet.repo
        )
        journal = journal_path.with_name(f"{journal_path.stem}.{host.name}.rollback.jsonl")
        return run(host, back, journal, journal.exists())

    return run_fleet(
        plan, journal_path, run_host, resume=options.resume, log=log, policy=policy,
        approve=approve, rollback_host=None if options.dry_run else rollback_host,
        dry_run=options.dry_run,
    )  # fmt: skip
