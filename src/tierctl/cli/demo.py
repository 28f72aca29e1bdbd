"""``tierctl demo``: both field stories on one machine, on the bundled tier or any spec
with a canary.

Each stage calls the same library functions as the individual commands and prints what an
operator would see; the demo stops at the first stage that fails.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from tierctl.demo import DEFAULT_SPEC, run_demo
from tierctl.errors import ExitCode


@click.command()
@click.option(
    "--spec",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Tier spec to use (default: the bundled GLM-5.3 long-context example).",
)
@click.option("--quick", is_flag=True, help="Only the offline stages (no servers).")
@click.option(
    "--cost-model",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Cost model file (`tierctl sim fit --output`) for the what-if and the simulated engines "
    "(default: the bundled GLM-5.3 preset).",
)
@click.option(
    "--fleet",
    "fleet",
    is_flag=True,
    help="The fleet act instead: three hosts (each its own dockerd and tierctl agent), a fleet "
    "plan, a 2-wave rollout canary first, a readout, an approval (root and docker.io; "
    "`make demo-fleet`).",
)
def demo(spec: Path | None, quick: bool, cost_model: Path | None, fleet: bool) -> ExitCode:
    """Both field stories: render, validate, simulate; act 1 the scheduler canary (roll out,
    A/B, live, read out); act 2 the ingestion incident through the real sglang-router.
    With --fleet: the three-host story."""
    console = Console(width=None if Console().is_terminal else 140)
    if fleet:
        import tempfile

        from tierctl.demo.fleet import run_fleet_demo

        if spec is not None or quick or cost_model is not None:
            raise click.UsageError(
                "--fleet runs its own three-host story: no --spec/--quick/--cost-model"
            )
        workdir = Path(tempfile.mkdtemp(prefix="tierctl-demo-fleet-"))
        return ExitCode.OK if run_fleet_demo(console, workdir) else ExitCode.FAILURE
    ok = run_demo(spec or DEFAULT_SPEC, console=console, quick=quick, cost_model=cost_model)
    return ExitCode.OK if ok else ExitCode.FAILURE
