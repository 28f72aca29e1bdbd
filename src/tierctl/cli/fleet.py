"""Fleets on the command line: ``tierctl plan --fleet``, ``rollout --fleet``, ``runbook --fleet``
(and ``tierctl fleet plan|rollout|runbook``, the same commands under one group), in waves
(docs/fleet.md).

The one-host commands (:mod:`tierctl.cli.rollout`) hand a ``--fleet`` line to the functions
here; the ``fleet`` group calls the same functions, so there is one implementation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from tierctl.cli.options import format_option, output_option
from tierctl.errors import ExitCode


def refuse_with_fleet(ctx: click.Context, names: tuple[str, ...], why: str) -> None:
    """Refuse the options among ``names`` that were given with ``--fleet`` (exit 2)."""
    given = []
    for param in ctx.command.params:
        if param.name in names and isinstance(param, click.Option):
            source = ctx.get_parameter_source(param.name)
            if source in (
                click.core.ParameterSource.COMMANDLINE,
                click.core.ParameterSource.ENVIRONMENT,
            ):
                given.append(max(param.opts, key=len))
    if given:
        raise click.UsageError(f"{', '.join(given)}: not with --fleet ({why})", ctx=ctx)


def show_fleet_plan(fleet_path: Path, spec: Path | None, as_json: bool) -> None:
    """Plan every host of the fleet and print the waves (``--format json``: as data)."""
    from tierctl.rollout.entrypoints import make_fleet_plan

    result = make_fleet_plan(fleet_path, spec=spec)
    summary = result.summary()
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    hosts = sum(len(w) for w in summary["waves"])
    click.echo(
        f"fleet {summary['fleet']}: {summary['old']} -> {summary['new']}, "
        f"{hosts} hosts in {len(summary['waves'])} waves, "
        f"at most {summary['max_parallel']} at once"
    )
    click.echo(f"between waves: {between_waves(summary)}")
    for number, wave in enumerate(summary["waves"], 1):
        click.echo(f"wave {number}:")
        for host in wave:
            steps = ", ".join(host["steps"]) or "nothing to change"
            files = " + ".join([host["file"], *host["overrides"]])
            click.echo(f"  {host['host']} ({files}): {steps}")


def between_waves(summary: dict[str, Any]) -> str:
    """The policy between waves, in words."""
    parts = []
    if summary["pause_s"]:
        parts.append(f"a pause of {summary['pause_s']:g} s")
    if summary["approval"]:
        parts.append("a manual approval (`--resume --approve-wave N`)")
    said = " then ".join(parts) or "nothing (the next wave starts when one is done)"
    return f"{said}; a failed host halts the fleet ({summary['on_failure']})"


@dataclass(frozen=True)
class FleetRun:
    """What ``rollout --fleet`` was asked: the fleet, its journal, the policy overrides and
    every host's gate settings."""

    fleet_path: Path
    journal_path: Path | None = None
    resume: bool = False
    dry_run: bool = False
    spec: Path | None = None
    approve_wave: int | None = None
    note: str = ""
    pause_s: float | None = None
    approval: bool | None = None
    max_parallel: int | None = None
    on_failure: str | None = None
    pass_env: tuple[str, ...] = ()
    agent_timeout_s: float = 600.0
    agent_idle_timeout_s: float = 15.0
    agent_attempts: int = 4
    gates: dict[str, Any] = field(default_factory=dict)
    proxy_drain: bool = True


def run_fleet_rollout(run: FleetRun) -> ExitCode:
    """Run (or continue) the fleet's waves and print each host's outcome.

    Returns:
        OK when every wave is done, FAILURE when a host failed (the fleet halted),
        AWAITING_APPROVAL when the run stopped before a wave that waits for its approval.
    """
    from tierctl.rollout.entrypoints import DriverConfig, execute_fleet
    from tierctl.rollout.executor import RolloutOptions
    from tierctl.rollout.fleet import Approval, FleetPolicy, approver, load_fleet
    from tierctl.rollout.gates import GateSettings

    journal = run.journal_path or run.fleet_path.with_suffix(".journal.jsonl")
    options = RolloutOptions(
        journal_path=journal,
        resume=run.resume,
        dry_run=run.dry_run,
        gates=GateSettings(**run.gates),
        proxy_drain=run.proxy_drain,
    )
    config = DriverConfig(
        name="compose-manager",
        pass_env=run.pass_env,
        agent_timeout_s=run.agent_timeout_s,
        agent_idle_timeout_s=run.agent_idle_timeout_s,
        agent_attempts=run.agent_attempts,
    )
    waves = load_fleet(run.fleet_path).spec.waves
    policy = FleetPolicy.of(
        waves,
        pause_s=run.pause_s,
        approval=run.approval,
        max_parallel=run.max_parallel,
        on_failure=run.on_failure,
    )
    approve = None
    if run.approve_wave is not None:
        approve = Approval(run.approve_wave, approver(), run.note)
    result = execute_fleet(
        run.fleet_path,
        journal,
        options,
        spec=run.spec,
        config=config,
        log=lambda m: click.echo(m, err=True),
        policy=policy,
        approve=approve,
    )
    for host, status in result.status.items():
        error = f": {result.errors[host]}" if host in result.errors else ""
        click.echo(f"{host}: {status}{error}")
    if run.dry_run:
        # Nothing a real run reads was written: the real run starts at wave 1, canary first.
        click.echo(f"dry run: nothing applied, no journal written ({journal} is the real run's)")
        if result.halted:
            click.echo("dry run halted: fix the failing host before the real run", err=True)
            return ExitCode.FAILURE
        again = f"tierctl rollout --fleet {run.fleet_path}"
        if journal.exists():
            again += " --resume"
        if run.journal_path is not None:
            again += f" --journal {run.journal_path}"
        click.echo(f"to roll out: {again}")
        return ExitCode.OK
    click.echo(f"journal: {journal}")
    if result.halted:
        click.echo("fleet halted: no further host was started", err=True)
        return ExitCode.FAILURE
    if result.awaiting is not None:
        again = (
            f"tierctl rollout --fleet {run.fleet_path} --resume --approve-wave {result.awaiting}"
        )
        if run.journal_path is not None:
            again += f" --journal {run.journal_path}"
        click.echo(f"awaiting approval for wave {result.awaiting}: to go on, {again}")
        return ExitCode.AWAITING_APPROVAL
    return ExitCode.OK


