"""``tierctl agent serve``: the per-host compose agent (docs/agent.md)."""

from __future__ import annotations

from pathlib import Path

import click

from tierctl.cli.options import client_deadline_options
from tierctl.errors import InputError


@click.group()
def agent() -> None:
    """The per-host agent that runs docker compose for rollouts."""


@agent.command()
@click.option(
    "--projects-dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The deployment repository's git checkout: requests name files by its tags.",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".tierctl-agent"),
    show_default=True,
    help="Extracted commits, the operation log (operations.jsonl) and the instance lock.",
)
@click.option(
    "--listen",
    default="127.0.0.1:8765",
    show_default=True,
    help="HOST:PORT to listen on (port 0: any free port, printed at start).",
)
@click.option("--token-file", type=click.Path(path_type=Path), help="File holding the token.")
@click.option(
    "--token-env",
    default="TIERCTL_AGENT_TOKEN",
    show_default=True,
    help="Variable holding the token when no --token-file is given.",
)
@click.option("--tls-cert", type=click.Path(path_type=Path), help="PEM certificate chain.")
@click.option("--tls-key", type=click.Path(path_type=Path), help="PEM private key.")
@click.option(
    "--compose-binary",
    help="The compose command (default: `docker compose`, else the compose extra's binary).",
)
@click.option(
    "--operation-timeout-s",
    type=click.FloatRange(min=1.0),
    default=900.0,
    show_default=True,
    help="The longest one compose run may take before it is killed.",
)
@click.option(
    "--heartbeat-s",
    type=click.FloatRange(min=0.5, max=60.0),
    default=5.0,
    show_default=True,
    help="Seconds between the heartbeat events of an operation's stream.",
)
@click.option(
    "--max-body-kib",
    type=click.IntRange(min=1),
    default=1024,
    show_default=True,
    help="The largest request body.",
)
@client_deadline_options
def serve(
    projects_dir: Path,
    state_dir: Path,
    listen: str,
    token_file: Path | None,
    token_env: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    compose_binary: str | None,
    operation_timeout_s: float,
    heartbeat_s: float,
    max_body_kib: int,
    header_timeout_s: float,
    body_timeout_s: float,
) -> None:
    """Serve the compose-manager API over PROJECTS_DIR, running the real docker compose
    against this host's Docker engine (DOCKER_HOST as compose reads it)."""
    import asyncio

    from tierctl.agent.server import AgentConfig
    from tierctl.agent.server import serve as serve_agent
    from tierctl.compose.binary import find_compose_binary
    from tierctl.rollout.entrypoints import read_token

    host, sep, port_text = listen.rpartition(":")
    if not sep or not port_text.isdigit() or not host:
        raise InputError(
            f"--listen {listen!r} is not HOST:PORT",
            rule="the agent listens on one address and port",
            fix="pass e.g. 127.0.0.1:8765",
        )
    found = find_compose_binary(compose_binary)
    if found is None:
        raise InputError(
            "no Docker Compose v2 found",
            rule="the agent runs the real docker compose",
            fix="install the compose plugin (or the compose extra), or pass `compose_binary`",
            params=("compose_binary",),
        )
    config = AgentConfig(
        projects_dir=projects_dir,
        state_dir=state_dir,
        token=read_token(token_file, token_env),
        compose=found.argv,
        token_env=token_env,
        operation_timeout_s=operation_timeout_s,
        max_body_bytes=max_body_kib * 1024,
        heartbeat_s=heartbeat_s,
        header_timeout_s=header_timeout_s,
        body_timeout_s=body_timeout_s,
    )
    asyncio.run(
        serve_agent(
            config,
            host.strip("[]"),
            int(port_text),
            tls_cert=tls_cert,
            tls_key=tls_key,
            announce=lambda line: click.echo(line, err=True),
        )
    )
