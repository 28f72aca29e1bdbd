"""CLI options that list engine kinds list exactly the engine registry's.

The CLI reads them from the registry (``kinds()``, the sim's ``SURFACES``, the real engines'
``REAL_ENGINES``); this test keeps every choice on the registry.
"""

from __future__ import annotations

import click
import pytest

from tierctl.engines import kinds


def _choices(command: click.Command, option: str) -> tuple[str, ...]:
    for param in command.params:
        if param.name == option and isinstance(param.type, click.Choice):
            return tuple(str(c) for c in param.type.choices)
    raise AssertionError(f"{command.name} has no --{option} choice")


def test_bench_ab_and_run_engine_choices_are_auto_plus_the_registry() -> None:
    from tierctl.cli.bench import bench

    assert isinstance(bench, click.Group)
    checked = 0
    for name in ("ab", "run", "quality"):
        sub = bench.commands[name]
        if any(p.name == "engine" for p in sub.params):
            assert set(_choices(sub, "engine")) == {"auto", *kinds()}, name
            checked += 1
    assert checked >= 2  # ab and run offer --engine


def test_sim_serve_engine_choices_are_the_registry() -> None:
    from tierctl.cli.sim import sim

    assert isinstance(sim, click.Group)
    assert set(_choices(sim.commands["serve"], "engine")) == set(kinds())


def test_the_quality_spec_accepts_every_registered_engine() -> None:
    """The spec's ``engine`` is ``auto`` or a kind read from the registry (no Literal copy)."""
    from pydantic import ValidationError

    from tierctl.bench.quality.spec import QualitySpec

    for kind in ("auto", *kinds()):
        assert QualitySpec.model_validate({"engine": kind}).engine == kind
    with pytest.raises(ValidationError, match="unknown engine 'tgi'"):
        QualitySpec.model_validate({"engine": "tgi"})
