"""``tierctl stop``: stop the engines a local-driver rollout or the demo left running."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".tierctl-rollout/local"),
    show_default=True,
    help="The local driver's state directory (the rollout's --state-dir).",
)
def stop(state_dir: Path) -> None:
    """Stop every engine process the local driver recorded in STATE_DIR."""
    from tierctl.rollout.drivers.local import LocalDriver

    if not (state_dir / "state.json").exists():
        click.echo(f"{state_dir}: no local-driver state; nothing to stop")
        return
    results = LocalDriver(state_dir, launcher=[]).stop_recorded()
    if not results:
        click.echo(f"{state_dir}: nothing running")
    for service, pid, outcome in results:
        click.echo(f"{service} (pid {pid}): {outcome}")
