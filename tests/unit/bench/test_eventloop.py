"""The bench event loop: uvloop when installed, asyncio's loop otherwise, same behaviour."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import time

import pytest

from tierctl.bench import eventloop
from tierctl.bench.clientcheck import judge_client, verdict_line
from tierctl.bench.pacing import TimerfdPacer

HAVE_UVLOOP = importlib.util.find_spec("uvloop") is not None
# CI installs the 'bench' extra: there a missing uvloop is a packaging bug, not a skip.
needs_uvloop = pytest.mark.skipif(
    not HAVE_UVLOOP and not os.environ.get("CI"), reason="uvloop is not installed"
)


async def _which() -> str:
    return eventloop.loop_name()


@needs_uvloop
def test_run_prefers_uvloop_when_installed() -> None:
    assert eventloop.run(_which()) == "uvloop"
    assert eventloop.fallback_note() is None


def test_run_on_asyncio_when_uvloop_is_not_wanted() -> None:
    assert eventloop.run(_which(), prefer_uvloop=False) == "asyncio"


def test_missing_uvloop_falls_back_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # makes `import uvloop` fail
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert eventloop.loop_factory() is asyncio.new_event_loop
    assert eventloop.run(_which()) == "asyncio"
    note = eventloop.fallback_note()
    assert note is not None
    assert "uvloop" in note
    assert "pip install -e '.[bench]'" in note


@needs_uvloop
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux-only")
def test_timerfd_pacer_works_on_uvloop() -> None:
    """uvloop's add_reader (a libuv poll handle) wakes the pacer, never early."""

    async def wake_all() -> list[float]:
        assert eventloop.loop_name() == "uvloop"
        pacer = TimerfdPacer()
        early = []
        try:
            start = time.monotonic()
            for k in range(1, 30):
                deadline = start + 0.002 * k
                await pacer.sleep_until(deadline)
                early.append(deadline - time.monotonic())
        finally:
            pacer.close()
        return early

    early = eventloop.run(wake_all())
    assert len(early) == 29
    assert max(early) <= 0


def test_the_verdict_names_the_loop() -> None:
    check = judge_client([0.0001] * 10, [0.001], 0.1, 1.0, 1000, "uvloop")
    assert check.event_loop == "uvloop"
    assert check.to_dict()["event_loop"] == "uvloop"
    assert verdict_line(check).endswith("uvloop event loop")
    assert "event loop" not in verdict_line(judge_client([0.0001], [0.001], 0.1, 1.0, 1000))
