"""The docker compose target: render with ``render.compose``, validate with ``contracts``,
import with ``adopt``, plan, runbook and roll out (one host, or a fleet in waves) with
``rollout``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import click

from tierctl.cli.targets import (
    ChangeRequest,
    Imported,
    ImportRequest,
    Planned,
    Rendering,
    RenderRequest,
    ValidateRequest,
)
from tierctl.contracts.report import Report
from tierctl.errors import ExitCode, InputError

if TYPE_CHECKING:
    from tierctl.cli.rollout import RolloutArgs
    from tierctl.rollout.entrypoints import DriverConfig
    from tierctl.rollout.executor import RolloutOptions, RolloutResult


class ComposeTarget:
    """docker compose files: the default target (claims what no other does)."""

    name = "compose"
    modules: Mapping[str, str] = MappingProxyType(
        {
            "render": "tierctl.render.compose",
            "validate": "tierctl.contracts.validation",
            "import": "tierctl.adopt.compose",
            "plan": "tierctl.rollout.planner",
            "runbook": "tierctl.rollout.runbook",
            "rollout": "tierctl.rollout.executor",
            "fleet": "tierctl.rollout.fleet",
        }
    )

    def claims(self, paths: Sequence[Path]) -> bool:
        """Compose files carry no marker another target's lack: the fallback claims nothing."""
        return False

    def render(self, request: RenderRequest) -> Rendering:
        """The compose file, gated by the spec gate (the contracts validate runs)."""
        from tierctl.contracts.spec_gate import check_rendering
        from tierctl.render import output_path, render_compose
        from tierctl.render.files import spec_output

        spec, spec_path = request.spec, request.spec_path
        text = render_compose(spec, spec_path=spec_path)
        path = request.output or output_path(spec, spec_path)
        if request.output is None and request.writes:
            # The spec's own output stays in its folder unless asked (paths.resolve_inside).
            path = spec_output(spec.output, spec_path, allow_outside=request.allow_outside)
        gate = check_rendering(spec, text, spec_path, profiles=request.profiles)
        return Rendering(text, path, gate.violations)

    def validate(self, request: ValidateRequest) -> Report:
        """The files against the spec's contracts, or on their own without one."""
        if request.spec_path is not None:
            from tierctl.contracts.validation import validate_paths

            return validate_paths(
                request.spec_path,
                request.paths,
                catalog=request.catalog,
                profiles=request.profiles,
                compose_check=request.compose_check,
            )
        if not request.paths:
            raise InputError(
                "nothing to validate",
                rule="usage",
                fix="pass --spec tier.yaml, or the compose files to check on their own",
            )
        from tierctl.contracts.standalone import validate_files

        return validate_files(
            request.paths,
            engine=request.engine or request.catalog,
            strict=request.strict,
            profiles=request.profiles,
            compose_check=request.compose_check,
        )

    def import_files(self, request: ImportRequest) -> Imported:
        """A spec for compose files (merged like ``docker compose -f a -f b``)."""
        from tierctl.adopt.compose import adopt

        result = adopt(
            request.paths,
            out=request.out,
            tier=request.tier,
            host=request.host,
            engine=request.engine,
            engine_services=request.engine_services,
            profiles=request.profiles,
        )
        return Imported(
            result.text,
            len(result.spec.replicas),
            len(result.spec.services),
            result.notes,
            result.differences,
        )

    def plan(self, request: ChangeRequest) -> Planned:
        """The plan between two sets of compose files (the plan as data: JSON)."""
        import json

        from tierctl.cli.rollout import format_plan
        from tierctl.rollout.entrypoints import make_plan
        from tierctl.rollout.plan_schema import is_plan

        _no_manifest(request)
        profiles = tuple(request.profiles) if request.profiles is not None else None
        result = make_plan(request.old, request.new, profiles=profiles, **_change_inputs(request))
        data = json.dumps(result.model_dump(mode="json"), indent=2)
        return Planned(format_plan(result), is_plan, data)

    def runbook(self, request: ChangeRequest) -> Planned:
        """The Markdown runbook: each step's docker compose commands, gates and rollback."""
        from tierctl.rollout.entrypoints import make_runbook
        from tierctl.rollout.runbook import is_runbook

        _no_manifest(request)
        text = make_runbook(request.old, request.new, **_change_inputs(request))
        return Planned(text, is_runbook)

    def rollout(self, args: RolloutArgs) -> ExitCode:
        """A plan run on one host through its driver, or a fleet's waves (``--fleet``)."""
        if args.fleet_path is not None:
            return _rollout_fleet(args)
        from tierctl.progress import RolloutWaits
        from tierctl.rollout.entrypoints import execute_plan

        assert args.plan_path is not None
        with RolloutWaits() as waits:
            result = execute_plan(
                args.plan_path,
                _driver_config(args),
                _rollout_options(args),
                repo=args.repo,
                log=lambda m: click.echo(m, err=True),
                progress=waits,
            )
        _print_outcomes(result)
        return ExitCode.OK


