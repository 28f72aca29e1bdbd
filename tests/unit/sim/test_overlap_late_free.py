"""SGLang's overlap scheduler frees late (``SimRules.overlap_frees_late``), as measured round by
round against the real SGLang 0.5.23 (``benchmarks/sglang_scheduler_steps.py``): a slot a
request gives back by finishing in decode round t is admitted from round t+2; round t+1
decodes the others. ``--disable-overlap-schedule`` admits at t+1, and so does a release whose
rules do not say so (vLLM)."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.sim.config import EngineConfig
from tierctl.sim.engine import make_scheduler
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload

from .helpers import FLAT

Step = tuple[str, int]


def _config(*flags: str) -> EngineConfig:
    argv = ["python3", "-m", "sglang.launch_server", "--max-running-requests", "2", *flags]
    return EngineConfig.from_argv([*argv, "--max-total-tokens", "65536"])


def _steps(config: EngineConfig, reqs: list[tuple[int, int]]) -> list[Step]:
    sched = make_scheduler(config, FLAT)
    for i, (prompt, out) in enumerate(reqs):
        sched.submit(SimRequest(f"r{i}", 0.0, prompt, out), 0.0)
    now, steps = 0.0, []
    while (rnd := sched.step(now)) is not None:
        now += rnd.duration_s
        steps.append((rnd.kind[0].upper(), len(rnd.chunks) or rnd.batch_size))
    return steps


REQS = [(100, 2), (100, 4), (100, 2)]


def test_with_overlap_the_freed_slot_is_admitted_a_round_late() -> None:
    # r0 finishes in the first decode round; the others decode once more, then r2 comes in.
    assert _steps(_config(), REQS) == [("P", 2), ("D", 2), ("D", 1), ("P", 1), ("D", 2)]


def test_without_overlap_the_freed_slot_is_admitted_at_once() -> None:
    assert _steps(_config("--disable-overlap-schedule"), REQS) == [
        ("P", 2), ("D", 2), ("P", 1), ("D", 2), ("D", 1),
    ]  # fmt: skip


def test_the_rule_is_the_releases_not_the_schedulers() -> None:
    """Mutation check: with the profile's rule off, overlap on admits at once as well."""
    config = _config()
    rules = dataclasses.replace(config.rules, overlap_frees_late=False)

    class Unruled(EngineConfig):
        @property
        def rules(self):  # type: ignore[no-untyped-def]
            return rules

    unruled = Unruled(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)})
    assert _steps(unruled, REQS) == _steps(_config("--disable-overlap-schedule"), REQS)


_rows = st.lists(
    st.tuples(st.floats(0, 2), st.integers(1, 400), st.integers(1, 40)), min_size=1, max_size=10
)


@settings(max_examples=40, deadline=None)
@given(_rows, st.integers(1, 4))
def test_late_free_keeps_fast_forward_equal_to_stepping(
    rows: list[tuple[float, int, int]], cap: int
) -> None:
    """Law: the closed-form decode rounds give the stepped results with the late free on (it
    lasts one round, so a fast-forward after a finish must not carry it)."""
    wl = Workload.of("w", [SimRequest(f"r{i}", t, a, b) for i, (t, a, b) in enumerate(rows)])
    arm = EngineConfig.from_argv(
        ["python3", "-m", "sglang.launch_server", "--max-running-requests", str(cap)]
    )
    fast = simulate(arm, wl, FLAT, fast_forward=True)
    stepped = simulate(arm, wl, FLAT, fast_forward=False)
    assert fast.rounds == stepped.rounds
    for x, y in zip(fast.requests, stepped.requests, strict=True):
        assert x.status == y.status
        assert (x.e2e_s is None) == (y.e2e_s is None)
