"""``tierctl plan``, ``tierctl rollout`` and ``tierctl runbook``: parse, dispatch to the
deployment target (``cli.targets``: ``--target``, compose by default), print.

``rollout``'s options reach the target as one frozen :class:`RolloutArgs` (built by
``cli.options.into``: an option the dataclass lacks fails every call, and a test checks each
option has its field).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from tierctl.cli import targets
from tierctl.cli.fleet import (
    FLEET_ONLY,
    ONE_HOST_ONLY,
    fleet_run_options,
    refuse_with_fleet,
    show_fleet_plan,
    write_fleet_runbook,
)
from tierctl.cli.options import (
    OptionArgs,
    fleet_option,
    format_option,
    into,
    local_engine_option,
    output_option,
    prometheus_option,
    target_option,
)
from tierctl.cli.profiles import chosen_profiles, profile_option
from tierctl.errors import ExitCode
from tierctl.paths import write_owned
from tierctl.rollout.gates import GATE_DEFS, gate_names

if TYPE_CHECKING:
    from tierctl.rollout.plan_schema import Plan


def _side_options() -> list[Callable[[click.decorators.FC], click.decorators.FC]]:
    """--from/--to: several files per side, merged as compose merges ``-f a -f b``."""
    how = " (repeat to merge override files over it, as docker compose -f does)"
    return [
        click.option(
            "--from",
            "old",
            multiple=True,
            help=f"OLD: compose file or git:REF:PATH{how}.",
        ),
        click.option(
            "--to",
            "new",
            multiple=True,
            help=f"NEW: compose file or git:REF:PATH{how}.",
        ),
    ]


_common = [
    click.option(
        "--spec", type=click.Path(path_type=Path), help="Tier spec: roles and protection."
    ),
    click.option("--allow", multiple=True, help="Let the plan change this protected service."),
    click.option(
        "--protect", multiple=True, help="Never recreate this service (adds to the spec's)."
    ),
    click.option("--repo", type=click.Path(path_type=Path), help="Repository for git:REF:PATH."),
    fleet_option(
        help="Every host of this fleet file, in waves, instead of --from/--to (docs/fleet.md)."
    ),
    target_option(auto=False, help="Where the tier runs (the deployment target)."),
]


_Side = TypeVar("_Side", str, tuple[str, ...])


def _sides(
    ctx: click.Context,
    old: _Side | None,
    new: _Side | None,
    fleet_path: Path | None,
    only: tuple[str, ...],
) -> tuple[_Side, _Side] | None:
    """The two sides of a one-host plan, or None for a fleet (whose files the fleet file names);
    options of the other kind are refused."""
    if fleet_path is not None:
        refuse_with_fleet(ctx, ("old", "new", *only), "the fleet file names each host's files")
        return None
    if not old or not new:
        raise click.UsageError("give --from OLD and --to NEW (one host), or --fleet FLEET", ctx=ctx)
    return old, new


def _with_common_several(f: click.decorators.FC) -> click.decorators.FC:
    for option in reversed([*_side_options(), *_common]):
        f = option(f)
    return f


def _inputs(old: str | Sequence[str], new: str | Sequence[str], spec: Path | None) -> list[Path]:
    """The files a plan or runbook is made from (never written over, forced or not); a
    git:REF:PATH side is not a file here."""
    sides = [*([old] if isinstance(old, str) else old), *([new] if isinstance(new, str) else new)]
    files = [Path(side) for side in sides if not side.startswith("git:")]
    return files + ([spec] if spec is not None else [])


def format_plan(plan: Plan) -> str:
    """The human view of a plan: services, steps, untouched."""
    old = " + ".join(r.spec for r in (plan.source, *plan.source_overrides))
    new = " + ".join(r.spec for r in (plan.target, *plan.target_overrides))
    lines = [f"plan {old} -> {new}", ""]
    width = max((len(c.service) for c in plan.services), default=8)
    for c in plan.services:
        role = c.role + (f"/{c.replica_role}" if c.replica_role else "")
        why = ", ".join(c.reasons)
        lines.append(f"  {c.service:<{width}}  {role:<16} {c.change:<9} {why}".rstrip())
        for d in c.details:
            lines.append(f"  {'':<{width}}    {d}")
    lines.append("")
    if not plan.steps:
        lines.append("steps: none (nothing changes)")
    else:
        lines.append("steps:")
        for s in plan.steps:
            gates = f"  gates: {', '.join(s.gates)}" if s.gates else ""
            lines.append(f"  {s.id}  ({s.why}){gates}")
    lines.append("untouched: " + (", ".join(plan.untouched) or "none"))
    return "\n".join(lines)


def _change(
    sides: tuple[tuple[str, ...], tuple[str, ...]],
    spec: Path | None,
    allow: tuple[str, ...],
    protect: tuple[str, ...],
    repo: Path | None,
) -> targets.ChangeRequest:
    return targets.ChangeRequest(
        sides[0], sides[1], spec, frozenset(allow), frozenset(protect), repo
    )


@click.command("plan")
@_with_common_several
@format_option(help="text, or json: print the plan as JSON.")
@output_option(help="Write the JSON plan here.")
@profile_option
@click.option("--force", is_flag=True, help="With -o: replace a file that is not a tierctl plan.")
def plan(
    old: tuple[str, ...],
    new: tuple[str, ...],
    spec: Path | None,
    allow: tuple[str, ...],
    protect: tuple[str, ...],
    repo: Path | None,
    fleet_path: Path | None,
    target: str,
    fmt: str,
    output: Path | None,
    profile: tuple[str, ...],
    force: bool,
) -> None:
    """Plan a rollout between two compose files: which services change, in what order.

    Each side may be several files (--from base.yml --from override.yml), merged as
    ``docker compose -f base.yml -f override.yml`` merges them. With --profile (or
    COMPOSE_PROFILES), only the services those profiles run are planned.
    With --fleet FLEET, every host of the fleet file is planned and the waves are shown.
    """
    ctx = click.get_current_context()
    sides = _sides(
        ctx, old, new, fleet_path, ("allow", "protect", "repo", "output", "profile", "force")
    )
    if sides is None:
        assert fleet_path is not None
        targets.for_step(target, "fleet")
        show_fleet_plan(fleet_path, spec, fmt == "json")
        return
    request = replace(_change(sides, spec, allow, protect, repo), profiles=chosen_profiles(profile))
    planned = targets.for_step(target, "plan").plan(request)
    data = planned.data if planned.data is not None else planned.text
    if output is not None:
        write_owned(
            output, data + "\n", ours=planned.ours, force=force,
            protect=_inputs(*sides, spec), what="plan",
        )  # fmt: skip
    click.echo(data if fmt == "json" else planned.text)


@dataclass(frozen=True)
class RolloutArgs(OptionArgs):
    """Every option of ``tierctl rollout``, as the target's rollout takes them: one field per
    click option, named as its parameter (tests/unit/cli/test_option_args.py)."""

    # which plan, where it is journaled
    plan_path: Path | None
    fleet_path: Path | None
    target: str
    driver: str | None
    journal_path: Path | None
    resume: bool
    dry_run: bool
    repo: Path | None
    # the compose-manager driver
    agent_url: str | None
    token_env: str
    token_file: Path | None
    tag_old: str | None
    tag_new: str | None
    pass_env: tuple[str, ...]
    agent_timeout_s: float
    agent_idle_timeout_s: float
    agent_attempts: int
    # the docker driver
    project: str | None
    docker_host: str | None
    docker_context: str | None
    compose_binary: str | None
    # the local driver
    state_dir: Path
    time_scale: float
    engine: str
    start_timeout_s: float
    # the gates
    gate_host: str
    prometheus_url: str | None
    host_label: str | None
    health_timeout_s: float
    metrics_timeout_s: float
    soak_s: float
    max_error_rate: float
    proxy_drain: bool
    skip_gate: tuple[str, ...]
    # --fleet only
    spec: Path | None
    approve_wave: int | None
    note: str
    pause_s: float | None
    approval: bool | None
    max_parallel: int | None
    on_failure: str | None


@click.command("rollout")
@click.option(
    "--plan",
    "plan_path",
    type=click.Path(path_type=Path),
    help="Plan JSON from `tierctl plan -o` (one host).",
)
@fleet_option(
    help="Roll out over this fleet file's hosts in waves, each through its agent (docs/fleet.md)."
)
@click.option("--driver", type=click.Choice(["compose-manager", "docker", "local"]))
@click.option(
    "--journal",
    "journal_path",
    type=click.Path(path_type=Path),
    help="Journal file [PLAN.journal.jsonl].",
)
@click.option("--resume", is_flag=True, help="Continue the journal; finished steps are skipped.")
@click.option("--dry-run", is_flag=True, help="Run every step's dry run only; apply nothing.")
@click.option("--repo", type=click.Path(path_type=Path), help="Repository for git:REF:PATH.")
@click.option("--agent-url", help="compose-manager URL.")
@click.option(
    "--token-env",
    default="TIERCTL_AGENT_TOKEN",
    show_default=True,
    help="Env var holding the agent token.",
)
@click.option("--token-file", type=click.Path(path_type=Path), help="File holding the agent token.")
@click.option("--tag-old", help="compose-manager tag of OLD (default: its git ref).")
@click.option("--tag-new", help="compose-manager tag of NEW (default: its git ref).")
@click.option(
    "--pass-env", multiple=True, help="Forward this env var to the agent (value never shown)."
)
@click.option("--project", help="Compose project name.")
@click.option(
    "--docker-host", help="Docker driver: the engine (DOCKER_HOST: unix://, tcp://, ssh://...)."
)
@click.option("--docker-context", help="Docker driver: a Docker context to use instead.")
@click.option("--compose-binary", help="Docker driver: the compose command (default: found).")
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path),
    default=Path(".tierctl-rollout/local"),
    show_default=True,
    help="Local driver state.",
)
@click.option(
    "--time-scale",
    type=float,
    default=100.0,
    show_default=True,
    help="Local driver: modelled seconds per wall second.",
)
@local_engine_option(
    help="Local driver: the simulated engine, or the real one (vLLM on CPU, scripts/ensure-vllm)."
)
@click.option(
    "--start-timeout-s",
    type=float,
    default=420.0,
    show_default=True,
    help="Local driver: how long an engine has to become ready.",
)
@click.option(
    "--gate-host", default="127.0.0.1", show_default=True, help="Host the gates reach engines on."
)
@click.option(
    "--agent-timeout-s",
    type=click.FloatRange(min=0.1),
    default=600.0,
    show_default=True,
    help="Deadline of one compose-manager call, answer stream included (pulls can be slow).",
)
@click.option(
    "--agent-idle-timeout-s",
    type=click.FloatRange(min=0),
    default=15.0,
    show_default=True,
    help="With an agent whose streams beat (tierctl agent): a stream silent this long is a "
    "host that stopped answering (0: wait the whole --agent-timeout-s).",
)
@click.option(
    "--agent-attempts",
    type=click.IntRange(min=1, max=20),
    default=4,
    show_default=True,
    help="Tries of an idempotent compose-manager call.",
)
@prometheus_option("prometheus_url", help="Prometheus to query for the variant gates.")
@click.option(
    "--host-label", help="host_machine label for the Prometheus query [NEW's x-tierctl.host]."
)
@click.option(
    "--health-timeout-s",
    type=float,
    default=120.0,
    show_default=True,
    help="How long a recreated engine has to answer its health path.",
)
@click.option(
    "--metrics-timeout-s",
    type=float,
    default=120.0,
    show_default=True,
    help="How long the new variant may take to show in Prometheus.",
)
@click.option(
    "--soak-s", type=float, default=0.0, show_default=True, help="Soak window per engine step."
)
@click.option(
    "--max-error-rate",
    type=float,
    default=0.01,
    show_default=True,
    help="Highest aborted/finished ratio the soak accepts.",
)
@click.option(
    "--proxy-drain/--no-proxy-drain",
    default=True,
    show_default=True,
    help="Take each engine replica out of the tier's proxy (sglang-router) before its step "
    "stops it, and put it back once its gates pass.",
)
@click.option(
    "--skip-gate",
    multiple=True,
    help="Do not run this gate (repeatable). "
    + "; ".join(f"{g.name}: {g.help}" for g in GATE_DEFS.values())
    + ".",
    type=click.Choice(gate_names()),
)
@fleet_run_options
@target_option(auto=False, help="Where the tier runs (the deployment target).")
@into(RolloutArgs)
def rollout(args: RolloutArgs) -> ExitCode:
    """Execute a plan one service at a time: dry run, apply, gates, rollback on failure.

    With --fleet FLEET: every host, in waves; exit 0 done, 1 a host failed (the fleet
    halted), 4 stopped before a wave awaiting its approval (--resume --approve-wave N).
    """
    ctx = click.get_current_context()
    adapter = targets.for_step(args.target, "rollout")
    if args.fleet_path is not None:
        targets.for_step(args.target, "fleet")
        refuse_with_fleet(
            ctx, ONE_HOST_ONLY, "each host's agent and files come from the fleet file"
        )
    else:
        _one_host(ctx)
    return adapter.rollout(args)


def _one_host(ctx: click.Context) -> None:
    """A one-host rollout: --plan and --driver given, no fleet-only option."""
    given = [
        "--" + name.replace("_", "-")
        for name in FLEET_ONLY
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
    ]
    if given:
        raise click.UsageError(f"{', '.join(given)}: only with --fleet FLEET", ctx=ctx)
    if ctx.params["plan_path"] is None or ctx.params["driver"] is None:
        raise click.UsageError(
            "give --plan PLAN and --driver (one host), or --fleet FLEET", ctx=ctx
        )


@click.command("runbook")
@_with_common_several
@output_option(help="Write the Markdown here.")
@click.option(
    "--force", is_flag=True, help="With -o: replace a file that is not a tierctl runbook."
)
@click.option(
    "--manifest",
    help="Kubernetes: where NEW's rendering is (default: its render --target kubernetes output).",
)
@click.option(
    "--old-manifest",
    help="Kubernetes: a kept copy of OLD's rendering for the rollback (default: the rollback "
    "renders OLD on the spot).",
)
def runbook(
    old: tuple[str, ...],
    new: tuple[str, ...],
    spec: Path | None,
    allow: tuple[str, ...],
    protect: tuple[str, ...],
    repo: Path | None,
    fleet_path: Path | None,
    target: str,
    output: Path | None,
    force: bool,
    manifest: str | None,
    old_manifest: str | None,
) -> None:
    """Write the Markdown runbook of the rollout from OLD to NEW (with --fleet FLEET: the
    fleet's, wave by wave and host by host; with --target kubernetes, OLD and NEW are tier
    specs and the runbook is kubectl's, replica by replica)."""
    ctx = click.get_current_context()
    only = ("allow", "protect", "repo", "manifest", "old_manifest")
    sides = _sides(ctx, old, new, fleet_path, only)
    if sides is None:
        assert fleet_path is not None
        targets.for_step(target, "fleet")
        write_fleet_runbook(fleet_path, spec, output, force)
        return
    request = replace(
        _change(sides, spec, allow, protect, repo), manifest=manifest, old_manifest=old_manifest
    )
    write_runbook(target, request, output, force)


def write_runbook(
    target: str, request: targets.ChangeRequest, output: Path | None, force: bool = False
) -> None:
    """The target's runbook of ``request``, printed or written to ``output``."""
    done = targets.for_step(target, "runbook").runbook(request)
    if output is not None:
        text = done.text if done.text.endswith("\n") else done.text + "\n"
        write_owned(
            output, text, ours=done.ours, force=force,
            protect=_inputs(request.old, request.new, request.spec), what="runbook",
        )  # fmt: skip
    else:
        click.echo(done.text)
