"""``tierctl catalog``: build, list, show and compare engine flag catalogs."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tierctl.catalog.build import build_catalog
from tierctl.catalog.store import diff_catalogs, resolve_catalog, shipped
from tierctl.cli.options import format_option, output_option
from tierctl.engine_catalog import Catalog
from tierctl.errors import InputError
from tierctl.paths import write_owned


@click.group()
def catalog() -> None:
    """Engine flag catalogs built from the engines' own source."""


@catalog.command("build")
@click.argument("ref")
@click.option("--wheel", type=click.Path(path_type=Path), help="Use this wheel; no download.")
@output_option("out", help="Write the JSON here (default: stdout).")
@click.option("--cache-dir", type=click.Path(path_type=Path), help="Where downloaded wheels go.")
@click.option("--force", is_flag=True, help="Replace an --output file that is not a catalog.")
@click.option(
    "--parser-python",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Correct every flag by the engine's real parser, built by this interpreter.",
)
@click.option(
    "--installed",
    is_flag=True,
    help="With --parser-python: the parser of the release installed there, nothing stubbed "
    "(e.g. $(tierctl real-engine python --engine sglang)).",
)
def build(
    ref: str,
    wheel: Path | None,
    out: Path | None,
    cache_dir: Path | None,
    force: bool,
    parser_python: Path | None,
    installed: bool,
) -> None:
    """Build the catalog of REF (sglang==0.5.23, vllm==0.33.0) from its wheel."""
    if installed and parser_python is None:
        raise InputError(
            "--installed needs --parser-python (the interpreter the release is installed in)",
            params=("installed",),
        )
    result = build_catalog(
        ref, wheel=wheel, cache_dir=cache_dir, parser_python=parser_python, installed=installed
    )
    if out is None:
        click.echo(result.to_json(), nl=False)
        return
    write_owned(out, result.to_json(), ours=_is_catalog, force=force, what="catalog")
    click.echo(
        f"{result.ref}: {len(result.flags)} flags from {result.source.wheel} "
        f"({result.source.layout}) -> {out}"
    )


@catalog.command("list")
def list_() -> None:
    """List the shipped catalogs."""
    for engine, version in shipped():
        loaded = resolve_catalog(f"{engine}=={version}")
        click.echo(f"{engine}=={version}\t{len(loaded.flags)} flags\t{loaded.source.layout}")


@catalog.command("show")
@click.argument("ref")
@click.option("--flag", "flag_name", help="Show one flag in full (any spelling).")
@format_option()
def show(ref: str, flag_name: str | None, fmt: str) -> None:
    """Show a catalog (REF: engine==version or a catalog file), or one flag of it."""
    loaded = resolve_catalog(ref)
    if flag_name is not None:
        token = flag_name if flag_name.startswith("-") else "--" + flag_name
        flag = loaded.lookup(token)
        if flag is None:
            raise InputError(f"{loaded.ref} has no flag {token}")
        if fmt == "json":
            click.echo(json.dumps(flag.to_data(), indent=2))
            return
        for key, value in flag.to_data().items():
            click.echo(f"{key}: {json.dumps(value)}")
        return
    if fmt == "json":
        click.echo(loaded.to_json(), nl=False)
        return
    for flag in loaded.flags.values():
        note = " (deprecated)" if flag.deprecated else ""
        click.echo(f"{flag.name}\t{flag.type}\tdefault={json.dumps(flag.default)}{note}")


@catalog.command("diff")
@click.argument("a")
@click.argument("b")
def diff(a: str, b: str) -> None:
    """Flags added, removed and changed from catalog A to catalog B."""
    result = diff_catalogs(resolve_catalog(a), resolve_catalog(b))
    for flag in result.added:
        click.echo(f"+ {flag.name}\t{flag.type}\tdefault={json.dumps(flag.default)}")
    for flag in result.removed:
        click.echo(f"- {flag.name}")
    for change in result.changed:
        click.echo(
            f"~ {change.name}\t{change.field}: {json.dumps(change.before)} -> "
            f"{json.dumps(change.after)}"
        )
    click.echo(
        f"{result.a} -> {result.b}: {len(result.added)} added, {len(result.removed)} removed, "
        f"{len(result.changed)} changed"
    )


def _is_catalog(text: str) -> bool:
    """Whether a file holds a flag catalog (the only kind ``catalog build`` replaces)."""
    try:
        Catalog.from_json(text)
    except ValueError:
        return False
    return True
