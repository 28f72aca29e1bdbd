"""``tierctl kube plan OLD NEW``: the old spelling of ``tierctl runbook --target kubernetes
--from OLD --to NEW`` (hidden from ``tierctl --help``; it says so on stderr and prints the same
runbook, through the targets registry like every command)."""

from __future__ import annotations

from pathlib import Path

import click

from tierctl.errors import ExitCode


@click.group(hidden=True)
def kube() -> None:
    """Kubernetes: deprecated, use `tierctl runbook --target kubernetes` (docs/kubernetes.md)."""


@kube.command()
@click.argument("old", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("new", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--manifest",
    default=None,
    help="Where NEW's rendering is (default: its render --target kubernetes output).",
)
@click.option(
    "--old-manifest",
    default=None,
    help="A kept copy of OLD's rendering for the rollback (default: the rollback renders "
    "OLD on the spot).",
)
def plan(old: Path, new: Path, manifest: str | None, old_manifest: str | None) -> ExitCode:
    """Print the runbook from OLD's Kubernetes rendering to NEW's (deprecated: use
    `tierctl runbook --target kubernetes --from OLD --to NEW`)."""
    from tierctl.cli import targets
    from tierctl.cli.rollout import write_runbook

    click.echo(
        "warning: kube plan is deprecated: use runbook --target kubernetes --from OLD --to NEW",
        err=True,
    )
    request = targets.ChangeRequest(
        (str(old),), (str(new),), manifest=manifest, old_manifest=old_manifest
    )
    write_runbook("kubernetes", request, None)
    return ExitCode.OK
