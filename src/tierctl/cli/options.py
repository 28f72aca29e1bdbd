"""The CLI's vocabulary: one option group per concept, one spelling per concept.

Every command that takes a concept takes it through the group here, so it is spelled and
checked the same way everywhere:

=================  ==========================  ==========================================
concept            spelling                    older spellings (hidden, deprecated)
=================  ==========================  ==========================================
Prometheus URL     ``--prometheus URL``        ``--prometheus-url`` (rollout)
output format      ``--format FORMAT``         ``--json`` (= ``--format json``)
output path        ``--output PATH`` / ``-o``  ``--out``
fleet file         ``--fleet FLEET``           (one spelling already)
target             ``--target NAME``           (choices from ``cli.targets``)
local engine       ``--local-engine sim|real``  ``--engine`` (rollout's local driver)
=================  ==========================  ==========================================

An older spelling still works, is left out of ``--help``, and prints one line on stderr
saying what to write instead (``warning: --json is deprecated: use --format json``); given
together with the new spelling, the new one wins. The Prometheus URL is checked when the
options are read (:func:`tierctl.runtime.promapi.check_prometheus_url`), so a malformed URL is
exit 2 at once in every command, never a gate failing minutes later.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

F = TypeVar("F", bound=Callable[..., Any])

#: Every deprecated spelling: old option -> what to write instead (for docs and tests).
DEPRECATED: dict[str, str] = {}


def _alias_dest(old: str) -> str:
    return "deprecated_" + old.lstrip("-").replace("-", "_")


def _with_alias(
    f: F, dest: str, old: str, instead: str, value: Callable[[Any], Any], **kwargs: Any
) -> F:
    """Add the hidden option ``old`` to ``f``: when given, a deprecation note, and ``dest``
    gets ``value(given)`` unless the new spelling was given too."""
    DEPRECATED[old] = instead
    alias = _alias_dest(old)

    @functools.wraps(f)
    def wrapper(*args: Any, **kw: Any) -> Any:
        given = kw.pop(alias, None)
        if given is not None and given is not False:
            click.echo(f"warning: {old} is deprecated: use {instead}", err=True)
            ctx = click.get_current_context()
            if ctx.get_parameter_source(dest) is not ParameterSource.COMMANDLINE:
                kw[dest] = value(given)
                # Commands that hand ctx.params on (the fleet runs) see the value too.
                ctx.params[dest] = kw[dest]
                ctx.set_parameter_source(dest, ParameterSource.COMMANDLINE)
        return f(*args, **kw)

    decorated: F = click.option(old, alias, hidden=True, **kwargs)(wrapper)  # type: ignore[assignment]
    return decorated


def _checked_url(url: str | None, dest: str) -> str | None:
    if url is not None:
        from tierctl.runtime.promapi import check_prometheus_url

        check_prometheus_url(url, param=dest)
    return url


def _check_prometheus(ctx: click.Context, param: click.Parameter, url: str | None) -> str | None:
    return _checked_url(url, param.name or "prometheus")


def prometheus_option(
    dest: str = "prometheus", *, required: bool = False, help: str = "Prometheus base URL."
) -> Callable[[F], F]:
    """``--prometheus URL`` (checked at once: http(s) and a valid URL); ``--prometheus-url``
    is its old spelling."""

    def decorate(f: F) -> F:
        f = _with_alias(
            f,
            dest,
            "--prometheus-url",
            "--prometheus",
            lambda url: _checked_url(url, dest),
            metavar="URL",
        )
        opt: F = click.option(
            "--prometheus",
            dest,
            required=required,
            metavar="URL",
            callback=_check_prometheus,
            help=help,
        )(f)
        return opt

    return decorate


def format_option(
    choices: Sequence[str] = ("text", "json"), default: str | None = None, help: str | None = None
) -> Callable[[F], F]:
    """``--format FORMAT`` into ``fmt``; ``--json`` is its old spelling of ``--format json``."""
    chosen = default or choices[0]

    def decorate(f: F) -> F:
        if "json" in choices:
            f = _with_alias(f, "fmt", "--json", "--format json", lambda _: "json", is_flag=True)
        opt: F = click.option(
            "--format",
            "fmt",
            type=click.Choice(list(choices)),
            default=chosen,
            show_default=True,
            help=help or "Output format.",
        )(f)
        return opt

    return decorate


def output_option(
    dest: str = "output",
    *,
    help: str,
    folder: bool = False,
    file_only: bool = False,
    path_type: type[str] | type[Path] = Path,
    **kwargs: Any,
) -> Callable[[F], F]:
    """``--output PATH`` / ``-o`` into ``dest``; ``--out`` is its old spelling. ``folder``: a
    directory; ``file_only``: click refuses a directory (else the writer does, in its words)."""

    def decorate(f: F) -> F:
        kind = click.Path(
            dir_okay=folder or not file_only, file_okay=not folder, path_type=path_type
        )
        f = _with_alias(f, dest, "--out", "--output", lambda p: p, type=kind)
        opt: F = click.option("--output", "-o", dest, type=kind, help=help, **kwargs)(f)
        return opt

    return decorate


def fleet_option(help: str) -> Callable[[F], F]:
    """``--fleet FLEET`` (a fleet file) into ``fleet_path``."""
    return click.option(
        "--fleet", "fleet_path", type=click.Path(dir_okay=False, path_type=Path), help=help
    )


def target_option(*, auto: bool, help: str) -> Callable[[F], F]:
    """``--target NAME``: a registered deployment target (``cli.targets``), or ``auto``."""
    from tierctl.cli import targets

    names = targets.names()
    choices = ["auto", *names] if auto else list(names)
    return click.option(
        "--target",
        type=click.Choice(choices),
        default=choices[0],
        show_default=True,
        help=help,
    )


def local_engine_option(help: str) -> Callable[[F], F]:
    """``--local-engine sim|real`` into ``engine`` (the local driver's engines); ``--engine``
    was its old spelling, which every other command uses for an engine kind or release."""

    def decorate(f: F) -> F:
        choice = click.Choice(["sim", "real"])
        f = _with_alias(f, "engine", "--engine", "--local-engine", lambda v: v, type=choice)
        opt: F = click.option(
            "--local-engine", "engine", type=choice, default="sim", show_default=True, help=help
        )(f)
        return opt

    return decorate


def client_deadline_options(f: F) -> F:
    """``--header-timeout-s`` and ``--body-timeout-s``: how long a client of a server tierctl
    runs (``agent serve``, ``judge serve``) may take to send a request (``runtime.http_guard``
    answers 408 past them)."""
    for name, default, what in (
        ("--body-timeout-s", 30.0, "body (408 past it)"),
        ("--header-timeout-s", 10.0, "headers (408 and closed past it)"),
    ):
        f = click.option(
            name,
            type=click.FloatRange(min=0.1, max=600.0),
            default=default,
            show_default=True,
            help=f"How long a client may take to send a request's {what}.",
        )(f)
    return f


# --- one options dataclass per command ---------------------------------------------------

T = TypeVar("T")
R = TypeVar("R")


class OptionArgs:
    """A command's options as one frozen dataclass (subclassed with ``@dataclass(frozen=True)``,
    one field per click parameter, named as it)."""

    def params(self) -> dict[str, Any]:
        """The fields by name (for the helpers one option group shares between commands)."""
        import dataclasses

        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def into(cls: type[T]) -> Callable[[Callable[[T], R]], Callable[..., R]]:
    """Decorate a command body that takes one ``cls``: click's parameters become its fields.

    Put it closest to the function (below every ``click.option``), so the deprecated aliases
    are resolved first. A click parameter ``cls`` has no field for fails the command on every
    call (``TypeError``), and ``tests/unit/cli/test_option_args.py`` checks every option of
    the commands that use this has its field, so an option is never silently dropped."""

    def decorate(f: Callable[[T], R]) -> Callable[..., R]:
        @functools.wraps(f)
        def wrapper(**kw: Any) -> R:
            return f(cls(**kw))

        wrapper.options_dataclass = cls  # type: ignore[attr-defined]
        return wrapper

    return decorate
