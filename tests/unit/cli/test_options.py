"""The CLI's one spelling per concept (``tierctl.cli.options``) and the old spellings kept.

Every deprecated spelling is hidden from ``--help``, still works, prints one deprecation line
on stderr, and gives what the new spelling gives; the new spelling wins when both are given. A
malformed Prometheus URL is exit 2 while the options are read, in ``rollout`` as in
``readout``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import click
import pytest

from tests.conftest import SMALL_SPEC, CliResult
from tierctl.cli.main import cli
from tierctl.cli.options import DEPRECATED


def _leaf_commands() -> list[tuple[str, click.Command]]:
    out: list[tuple[str, click.Command]] = []
    ctx = click.Context(cli)

    def walk(prefix: str, group: click.Group) -> None:
        for name in group.list_commands(ctx):
            sub = group.get_command(ctx, name)
            if isinstance(sub, click.Group):
                walk(f"{prefix}{name} ", sub)
            elif sub is not None:
                out.append((f"{prefix}{name}", sub))

    walk("", cli)
    return out


LEAVES = _leaf_commands()


def test_old_spellings_are_hidden_and_each_is_still_somewhere() -> None:
    """No visible option uses a deprecated spelling (``--engine`` is rollout's only: every
    other command's ``--engine`` is an engine kind or release); each is offered, hidden."""
    visible, hidden = set(), set()
    for name, command in LEAVES:
        here = {o for p in command.params if isinstance(p, click.Option) for o in p.opts}
        shown = {
            o
            for p in command.params
            if isinstance(p, click.Option) and not p.hidden
            for o in p.opts
        }
        assert (here - shown) & shown == set(), name
        visible |= shown
        hidden |= here - shown
    assert visible & (set(DEPRECATED) - {"--engine"}) == set()
    assert set(DEPRECATED) <= hidden
    assert {"--json", "--out", "--prometheus-url", "--engine"} <= set(DEPRECATED)


@pytest.mark.parametrize(("concept", "spelling"), [("fmt", "--format"), ("output", "--output")])
def test_one_spelling_per_concept(concept: str, spelling: str) -> None:
    """Every visible option that writes a concept's destination is spelled the one way."""
    for name, command in LEAVES:
        for p in command.params:
            if isinstance(p, click.Option) and not p.hidden and p.name == concept:
                assert spelling in p.opts, (name, p.opts)


def test_every_prometheus_url_is_spelled_prometheus() -> None:
    for name, command in LEAVES:
        for p in command.params:
            if isinstance(p, click.Option) and not p.hidden and "prometheus" in (p.name or ""):
                assert p.opts == ["--prometheus"], (name, p.opts)


def test_json_is_format_json_with_a_note(run_cli: Callable[..., CliResult]) -> None:
    new = run_cli("show", "--format", "json", str(SMALL_SPEC))
    old = run_cli("show", "--json", str(SMALL_SPEC))
    assert new.code == old.code == 0
    assert old.out == new.out
    assert "warning: --json is deprecated: use --format json" in old.err
    assert "deprecated" not in new.err
    both = run_cli("show", "--json", "--format", "text", str(SMALL_SPEC))
    assert both.out != new.out  # the new spelling wins


def test_out_is_output_with_a_note(run_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    spec = tmp_path / "tier.yaml"
    shutil.copy(SMALL_SPEC, spec)
    assert run_cli("render", "--write", str(spec)).code == 0
    compose = str(tmp_path / "compose.yaml")
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    new = run_cli("import", compose, "--output", str(tmp_path / "new" / "spec.yaml"))
    old = run_cli("import", compose, "--out", str(tmp_path / "old" / "spec.yaml"))
    assert new.code == old.code == 0, old.err
    assert (tmp_path / "new/spec.yaml").read_text() == (tmp_path / "old/spec.yaml").read_text()
    assert "warning: --out is deprecated: use --output" in old.err


@pytest.mark.parametrize("spelling", ["--prometheus", "--prometheus-url"])
@pytest.mark.parametrize("url", ["ftp://prom:9090", "http://[::1"])
def test_rollout_refuses_a_bad_prometheus_url_at_once(
    run_cli: Callable[..., CliResult], tmp_path: Path, spelling: str, url: str
) -> None:
    """Before any step (the plan is not even read): exit 2 naming the option, as readout."""
    result = run_cli(
        "rollout", spelling, url, "--plan", str(tmp_path / "none.json"), "--driver", "local"
    )
    assert result.code == 2, result.err
    assert "Prometheus URL" in result.err
    assert "--prometheus" in result.err
    assert "none.json" not in result.err


def test_readout_refuses_the_same_url_the_same_way(run_cli: Callable[..., CliResult]) -> None:
    result = run_cli("readout", "--spec", str(SMALL_SPEC), "--prometheus", "ftp://prom:9090")
    assert result.code == 2
    assert "must start with http:// or https://" in result.err


def test_rollout_engine_is_local_engine_with_a_note() -> None:
    rollout = dict(LEAVES)["rollout"]
    ctx = rollout.make_context("rollout", ["--engine", "real", "--plan", "p.json"])
    assert ctx.params["deprecated_engine"] == "real"
    local = next(p for p in rollout.params if p.name == "engine")
    assert local.opts == ["--local-engine"]
