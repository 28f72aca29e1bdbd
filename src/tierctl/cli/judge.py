"""``tierctl judge serve``: the readout as an HTTP judge (Argo Rollouts, Flagger)."""

from __future__ import annotations

from pathlib import Path

import click

from tierctl.cli.options import client_deadline_options, prometheus_option
from tierctl.cli.readout import parse_duration
from tierctl.errors import ExitCode, InputError
from tierctl.spec import load_spec, resolve_tier


@click.group()
def judge() -> None:
    """The canary judge for other orchestrators (docs/kubernetes.md)."""


@judge.command()
@click.option("--spec", "spec_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@prometheus_option(required=True)
@click.option("--listen", default="127.0.0.1:8090", show_default=True, help="HOST:PORT to bind.")
@click.option("--window", default="30m", show_default=True, help="Default window back from now.")
@click.option("--step", default="5m", show_default=True, help="Step and rate window.")
@click.option("--control", help="Control replica (default: the one with role control).")
@click.option("--canary", help="Canary replica (default: the one with role canary).")
@click.option("--label", default="container_name", show_default=True, help="Replica label.")
@client_deadline_options
def serve(
    spec_path: Path,
    prometheus: str,
    listen: str,
    window: str,
    step: str,
    control: str | None,
    canary: str | None,
    label: str,
    header_timeout_s: float,
    body_timeout_s: float,
) -> ExitCode:
    """Serve verdicts: /argo (Argo's web metric provider), /flagger (Flagger's webhook)."""
    import asyncio

    from tierctl.readout.judge_server import JudgeSettings, judge_app
    from tierctl.runtime.http_guard import ClientBounds, serve_guarded

    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(
            f"--listen {listen!r} is not HOST:PORT",
            rule="usage",
            value=listen,
            fix="write 127.0.0.1:8090 (0.0.0.0:8090 inside a pod)",
        )
    _check_bindable(host, int(port), listen)
    tier = resolve_tier(load_spec(spec_path))
    settings = JudgeSettings(
        prometheus=prometheus,
        window_s=parse_duration(window, "--window"),
        step_s=parse_duration(step, "--step"),
        control=control,
        canary=canary,
        label=label,
        body_timeout_s=body_timeout_s,
    )
    # Refused before serving, not answered 400 on every request: a Prometheus URL that is
    # none, and a default window past the readout's step bound.
    from tierctl.readout.analysis import step_grid
    from tierctl.runtime.promapi import PrometheusClient

    PrometheusClient(prometheus).close()
    step_grid(0.0, settings.window_s, settings.step_s)
    # The header deadline and size, the connection bound and the keep-alive timeout of every
    # tierctl server (docs/security.md).
    try:
        asyncio.run(
            serve_guarded(
                judge_app(tier, settings),
                host=host.strip("[]"),
                port=int(port),
                bounds=ClientBounds(header_timeout_s=header_timeout_s),
                ready=lambda bound: click.echo(f"tierctl judge on http://{host}:{bound}"),
            )
        )
    except OSError as exc:
        raise InputError(
            f"--listen {listen!r}: cannot listen there ({exc.strerror or exc})",
            rule="--listen is a free address of this host",
            value=listen,
            fix="pick another port (0 picks a free one)",
        ) from None
    return ExitCode.OK


def _check_bindable(host: str, port: int, listen: str) -> None:
    """Refuse a --listen whose host does not resolve or whose port is out of range, before the
    server starts (aiohttp would end in a traceback: socket.gaierror, OverflowError)."""
    import socket

    try:
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} is out of range")
        socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (OSError, ValueError, UnicodeError) as exc:
        raise InputError(
            f"--listen {listen!r}: cannot bind there ({exc})",
            rule="--listen is HOST:PORT with a host this machine resolves and a port 0-65535",
            value=listen,
            fix="write 127.0.0.1:8090 (0.0.0.0:8090 inside a pod)",
        ) from None
