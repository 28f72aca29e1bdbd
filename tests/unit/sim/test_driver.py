"""The engine driver's clock: requests arriving after an idle spell start when they arrive."""

from __future__ import annotations

import asyncio

import pytest

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


async def test_a_request_after_a_loop_stall_arrives_when_the_stall_ends() -> None:
    # The HTTP loop stalled (a prompt tokenized on it) while a request decoded: the modelled
    # scheduler, a separate process in SGLang, kept decoding. The next request must reach the
    # scheduler at the stall's end, after the rounds the stall hid, not at the stale clock.
    wall = [0.0]
    driver = EngineDriver(Scheduler(cfg(), FLAT), time_scale=1.0, clock=lambda: wall[0])
    driver.start()
    _, q, t0 = driver.submit("dec", 1000, 100, ())
    assert q is not None
    assert t0 == 0.0
    await asyncio.sleep(0)  # the loop wakes and runs the 0.1 s prefill round
    await asyncio.sleep(0)
    wall[0] = 0.5  # 0.5 s of stall: no round could run
    _, q2, t1 = driver.submit("late", 1000, 2, ())
    assert q2 is not None
    assert t1 == 0.5
    # The decoder's first token (0.1 s) and 10 ms steps up to the stall's end were produced
    # before the late request entered the scheduler.
    times = []
    while not q.empty():
        _, produced_s = q.get_nowait()
        times.append(produced_s)
    assert times[0] == pytest.approx(0.1)
    assert times[-1] == pytest.approx(0.5)
    assert len(times) == 41  # first token + 40 decode steps of 10 ms
    late = driver.scheduler.lives["late"]
    assert late.enqueued_s == 0.5
    await driver.stop()
