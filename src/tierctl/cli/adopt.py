"""``tierctl import``: write a tier spec for an existing compose file."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tierctl.cli import targets
from tierctl.cli.options import output_option
from tierctl.cli.profiles import chosen_profiles, profile_option
from tierctl.cli.targets import ImportRequest
from tierctl.errors import ExitCode, InputError, Location, label_params
from tierctl.readers import read_once


@click.command(name="import")
@click.argument(
    "compose", nargs=-1, required=True, type=click.Path(path_type=Path, allow_dash=True)
)
@output_option("out", file_only=True, help="Write the spec here (default: print it).")
@click.option("--tier", help="Tier name (default: the file's name:, else its folder's name).")
@click.option("--host", default="localhost", show_default=True, help="Host the tier runs on.")
@click.option(
    "--engine", help="KIND==VERSION when the engine image tag names no release (sglang==0.5.9)."
)
@click.option(
    "--engine-service",
    "engine_services",
    multiple=True,
    metavar="NAME",
    help="A service that runs the engine though its image and command name no known launcher "
    "(a custom image, an entrypoint script); with --engine KIND==VERSION. Repeatable.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing --output file.")
@profile_option
def adopt_cmd(
    compose: tuple[Path, ...],
    out: Path | None,
    tier: str | None,
    host: str,
    engine: str | None,
    engine_services: tuple[str, ...],
    force: bool,
    profile: tuple[str, ...],
) -> ExitCode:
    """Write a tier spec for COMPOSE files (merged like docker compose -f a -f b).

    Replicas of one engine are grouped (shared flags, env and keys become the engine's), every
    other service is kept as it is. The spec is checked: it loads, and its rendering is
    equivalent to the input (exit 1 with the differences otherwise). With --profile (or
    COMPOSE_PROFILES), only the services those compose profiles run are imported.
    """
    from tierctl.paths import check_output_path, write_owned

    target = out or Path("tier.yaml")
    check_output_path(target, "spec")
    if out is not None and out.exists() and not force:
        raise InputError(
            "refusing to overwrite an existing file",
            location=Location(file=str(out)),
            rule="no-clobber",
            fix="pick another --output, or pass --force",
        )
    request = ImportRequest(
        compose, target, tier, host, engine, engine_services, chosen_profiles(profile), out
    )
    with read_once():
        result = targets.checked(targets.detect(compose), "import").import_files(request)
    if out is None:
        sys.stdout.write(result.text)
    else:
        # An existing file was refused above unless --force was given.
        out.parent.mkdir(parents=True, exist_ok=True)
        write_owned(out, result.text, ours=lambda _old: False, force=True, what="spec")
        click.echo(
            f"{out}: written ({result.replicas} replicas, {result.services} services)", err=True
        )
    return _round_trip(result.notes, result.differences, result.differ, result.same)


def _round_trip(notes: list[str], differences: list[str], differ: str, same: str) -> ExitCode:
    """Print the import's notes (in the command's option names) and its round trip;
    FAILURE when the spec differs."""
    from tierctl.cli.main import option_labels

    labels = option_labels(["import"])
    for note in notes:
        click.echo(
            f"warning: {label_params(note, ('engine', 'engine_services'), labels)}", err=True
        )
    if differences:
        click.echo(f"round trip: {differ}:", err=True)
        for line in differences:
            click.echo(f"  {line}", err=True)
        return ExitCode.FAILURE
    click.echo(f"round trip: {same}", err=True)
    return ExitCode.OK
