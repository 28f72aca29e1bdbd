"""The one "which engine is at this URL" rule (:mod:`tierctl.engines.detection`).

The probe is the seam (GET a path: the body on a 200, else None): each case is a server that
answers some paths, and the rule is read off what it concludes.
"""

from __future__ import annotations

import asyncio

import pytest

from tierctl.engines import (
    PROFILES,
    Probe,
    default_profile,
    engine_at,
    engine_at_async,
    engine_at_or_default,
    profile_for,
)


def _server(answers: dict[str, str]) -> tuple[list[str], Probe]:
    asked: list[str] = []

    def probe(path: str) -> str | None:
        asked.append(path)
        return answers.get(path)

    return asked, probe


def _exposition(kind: str) -> str:
    profile = profile_for(kind)
    name = profile.prefix + profile.metrics.running
    return f'# HELP {name} running\n{name}{{model_name="m"}} 1\n'


@pytest.mark.parametrize("kind", sorted(PROFILES))
def test_the_metrics_tell_first(kind: str) -> None:
    asked, probe = _server({"/metrics": _exposition(kind), "/server_info": "{}"})
    assert engine_at(probe) is profile_for(kind)
    assert asked == ["/metrics"]  # nothing more is asked once the metrics told


def test_an_identity_endpoint_tells_when_the_metrics_do_not() -> None:
    owner = next(p for p in PROFILES.values() if p.identity_paths)
    _, probe = _server(
        {"/metrics": "process_start_time_seconds 1\n", owner.identity_paths[0]: "{}"}
    )
    assert engine_at(probe) is owner


def test_nothing_tells_unknown_then_the_one_default() -> None:
    _, probe = _server({})
    assert engine_at(probe) is None
    assert engine_at_or_default(probe) is default_profile()


def test_the_awaited_probe_follows_the_same_rule() -> None:
    for answers in ({"/metrics": _exposition(kind)} for kind in PROFILES):
        _, sync_probe = _server(answers)

        async def probe(path: str, answers: dict[str, str] = answers) -> str | None:
            return answers.get(path)

        assert asyncio.run(engine_at_async(probe)) is engine_at(sync_probe)
