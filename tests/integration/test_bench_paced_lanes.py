"""Open-loop lanes as a relay of request tasks: every planned request sent once, in plan order,
never before its time, also when the client falls behind; on both event loops."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.integration.test_bench_failures import Fixture, serve
from tests.unit.bench.test_eventloop import HAVE_UVLOOP, needs_uvloop
from tierctl.bench import eventloop
from tierctl.bench.plan import plan_requests
from tierctl.bench.prompts import WordPrompts
from tierctl.bench.runner import run_plan
from tierctl.bench.workload import workload_from_dict

pytestmark = pytest.mark.integration


def hammer(rate: float, count: int):
    return workload_from_dict(
        {
            "name": "paced",
            "seed": 3,
            "timeout_s": 30,
            "max_duration_s": 120,
            "lanes": [
                {
                    "kind": "hammer",
                    "rate_rps": rate,
                    "count": count,
                    "input_tokens": 8,
                    "output_tokens": 2,
                }
            ],
            "probe": {"enabled": False},
        }
    )


async def _run(workload, block_s: float = 0.0):
    fixture = Fixture(["ok"], chunk_delay_s=0.0)
    async for url in serve(fixture):
        if block_s:
            # Hold the loop mid-lane: every send due meanwhile is late and must still go.
            asyncio.get_running_loop().call_later(0.1, time.sleep, block_s)
        record = await run_plan(url, workload, plan_requests(workload), WordPrompts(1), model="m")
        # Bodies encoded ahead of each wait are the requests the plan asked for.
        assert len(fixture.seen) == record.sent
        assert all(b["max_tokens"] == 2 and b["stream"] is True for b in fixture.seen)
        assert all(b["model"] == "m" and b["messages"][0]["content"] for b in fixture.seen)
        return record
    raise AssertionError("unreachable")


def _check(record, count: int) -> None:
    assert record.sent == count
    assert record.count("completed") == count
    assert not record.interrupted
    by_index = sorted(record.requests, key=lambda s: s.index)
    assert [s.index for s in by_index] == list(range(count))
    # Never early (the pacer's law), and sends leave in plan order.
    assert all(s.sent_s >= s.scheduled_s for s in by_index)
    sent = [s.sent_s for s in by_index]
    assert sent == sorted(sent)


@pytest.mark.parametrize("loop", ["asyncio", pytest.param("uvloop", marks=needs_uvloop)])
def test_a_paced_lane_sends_every_request_once_in_order(loop: str) -> None:
    wl = hammer(200, 60)
    record = eventloop.run(_run(wl), prefer_uvloop=loop == "uvloop")
    _check(record, 60)
    assert record.client is not None
    assert record.client.event_loop == loop
    assert record.client.paced_sends == 60


def test_a_client_held_behind_catches_up_and_sends_everything() -> None:
    wl = hammer(400, 120)  # ~0.3 s of arrivals; the loop is held for 0.15 s in the middle
    record = eventloop.run(_run(wl, block_s=0.15), prefer_uvloop=HAVE_UVLOOP)
    _check(record, 120)
    late = [s for s in record.requests if s.queue_s >= 0.05]
    assert late, "the held loop made no send late: the test did not exercise the catch-up"
