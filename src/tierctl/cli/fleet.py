"""``tierctl fleet plan`` and ``tierctl fleet rollout``: one change over many hosts, in waves
(docs/fleet.md)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tierctl.errors import ExitCode


@click.group()
def fleet() -> None:
    """Roll one change out over a fleet of hosts, canary first, in waves."""


@fleet.command("plan")
@click.argument("fleet_path", metavar="FLEET", type=click.Path(path_type=Path))
@click.option("--spec", type=click.Path(path_type=Path), help="Tier spec (roles).")
@click.option("--json", "as_json", is_flag=True, help="The plan as JSON.")
def plan(fleet_path: Path, spec: Path | None, as_json: bool) -> None:
    """Plan every host of FLEET and show the waves."""
    from tierctl.rollout.entrypoints import make_fleet_plan

    result = make_fleet_plan(fleet_path, spec=spec)
    summary = result.summary()
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(
        f"fleet {summary['fleet']}: {summary['old']} -> {summary['new']}, "
        f"{sum(len(w) for w in summary['waves'])} hosts in {len(summary['waves'])} waves, "
        f"at most {summary['max_parallel']} at once"
    )
    for number, wave in enumerate(summary["waves"], 1):
        click.echo(f"wave {number}:")
        for host in wave:
            steps = ", ".join(host["steps"]) or "nothing to change"
            click.echo(f"  {host['host']} ({host['file']}): {steps}")


@fleet.command("rollout")
@click.argument("fleet_path", metavar="FLEET", type=click.Path(path_type=Path))
@click.option(
    "--journal",
    "journal_path",
    type=click.Path(path_type=Path),
    help="The fleet journal [FLEET.journal.jsonl]; each host's beside it.",
)
@click.option("--resume", is_flag=True, help="Continue the fleet journal: finished hosts skip.")
@click.option("--dry-run", is_flag=True, help="Every step's dry run only, on every host.")
@click.option("--spec", type=click.Path(path_type=Path), help="Tier spec (roles).")
@click.option("--pass-env", multiple=True, help="Forward this env var to the agents.")
@click.option("--agent-timeout-s", type=click.FloatRange(min=0.1), default=600.0)
@click.option("--agent-attempts", type=click.IntRange(min=1, max=20), default=4)
@click.option("--health-timeout-s", type=float, default=120.0, show_default=True)
@click.option("--skip-gate", multiple=True, help="Skip a gate (repeatable).")
def rollout(
    fleet_path: Path,
    journal_path: Path | None,
    resume: bool,
    dry_run: bool,
    spec: Path | None,
    pass_env: tuple[str, ...],
    agent_timeout_s: float,
    agent_attempts: int,
    health_timeout_s: float,
    skip_gate: tuple[str, ...],
) -> int:
    """Run FLEET's waves: each host through its agent, halting at the first failure."""
    from tierctl.rollout.entrypoints import DriverConfig, execute_fleet
    from tierctl.rollout.executor import RolloutOptions
    from tierctl.rollout.gates import GateSettings

    journal = journal_path or fleet_path.with_suffix(".journal.jsonl")
    options = RolloutOptions(
        journal_path=journal,
        resume=resume,
        dry_run=dry_run,
        gates=GateSettings(health_timeout_s=health_timeout_s, skip=frozenset(skip_gate)),
    )
    config = DriverConfig(
        name="compose-manager",
        pass_env=pass_env,
        agent_timeout_s=agent_timeout_s,
        agent_attempts=agent_attempts,
    )
    result = execute_fleet(
        fleet_path,
        journal,
        options,
        spec=spec,
        config=config,
        log=lambda m: click.echo(m, err=True),
    )
    for host, status in result.status.items():
        click.echo(
            f"{host}: {status}" + (f": {result.errors[host]}" if host in result.errors else "")
        )
    if result.halted:
        click.echo("fleet halted: no further host was started", err=True)
        return ExitCode.FAILURE
    return ExitCode.OK