def _change_inputs(request: ChangeRequest) -> dict[str, Any]:
    """What the plan and the runbook both read from a change besides its two file sets."""
    return {
        "spec": request.spec,
        "allow": request.allow,
        "protect": request.protect,
        "repo": request.repo,
    }


def _no_manifest(request: ChangeRequest) -> None:
    """--manifest and --old-manifest name Kubernetes renderings: refused here."""
    given = [
        name
        for name, value in (
            ("--manifest", request.manifest),
            ("--old-manifest", request.old_manifest),
        )
        if value is not None
    ]
    if given:
        raise InputError(
            f"{', '.join(given)}: the compose target's plan reads its files from --from/--to",
            rule="--manifest and --old-manifest are the Kubernetes target's",
            fix="leave them out, or pass --target kubernetes with tier specs as OLD and NEW",
        )


def _driver_config(args: RolloutArgs) -> DriverConfig:
    from tierctl.rollout.entrypoints import DriverConfig

    assert args.driver is not None
    tags = {k: v for k, v in (("old", args.tag_old), ("new", args.tag_new)) if v}
    return DriverConfig(
        name=args.driver,  # type: ignore[arg-type]
        agent_url=args.agent_url,
        token_env=args.token_env,
        token_file=args.token_file,
        tags=tags,
        pass_env=args.pass_env,
        project=args.project,
        docker_host=args.docker_host,
        docker_context=args.docker_context,
        compose_binary=args.compose_binary,
        state_dir=args.state_dir,
        time_scale=args.time_scale,
        engine=args.engine,  # type: ignore[arg-type]
        start_timeout_s=args.start_timeout_s,
        gate_host=args.gate_host,
        agent_timeout_s=args.agent_timeout_s,
        agent_idle_timeout_s=args.agent_idle_timeout_s,
        agent_attempts=args.agent_attempts,
    )


def _rollout_options(args: RolloutArgs) -> RolloutOptions:
    from tierctl.rollout.executor import RolloutOptions
    from tierctl.rollout.gates import GateSettings

    assert args.plan_path is not None
    return RolloutOptions(
        journal_path=args.journal_path or _journal_beside(args.plan_path),
        resume=args.resume,
        dry_run=args.dry_run,
        gates=GateSettings(
            prometheus_url=args.prometheus_url,
            host_label=args.host_label,
            health_timeout_s=args.health_timeout_s,
            metrics_timeout_s=args.metrics_timeout_s,
            soak_s=args.soak_s,
            max_error_rate=args.max_error_rate,
            skip=frozenset(args.skip_gate),
        ),
        proxy_drain=args.proxy_drain,
    )


def _print_outcomes(result: RolloutResult) -> None:
    if result.already_completed:
        click.echo(f"already completed: {len(result.outcomes)} step(s), nothing run")
    else:
        for o in result.outcomes:
            click.echo(f"{o.step}: {o.status}")
    if result.journal is not None:
        click.echo(f"journal: {result.journal}")


def _rollout_fleet(args: RolloutArgs) -> ExitCode:
    """``rollout --fleet``: the fleet run (the one-host options were refused by the command)."""
    from tierctl.cli.fleet import FleetRun, run_fleet_rollout

    gates = ("prometheus_url", "health_timeout_s", "metrics_timeout_s", "soak_s", "max_error_rate")
    p = args.params()
    assert args.fleet_path is not None
    run = FleetRun(
        fleet_path=args.fleet_path, journal_path=args.journal_path, resume=args.resume,
        dry_run=args.dry_run, spec=args.spec, approve_wave=args.approve_wave, note=args.note,
        pause_s=args.pause_s, approval=args.approval, max_parallel=args.max_parallel,
        on_failure=args.on_failure, pass_env=args.pass_env,
        agent_timeout_s=args.agent_timeout_s, agent_attempts=args.agent_attempts,
        agent_idle_timeout_s=args.agent_idle_timeout_s,
        gates={**{g: p[g] for g in gates}, "skip": frozenset(args.skip_gate)},
        proxy_drain=args.proxy_drain,
    )  # fmt: skip
    return run_fleet_rollout(run)


def _journal_beside(plan_path: Path) -> Path:
    """The default journal, ``PLAN.journal.jsonl`` beside the plan; a plan path with no file
    name (``""``, ``.``, ``/``) is refused here (sweep seed 5150301 input 12953, ``--plan ""``:
    ``Path.with_suffix`` raised ValueError)."""
    if not plan_path.name or plan_path.name == "..":
        raise InputError(
            "the plan path names a folder, not a plan file",
            rule="plan-file",
            value=str(plan_path),
            fix="pass the plan file `tierctl plan` wrote, e.g. --plan plan.json",
            params=("plan",),
        )
    return plan_path.with_suffix(".journal.jsonl")


TARGET = ComposeTarget()
