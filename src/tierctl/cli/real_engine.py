"""``tierctl real-engine``: the real engines on this machine (vLLM and SGLang on CPU) and their
tiny model."""

from __future__ import annotations

from pathlib import Path

import click

from tierctl.engines import default_profile
from tierctl.errors import ExitCode
from tierctl.realengine.registry import REAL_ENGINES

#: The real engines installable here (the first is the default where one is made or found).
ENGINES = tuple(REAL_ENGINES)


@click.group("real-engine")
def real_engine() -> None:
    """The real engines here: vLLM 0.32 and SGLang 0.5.23 on CPU, serving a tiny local Llama."""


@real_engine.command("python")
@click.option("--engine", type=click.Choice(ENGINES), default=ENGINES[0], show_default=True)
def python_cmd(engine: str) -> None:
    """Print the engine virtualenv's python, installing it first (scripts/ensure-vllm or
    scripts/ensure-sglang)."""
    click.echo(REAL_ENGINES[engine].ensure_python())


@real_engine.command(
    "serve", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option(
    "--engine", type=click.Choice(ENGINES), default=default_profile().kind, show_default=True
)
@click.option("--port", type=int, default=0, help="Loopback port (default: a free one).")
@click.option(
    "--log",
    type=click.Path(path_type=Path),
    default=None,
    help="The engine's log (default: ENGINE-PORT.log in the current folder).",
)
@click.option(
    "--start-timeout-s",
    type=float,
    default=600.0,
    show_default=True,
    help="How long the engine has to answer /health.",
)
@click.argument("flags", nargs=-1, type=click.UNPROCESSED)
def serve_cmd(
    engine: str, port: int, log: Path | None, start_timeout_s: float, flags: tuple[str, ...]
) -> ExitCode:
    """Run one real engine on 127.0.0.1 serving the tiny model until interrupted.

    FLAGS go to the engine after its base flags (`tierctl real-engine serve --engine sglang
    -- --enable-metrics --prefill-decode-interval 2`). Prints the URL, pid and log once
    /health answers; Ctrl-C or SIGTERM stops the whole process group.
    """
    from tierctl.realengine.serve import serve

    return serve(
        engine,
        port=port,
        log=log,
        flags=flags,
        start_timeout_s=start_timeout_s,
        announce=lambda line: click.echo(line),
        say=lambda line: click.echo(line, err=True),
    )


@real_engine.command("model")
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default=ENGINES[0],
    show_default=True,
    help="Whose virtualenv makes it, when it is not made yet (either has what the maker needs).",
)
def model_cmd(engine: str) -> None:
    """Print the tiny model's folder, making it first (deterministic, no hub access)."""
    from tierctl.realengine.env import tiny_model

    click.echo(tiny_model(REAL_ENGINES[engine].ensure_python()))


@real_engine.command("demo")
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default=ENGINES[0],
    show_default=True,
    help="The real engine the tier runs (each has its bundled tiny example).",
)
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
    default=120.0,
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
def demo_cmd(
    engine: str, workdir: Path, start_timeout_s: float, live_s: float, soak_s: float
) -> int:
    """The lifecycle for real: render, validate, roll r2 out with every gate on behind the
    router (the real Prometheus included), paired bench A/B, readout from Prometheus, verdict.

    `--engine vllm` runs examples/tiny-vllm (the --max-num-seqs canary); `--engine sglang`
    runs examples/tiny-sglang (the --prefill-decode-interval 2 canary)."""
    from tierctl.realtier.demo import run_demo

    return run_demo(
        workdir, engine=engine, start_timeout_s=start_timeout_s, live_s=live_s, soak_s=soak_s
    )
