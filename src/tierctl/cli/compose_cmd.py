"""``tierctl compose config``: tierctl's own reading of a compose project, in Compose's shape."""

from __future__ import annotations

import json
from pathlib import Path

import click
import yaml

from tierctl.cli.options import format_option
from tierctl.errors import ExitCode


@click.group()
def compose() -> None:
    """Compose projects as tierctl reads them."""


@compose.command("config")
@click.option("--profile", "profiles", multiple=True, help="Enable a profile (repeatable).")
@click.option(
    "--env-file",
    "env_files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="An alternate environment file (repeatable; default: .env in the project folder).",
)
@click.option(
    "--project-directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="The project folder (default: the first file's folder).",
)
@click.option("-p", "--project-name", help="The project name (default: name: or the folder).")
@format_option(("json", "yaml"))
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def config(
    profiles: tuple[str, ...],
    env_files: tuple[Path, ...],
    project_directory: Path | None,
    project_name: str | None,
    fmt: str,
    files: tuple[Path, ...],
) -> ExitCode:
    """Print FILES merged and normalised as `docker compose config --format json` does.

    tierctl's own reader, no Docker needed: diff its output with Compose's to see that both
    read the project the same. Exit 2 (with file:line) where Compose would refuse it.
    """
    from tierctl.compose.project import ProjectOptions, json_form, project_config
    from tierctl.contracts.schema import refuse_invalid

    options = ProjectOptions(
        profiles=profiles,
        env_files=tuple(str(e) for e in env_files),
        project_directory=str(project_directory) if project_directory else None,
        project_name=project_name,
    )
    data = project_config(files, options, check=refuse_invalid)
    if fmt == "json":
        click.echo(json.dumps(json_form(data), indent=2))
    else:
        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), nl=False)
    return ExitCode.OK
