"""Pacers never wake before their deadline (the property pacing error is measured against)."""

from __future__ import annotations

import sys
import time

import pytest

from tierctl.bench.pacing import SleepPacer, TimerfdPacer, make_pacer


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux-only")
async def test_timerfd_pacer_wakes_at_or_after_each_deadline():
    pacer = TimerfdPacer()
    try:
        start = time.monotonic()
        deadlines = [start + 0.002 * k for k in range(1, 30)]
        for d in deadlines:
            await pacer.sleep_until(d)
            assert time.monotonic() >= d
        await pacer.sleep_until(start - 1.0)  # a past deadline returns at once
    finally:
        pacer.close()


async def test_sleep_pacer_never_wakes_early():
    pacer = SleepPacer()
    d = time.monotonic() + 0.01
    await pacer.sleep_until(d)
    assert time.monotonic() >= d


def test_make_pacer_choice():
    assert isinstance(make_pacer(precise=False), SleepPacer)
    p = make_pacer(precise=True)
    try:
        assert p.precise == sys.platform.startswith("linux")
    finally:
        p.close()
