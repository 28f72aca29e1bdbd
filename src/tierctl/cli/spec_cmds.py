"""``tierctl schema``, ``tierctl render`` and ``tierctl show``."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tierctl.cli import targets
from tierctl.cli.options import format_option, output_option, target_option
from tierctl.cli.profiles import chosen_profiles, profile_option
from tierctl.cli.targets import RenderRequest
from tierctl.contracts.report import Violation
from tierctl.errors import ExitCode, InputError
from tierctl.render import render_compose
from tierctl.render.files import RenderCheck, check_rendered, write_rendered
from tierctl.spec import load_spec, resolve_tier
from tierctl.spec.summary import summarise
from tierctl.spec.tier_spec import TierSpec


@click.command()
@click.option("--indent", default=2, show_default=True, help="JSON indentation.")
def schema(indent: int) -> None:
    """Print the JSON Schema of the tier spec (for editors and CI)."""
    doc = TierSpec.model_json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["title"] = "tierctl tier spec"
    click.echo(json.dumps(doc, indent=indent, sort_keys=False))


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--write", "write", is_flag=True, help="Write the file the spec names in `output`.")
@click.option("--check", "check", is_flag=True, help="Exit 1 with a diff when that file is stale.")
@output_option(
    file_only=True, help="Compare with / write to this path instead of the spec's `output`."
)
@click.option(
    "--force", is_flag=True, help="With --write: overwrite a file tierctl did not generate."
)
@click.option(
    "--allow-outside", is_flag=True, help="Allow the spec's `output` outside the spec's folder."
)
@click.option(
    "--allow-invalid",
    is_flag=True,
    help="With --write: write even when validate would reject the rendering.",
)
@target_option(
    auto=False,
    help="What to render: the compose file, or Kubernetes objects (docs/kubernetes.md).",
)
@profile_option
def render(
    spec: Path,
    write: bool,
    check: bool,
    output: Path | None,
    force: bool,
    allow_outside: bool,
    allow_invalid: bool,
    target: str,
    profile: tuple[str, ...],
) -> ExitCode:
    """Render SPEC into a docker compose file (printed unless --write or --check).

    The rendering is validated first (the pinned release's flag catalog, GPUs, ports, schema,
    pairing rules): --write refuses what validate would reject, naming the tier.yaml line;
    printing and --check warn. With --profile (or COMPOSE_PROFILES) the checks that compare
    services (GPUs, ports) look at the project those profiles run; without, at the default
    set and each profile's set separately.
    """
    if write and check:
        raise InputError(
            "--write and --check exclude each other", rule="usage", fix="pass one of them"
        )
    tier_spec = load_spec(spec)
    request = RenderRequest(
        tier_spec, spec, output, write or check, allow_outside, chosen_profiles(profile)
    )
    out = targets.for_step(target, "render").render(request)
    return _finish(
        out.text,
        out.path,
        spec,
        out.violations,
        (write, check, force, allow_invalid),
        out.command,
    )


def _finish(
    text: str,
    target: Path,
    spec: Path,
    violations: Sequence[Violation],
    modes: tuple[bool, bool, bool, bool],
    extra: str = "",
) -> ExitCode:
    """Print the gate's findings, then check, write or print the rendering; ``modes``:
    (write, check, force, allow_invalid)."""
    write, check, force, allow_invalid = modes
    for violation in violations:
        prefix = "error" if write and not allow_invalid else "warning"
        click.echo(f"{prefix}: {violation.line()}", err=True)
    if violations and write and not allow_invalid:
        click.echo(
            f"{target}: not written: validate would reject it ({len(violations)} "
            "problem(s)); fix the spec, or pass --allow-invalid",
            err=True,
        )
        return ExitCode.USAGE
    if check:
        result: RenderCheck = check_rendered(text, target)
        if result.fresh:
            click.echo(f"{target}: up to date")
            return ExitCode.OK
        sys.stdout.write(result.diff)
        click.echo(f"{target}: stale; run `tierctl render{extra} --write {spec}`", err=True)
        return ExitCode.FAILURE
    if write:
        outcome = write_rendered(text, target, force=force, spec=spec)
        click.echo(f"{target}: {outcome}")
        return ExitCode.OK
    sys.stdout.write(text)
    return ExitCode.OK


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@format_option(help="text, or json: machine-readable output.")
def show(spec: Path, fmt: str) -> None:
    """Summarise a tier: replicas, their argv differences and their variants, and what
    validate would reject in its rendering (an unknown flag, a bad value), as render warns."""
    from tierctl.contracts.spec_gate import check_rendering

    tier_spec = load_spec(spec)
    summary = summarise(resolve_tier(tier_spec))
    # The first command a newcomer runs says what render would warn about: the same gate.
    gate = check_rendering(tier_spec, render_compose(tier_spec, spec_path=spec), spec)
    if fmt == "json":
        doc = summary.to_dict()
        doc["problems"] = [v.line() for v in gate.violations]
        doc["unchecked"] = list(gate.unchecked)
        click.echo(json.dumps(doc, indent=2))
        return
    # Wide enough for full service names and variants when piped (rich defaults to 80).
    # Every string from the spec is a Text, never markup: a host "a[/]b" was a MarkupError and
    # a variant "[fp8]" vanished; rich's highlighter is off (quadratic on a 100 KB host).
    console = Console(width=None if sys.stdout.isatty() else 160, highlight=False)
    title = Text()
    title.append(summary.tier, style="bold")
    title.append(" on ")
    title.append(summary.host, style="bold")
    title.append(f": {summary.engine}")
    console.print(title)
    table = Table(show_header=True, header_style="bold")
    for col in ("replica", "service", "role", "GPUs", "port", "config_variant"):
        table.add_column(col, overflow="fold")
    for r in summary.replicas:
        table.add_row(*map(Text, (r.name, r.service, r.role, r.gpus, str(r.port), r.variant)))
    console.print(table)
    if summary.differences:
        diff = Table(title="argv and env differences between replicas", header_style="bold")
        diff.add_column("setting")
        for r in summary.replicas:
            diff.add_column(Text(r.name))
        for row in summary.differences:
            diff.add_row(Text(row.setting), *map(Text, row.values))
        console.print(diff)
    else:
        console.print("replicas run identical argv and env (apart from GPUs)")
    for line in summary.notes:
        console.print(Text(line))
    for violation in gate.violations:
        click.echo(f"warning: {violation.line()}", err=True)
    for note in gate.unchecked:
        click.echo(f"note: not checked: {note}", err=True)
    if gate.violations:
        click.echo(
            f"{len(gate.violations)} problem(s) that validate would reject in the rendering: "
            "fix them in the spec (tierctl validate lists the same)",
            err=True,
        )
