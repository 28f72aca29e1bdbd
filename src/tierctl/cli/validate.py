"""``tierctl validate``: check compose files against the spec's contracts."""

from __future__ import annotations

from pathlib import Path

import click

from tierctl.contracts.validation import validate_paths
from tierctl.errors import ExitCode


@click.command()
@click.option(
    "--spec", "spec_path", required=True, type=click.Path(path_type=Path), help="The tier spec."
)
@click.option(
    "--catalog",
    help="Flag catalog to use: ENGINE==VERSION (shipped) or a catalog JSON file. "
    "Default: the shipped catalog of the spec's pinned release.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.argument("compose", nargs=-1, type=click.Path(path_type=Path))
def validate(spec_path: Path, catalog: str | None, fmt: str, compose: tuple[Path, ...]) -> ExitCode:
    """Check COMPOSE files (default: the spec's rendered file) against the contracts.

    Exit 0 when every contract holds, 1 with violations, 2 for unusable input.
    """
    report = validate_paths(spec_path, compose, catalog=catalog)
    click.echo(report.to_json() if fmt == "json" else report.text())
    return report.exit_code
