"""``tierctl kube plan``: the Kubernetes rollout of a spec change, as a runbook."""

from __future__ import annotations

from pathlib import Path

import click

from tierctl.errors import ExitCode
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
@click.option("--old-manifest", default="old.k8s.yaml", show_default=True, help="OLD's rendering.")
def plan(old: Path, new: Path, manifest: str | None, old_manifest: str) -> ExitCode:
    """Print the runbook from OLD's Kubernetes rendering to NEW's: the objects that change,
    one replica at a time (canary first), server-side dry run, diff, apply, wait, rollback."""
    from tierctl.kube.plan import kube_plan
    from tierctl.render.kubernetes import kube_output_name

    old_spec, new_spec = load_spec(old), load_spec(new)
    target = manifest or str(new.parent / kube_output_name(new_spec.output))
    click.echo(kube_plan(old_spec, new_spec, target, old_manifest).markdown(target), nl=False)
    return ExitCode.OK
