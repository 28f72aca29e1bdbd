"""One options dataclass per command (``cli.options.into``): ``bench ab`` and ``rollout``.

Every click option of the command is a field of its dataclass, and every field an option, so
an option cannot be dropped on the way to the command's body; a dataclass missing a field
fails the command on every call (the mutation check below), not silently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import click
import pytest
from click.testing import CliRunner

from tests.conftest import CliResult
from tierctl.cli.bench import AbArgs, ab
from tierctl.cli.options import DEPRECATED, OptionArgs, into
from tierctl.cli.rollout import RolloutArgs, rollout


def _option_names(command: click.Command) -> set[str]:
    """The command's parameters, less the hidden old spellings (which fill the new one)."""
    old = {"deprecated_" + o.lstrip("-").replace("-", "_") for o in DEPRECATED}
    return {p.name for p in command.params if p.name and p.name not in old}


@pytest.mark.parametrize(("command", "cls"), [(ab, AbArgs), (rollout, RolloutArgs)])
def test_every_option_lands_in_the_dataclass(command: click.Command, cls: type) -> None:
    assert command.callback is not None
    assert command.callback.options_dataclass is cls  # type: ignore[attr-defined]
    fields = {f.name for f in dataclasses.fields(cls)}
    assert _option_names(command) == fields
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_the_big_commands_are_the_big_ones() -> None:
    # The counts (52 and 39 then; rollout has gained --target since).
    assert len(dataclasses.fields(AbArgs)) >= 52
    assert len(dataclasses.fields(RolloutArgs)) >= 40


def test_a_dataclass_missing_an_option_fails_every_call() -> None:
    @dataclass(frozen=True)
    class Short(OptionArgs):
        a: int

    seen: list[Short] = []

    @click.command()
    @click.option("--a", type=int, default=1)
    @click.option("--b", type=int, default=2)
    @into(Short)
    def cmd(args: Short) -> None:
        seen.append(args)

    result = CliRunner().invoke(cmd, ["--a", "3"])
    assert isinstance(result.exception, TypeError)
    assert "'b'" in str(result.exception)
    assert seen == []


def test_the_target_gets_the_values_given(
    run_cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the target's rollout receives, a deprecated spelling included (the aliases are
    resolved before ``into``); the target's rollout is replaced by a recorder at the registry
    seam (the real one needs a driver)."""
    import tierctl.cli.targets.compose as compose_target

    captured: list[RolloutArgs] = []

    def record(self: object, args: RolloutArgs) -> int:
        captured.append(args)
        return 0

    monkeypatch.setattr(compose_target.ComposeTarget, "rollout", record)
    result = run_cli(
        "rollout", "--plan", "p.json", "--driver", "local", "--engine", "real",
        "--prometheus-url", "http://127.0.0.1:9", "--skip-gate", "soak", "--soak-s", "7",
    )  # fmt: skip
    assert result.code == 0, result.err
    [args] = captured
    assert (args.engine, args.prometheus_url) == ("real", "http://127.0.0.1:9")
    assert (args.skip_gate, args.soak_s, args.target) == (("soak",), 7.0, "compose")
    assert "deprecated" in result.err