def write_fleet_runbook(
    fleet_path: Path, spec: Path | None, output: Path | None, force: bool
) -> None:
    """The fleet's Markdown runbook, printed or written to ``output``."""
    from tierctl.paths import write_owned
    from tierctl.rollout.entrypoints import make_fleet_runbook
    from tierctl.rollout.fleet_runbook import is_fleet_runbook

    text = make_fleet_runbook(fleet_path, spec=spec)
    if output is None:
        click.echo(text)
        return
    protect = [fleet_path] + ([spec] if spec is not None else [])
    write_owned(
        output, text, ours=is_fleet_runbook, force=force, protect=protect, what="fleet runbook"
    )


def fleet_run_options(f: click.decorators.FC) -> click.decorators.FC:
    """The options ``rollout --fleet`` adds to the one-host rollout's (approval, waves); the
    ``--fleet`` option itself is the command's."""
    options = [
        click.option("--spec", type=click.Path(path_type=Path),
                     help="With --fleet: the tier spec (roles) every host's plan uses."),
        click.option("--approve-wave", type=click.IntRange(min=2),
                     help="With --fleet --resume: approve wave N, the one the journal awaits "
                     "(recorded with $TIERCTL_APPROVER or your login name, and the time)."),
        click.option("--note", default="", help="With --approve-wave: why, for the journal."),
        click.option("--pause-s", type=click.FloatRange(min=0),
                     help="With --fleet: pause this long between waves [the fleet file's]."),
        click.option("--approval/--no-approval", default=None,
                     help="With --fleet: each wave after the first waits for --approve-wave "
                     "[the fleet file's waves.approval]."),
        click.option("--max-parallel", type=click.IntRange(min=1),
                     help="With --fleet: hosts changing at once at most [the fleet file's]."),
        click.option("--on-failure", type=click.Choice(["rollback-wave", "halt"]),
                     help="With --fleet: after a failed host, also return the wave's finished "
                     "hosts to OLD, or only halt [the fleet file's; rollback-wave]."),
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


#: ``rollout --fleet``'s options that only a one-host rollout takes.
ONE_HOST_ONLY = (
    "plan_path", "driver", "repo", "agent_url", "token_env", "token_file", "tag_old", "tag_new",
    "project", "docker_host", "docker_context", "compose_binary", "state_dir", "time_scale",
    "engine", "start_timeout_s", "gate_host", "host_label",
)  # fmt: skip
#: Options only ``rollout --fleet`` takes.
FLEET_ONLY = (
    "spec", "approve_wave", "note", "pause_s", "approval", "max_parallel", "on_failure",
)  # fmt: skip


@click.group()
def fleet() -> None:
    """Roll one change out over a fleet of hosts, canary first, in waves (the same commands
    as `tierctl plan|rollout|runbook --fleet FLEET`)."""


@fleet.command("plan")
@click.argument("fleet_path", metavar="FLEET", type=click.Path(path_type=Path))
@click.option("--spec", type=click.Path(path_type=Path), help="Tier spec (roles).")
@format_option(help="text, or json: the plan as JSON.")
def plan(fleet_path: Path, spec: Path | None, fmt: str) -> None:
    """Plan every host of FLEET and show the waves (= `tierctl plan --fleet FLEET`)."""
    show_fleet_plan(fleet_path, spec, fmt == "json")


@fleet.command(
    "rollout",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
@click.argument("fleet_path", metavar="FLEET")
@click.pass_context
def rollout(ctx: click.Context, fleet_path: str) -> ExitCode | None:
    """Run FLEET's waves: `tierctl rollout --fleet FLEET` itself, with every option of it
    (`tierctl rollout --help`); exit 0 done, 1 a host failed, 4 awaiting a wave's approval."""
    from tierctl.cli.rollout import rollout as one_command

    # `fleet rollout --help` (or an option first) is the one command's own line.
    args = (
        [fleet_path, *ctx.args]
        if fleet_path.startswith("-")
        else ["--fleet", fleet_path, *ctx.args]
    )
    result: ExitCode | None = one_command.main(
        args, prog_name="tierctl rollout", standalone_mode=False
    )
    return result


@fleet.command("runbook")
@click.argument("fleet_path", metavar="FLEET", type=click.Path(path_type=Path))
@click.option("--spec", type=click.Path(path_type=Path), help="Tier spec (roles).")
@output_option(help="Write the Markdown here.")
@click.option("--force", is_flag=True, help="With -o: replace a file that is not a runbook.")
def runbook(fleet_path: Path, spec: Path | None, output: Path | None, force: bool) -> None:
    """Write FLEET's Markdown runbook (= `tierctl runbook --fleet FLEET`)."""
    write_fleet_runbook(fleet_path, spec, output, force)
