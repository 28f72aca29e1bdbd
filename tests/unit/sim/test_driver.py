"""The engine driver's clock: requests arriving after an idle spell start when they arrive."""

from __future__ import annotations

from tierctl.sim.driver import EngineDriver
from tierctl.sim.engine import Scheduler

from .helpers import FLAT, cfg


async def test_requests_arriving_in_one_tick_after_idle_get_the_current_time() -> None:
    wall = [0.0]
    driver = EngineDriver(Scheduler(cfg(), FLAT), time_scale=2.0, clock=lambda: wall[0])
    wall[0] = 50.0  # 50 wall seconds of idling, 100 modelled
    # Two requests before the scheduler loop wakes (one event-loop tick): neither may be
    # stamped with the time the engine went idle.
    _, _, first = driver.submit("a", 100, 4, ())
    _, _, second = driver.submit("b", 100, 4, ())
    assert first == second == 100.0
