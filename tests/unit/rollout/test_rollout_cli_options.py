"""`tierctl rollout`'s options are the library's settings: same names, same defaults.

Every field of GateSettings, DriverConfig and RolloutOptions is either an option of the
command (under its own name, or the one listed in RENAMED) or listed in NOT_OPTIONS with the
reason; a new field fails here until the CLI decides.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import click
import pytest

from tierctl.cli.rollout import rollout
from tierctl.rollout.entrypoints import DriverConfig
from tierctl.rollout.executor import RolloutOptions
from tierctl.rollout.gates import GateSettings

#: (dataclass, field) -> the option's parameter name, where it differs.
RENAMED = {
    (DriverConfig, "name"): "driver",
    (GateSettings, "skip"): "skip_gate",
}
#: Fields the command does not offer, and why.
NOT_OPTIONS = {
    (DriverConfig, "tags"): "built from --tag-old/--tag-new",
    (DriverConfig, "workdir"): "the docker driver's scratch folder, fixed",
    (GateSettings, "poll_interval_s"): "a tuning constant, not an operator choice",
    (GateSettings, "request_timeout_s"): "the proxy's probe timeout, fixed",
    (RolloutOptions, "gates"): "the GateSettings options above",
}
#: Defaults the CLI states differently on purpose.
DEFAULTS_DIFFER = {
    (RolloutOptions, "journal_path"): "PLAN.journal.jsonl, next to the plan",
    (DriverConfig, "name"): "required: no default driver",
    (GateSettings, "skip"): "a tuple of names on the command line",
}

FIELDS = [
    (cls, f)
    for cls in (GateSettings, DriverConfig, RolloutOptions)
    for f in dataclasses.fields(cls)
]


def _defaults() -> dict[str, Any]:
    ctx = rollout.make_context("rollout", ["--plan", "p.json", "--driver", "local"])
    return ctx.params


@pytest.mark.parametrize(("cls", "f"), FIELDS, ids=[f"{c.__name__}.{f.name}" for c, f in FIELDS])
def test_each_library_setting_is_an_option_with_its_default(
    cls: type, f: dataclasses.Field[Any]
) -> None:
    key = (cls, f.name)
    if key in NOT_OPTIONS:
        return
    params = _defaults()
    name = RENAMED.get(key, f.name)
    assert name in params, f"{cls.__name__}.{f.name} has no option on `tierctl rollout`"
    if key in DEFAULTS_DIFFER:
        return
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    assert params[name] == default, f"{cls.__name__}.{f.name}"


def test_the_lists_name_real_fields() -> None:
    names = {(cls, f.name) for cls, f in FIELDS}
    assert set(RENAMED) | set(NOT_OPTIONS) | set(DEFAULTS_DIFFER) <= names


def test_skip_gate_help_lists_every_gate_with_its_library_help() -> None:
    from tierctl.rollout.gates import GATE_DEFS

    option = next(p for p in rollout.params if p.name == "skip_gate")
    assert isinstance(option, click.Option)
    assert option.help
    for gate in GATE_DEFS.values():
        assert f"{gate.name}: {gate.help}" in option.help
