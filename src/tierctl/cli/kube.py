"""``tierctl kube plan``: the Kubernetes rollout of a spec change, as a runbook."""

from __future__ import annotations

from pathlib import Path

import click

from tierctl.errors import ExitCode, InputError, Location
from tierctl.spec import load_spec


@click.group()
def kube() -> None:
    """Kubernetes: the rollout of a spec change (docs/kubernetes.md)."""


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
    """Print the runbook from OLD's Kubernetes rendering to NEW's: the objects that change,
    one replica at a time (canary first), server-side dry run, diff, apply, wait, rollback."""
    from tierctl.kube.plan import kube_plan
    from tierctl.render.kubernetes import kube_output_name

    if old_manifest is not None and not Path(old_manifest).is_file():
        raise InputError(
            f"--old-manifest {old_manifest}: no such file (a rollback would apply nothing)",
            location=Location(file=old_manifest),
            rule="the rollback applies a rendering that exists",
            fix="leave --old-manifest out (the rollback renders OLD), or save OLD's "
            "rendering there first: tierctl render --target kubernetes OLD > FILE",
        )
    old_spec, new_spec = load_spec(old), load_spec(new)
    target = manifest or str(new.parent / kube_output_name(new_spec.output))
    runbook = kube_plan(old_spec, new_spec, target, old_manifest, str(old))
    click.echo(runbook.markdown(target), nl=False)
    return ExitCode.OK
