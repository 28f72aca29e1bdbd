"""``tierctl real-engine``: the real engine on this machine (vLLM on CPU) and its tiny model."""

from __future__ import annotations

from pathlib import Path

import click


@click.group("real-engine")
def real_engine() -> None:
    """The real engine here: vLLM 0.32 on CPU serving a tiny Llama made locally."""


@real_engine.command("python")
def python_cmd() -> None:
    """Print the engine virtualenv's python, installing it first (scripts/ensure-vllm)."""
    from tierctl.realengine.env import ensure_vllm

    click.echo(ensure_vllm())


@real_engine.command("model")
def model_cmd() -> None:
    """Print the tiny model's folder, making it first (deterministic, no hub access)."""
    from tierctl.realengine.env import tiny_model

    click.echo(tiny_model())


@real_engine.command("demo")
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    default=Path(".tierctl-demo-real"),
    show_default=True,
    help="Rendered files, engine logs, Prometheus data, bench results.",
)
@click.option(
    "--start-timeout-s",
    type=float,
    default=600.0,
    show_default=True,
    help="How long one engine has to answer /health.",
)
@click.option(
    "--live-s",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds of live traffic through the router the readout judges (more decide more).",
)
@click.option(
    "--soak-s",
    type=float,
    default=20.0,
    show_default=True,
    help="The rollout's soak, with r2 back in the router and clients going through it.",
)
def demo_cmd(workdir: Path, start_timeout_s: float, live_s: float, soak_s: float) -> int:
    """The lifecycle for real: render, validate, roll r2 out with every gate on behind the
    router (the real Prometheus included), paired bench A/B, readout from Prometheus, verdict."""
    from tierctl.realtier.demo import run_demo

    return run_demo(workdir, start_timeout_s=start_timeout_s, live_s=live_s, soak_s=soak_s)
