"""The simulator reports progress through a callback and draws nothing itself."""

from __future__ import annotations

import random

from tierctl.sim.config import EngineConfig
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import multi_turn_day


def test_progress_is_reported_and_changes_nothing() -> None:
    config = EngineConfig.from_argv(["--chunked-prefill-size", "16384"])
    workload = multi_turn_day(random.Random(1), hours=2.0, rate_per_h=300.0)
    seen: list[float] = []
    with_bar = simulate(config, workload, progress=seen.append)
    without = simulate(config, workload)
    assert seen, "a two-hour day takes thousands of rounds: progress must be reported"
    assert seen == sorted(seen)
    assert seen[0] >= 0.0
    assert seen[-1] <= with_bar.sim_end_s
    assert with_bar == without
