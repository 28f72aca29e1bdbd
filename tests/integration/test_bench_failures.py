"""The load client against small fixture servers that misbehave on purpose.

Each fixture is a real aiohttp server on a free loopback port, so the HTTP behaviour under test
(resets, 503s, stalls, malformed SSE) is real; it stops at the end of each test.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from tierctl.bench.plan import plan_requests
from tierctl.bench.prompts import WordPrompts
from tierctl.bench.runner import run_plan
from tierctl.bench.workload import workload_from_dict
from tierctl.runtime.process import free_port

pytestmark = pytest.mark.integration


@dataclass
class Fixture:
    """Behaviours cycled per chat request; a health delay for the probe lane."""

    behaviours: list[str]
    chunks: int = 4
    chunk_delay_s: float = 0.002
    health_delay_s: float = 0.0
    seen: list[dict[str, object]] = field(default_factory=list)
    flushes: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def wait_seen(self, n: int) -> None:
        """Wait until the server has received ``n`` chat requests."""
        async with self.changed:
            await self.changed.wait_for(lambda: len(self.seen) >= n)

    def app(self) -> web.Application:
        cycle = itertools.cycle(self.behaviours)

        async def chat(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            self.seen.append(body)
            async with self.changed:
                self.changed.notify_all()
            mode = next(cycle)
            if mode == "503":
                return web.Response(status=503, text="The request queue is full.")
            if mode == "reset":
                assert request.transport is not None
                request.transport.abort()
                return web.Response(status=200)
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            if mode == "stall":
                await asyncio.sleep(30)
            n = int(body.get("max_tokens", self.chunks))
            for i in range(n):
                if mode == "malformed" and i == 1:
                    await resp.write(b"this is not sse\n\n")
                    break
                if mode == "stream_error" and i == 1:
                    await resp.write(b'data: {"error": {"message": "boom", "code": 500}}\n\n')
                    break
                if mode == "cut" and i == 1:
                    assert request.transport is not None
                    request.transport.abort()
                    return resp
                delta = {"choices": [{"index": 0, "delta": {"content": f"t{i} "}}]}
                await resp.write(b"data: " + json.dumps(delta).encode() + b"\n\n")
                await asyncio.sleep(self.chunk_delay_s)
            usage = {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": n}}
            await resp.write(b"data: " + json.dumps(usage).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
            return resp

        async def health(_: web.Request) -> web.Response:
            await asyncio.sleep(self.health_delay_s)
            return web.Response(text="ok")

        async def models(_: web.Request) -> web.Response:
            return web.json_response({"object": "list", "data": [{"id": "fixture-model"}]})

        async def flush(_: web.Request) -> web.Response:
            self.flushes += 1
            return web.Response(text="ok")

        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", chat)
        app.router.add_post("/v1/completions", chat)
        app.router.add_get("/health", health)
        app.router.add_get("/v1/models", models)
        app.router.add_post("/flush_cache", flush)
        return app


async def serve(fixture: Fixture) -> AsyncIterator[str]:
    runner = web.AppRunner(fixture.app(), shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def burst(count: int, *, timeout_s: float = 5.0, output_tokens: int = 4, **extra: object):
    data: dict[str, object] = {
        "name": "t",
        "seed": 1,
        "timeout_s": timeout_s,
        "lanes": [
            {"kind": "burst", "count": count, "input_tokens": 16, "output_tokens": output_tokens}
        ],
        "probe": {"interval_s": 0.2, "timeout_s": 0.5},
    }
    data.update(extra)
    return workload_from_dict(data)


async def run(fixture: Fixture, workload, **kw):
    async for url in serve(fixture):
        return await run_plan(url, workload, plan_requests(workload), WordPrompts(1), **kw)
    raise AssertionError("unreachable")


async def test_normal_stream_is_measured_from_usage_and_chunks():
    rec = await run(Fixture(["ok"]), burst(3, output_tokens=5))
    assert rec.sent == 3
    assert rec.count("completed") == 3
    s = rec.requests[0]
    assert s.output_tokens == 5
    assert s.input_tokens == 11  # from usage, not the plan
    assert len(s.itl_s) == 4  # 5 content chunks -> 4 gaps
    assert s.ttft_s is not None
    assert 0 < s.ttft_s <= s.e2e_s
    assert s.tpot_s is not None
    assert s.tpot_s > 0


async def test_accounting_holds_under_every_injected_failure():
    modes = ["ok", "503", "reset", "malformed", "stream_error", "cut", "stall"]
    rec = await run(Fixture(modes), burst(14, timeout_s=1.0))
    assert rec.sent == 14
    assert rec.count("completed") + rec.count("failed") + rec.count("timed_out") == 14
    classes = sorted({s.error_class or "ok" for s in rec.requests})
    assert classes == sorted(
        ["ok", "http_status", "connection", "malformed_stream", "stream_error", "timeout"]
    )
    assert rec.count("timed_out") == 2
    assert rec.count("completed") == 2
    assert all(s.http_status == 503 for s in rec.requests if s.error_class == "http_status")


async def test_stop_mid_run_keeps_every_sent_request():
    stop = asyncio.Event()
    fixture = Fixture(["stall"])
    wl = burst(5, timeout_s=20.0)

    async def stopper():
        await fixture.wait_seen(5)
        stop.set()

    task = asyncio.create_task(stopper())
    rec = await run(fixture, wl, stop=stop)
    await task
    assert rec.interrupted
    assert rec.sent == 5
    assert rec.count("failed") == 5
    assert {s.error_class for s in rec.requests} == {"interrupted"}


async def test_cancelling_the_run_returns_partial_results():
    fixture = Fixture(["ok", "stall"])
    wl = burst(4, timeout_s=20.0)
    completed = asyncio.Event()
    done: list[object] = []

    def progress(sample):
        done.append(sample)
        if len(done) == 2:
            completed.set()

    async for url in serve(fixture):
        task = asyncio.create_task(
            run_plan(url, wl, plan_requests(wl), WordPrompts(1), progress=progress)
        )
        await fixture.wait_seen(4)
        await completed.wait()  # the two "ok" answers are in; the two stalls hang
        task.cancel()
        rec = await task
    assert rec.interrupted
    assert rec.sent == 4
    assert rec.count("completed") == 2
    assert rec.count("failed") == 2


async def test_slow_health_is_counted_as_probe_misses():
    fixture = Fixture(["ok"], chunk_delay_s=0.3, health_delay_s=1.0)
    rec = await run(fixture, burst(1, output_tokens=6))
    assert rec.probes
    assert all(p.missed for p in rec.probes)


def _unscoped(bodies: list[Any]) -> list[Any]:
    """Request bodies with each prompt's leading "Run R block B.P arm X." scope removed."""
    out = []
    for body in bodies:
        body = json.loads(json.dumps(body))
        for message in body.get("messages", []):
            message["content"] = re.sub(r"^Run \S+ block \S+ arm \w+\. ", "", message["content"])
        out.append(body)
    return out


async def test_paired_ab_between_two_fixtures_sees_the_faster_decoder(tmp_path):
    from tierctl.bench.ab import compare_arms, run_ab

    slow = Fixture(["ok"], chunk_delay_s=0.02)
    fast = Fixture(["ok"], chunk_delay_s=0.005)
    wl = burst(3, output_tokens=6)
    async for a_url in serve(slow):
        async for b_url in serve(fast):
            result = await run_ab(a_url, b_url, wl, WordPrompts(1), flush=True, repetitions=1)
    assert [b.arm for b in result.blocks] == ["A", "B", "B", "A"]
    assert slow.flushes == 2
    assert fast.flushes == 2
    assert {b.flush for b in result.blocks} == {"ok"}
    # Both arms received the same request sequence, each prompt led by its own block's and
    # arm's tokens (so neither arm's prefix cache serves the other block's prompts).
    assert slow.seen[:3] != fast.seen[:3]
    assert _unscoped(slow.seen[:3]) == _unscoped(fast.seen[:3])
    ratios = {m.metric: m.ratio for m in compare_arms(result, ["burst"])}
    assert ratios["tpot_p50_s"].ratio is not None
    assert ratios["tpot_p50_s"].ratio < 0.7
    assert ratios["completion_pct"].ratio == 1.0


async def test_multi_megabyte_prompt_arrives_intact():
    fixture = Fixture(["ok"])
    wl = burst(1, output_tokens=2)
    wl = wl.model_copy(
        update={"lanes": (wl.lanes[0].model_copy(update={"input_tokens": 400_000}),)}
    )
    rec = await run(fixture, wl)
    assert rec.count("completed") == 1
    content = fixture.seen[0]["messages"][0]["content"]  # type: ignore[index]
    assert len(content) > 2_000_000  # above the streamed-body threshold
    assert content == WordPrompts(1).prompt(400_000, 0)


async def test_stop_while_the_sender_waits_for_a_far_arrival():
    # The second arrival is due in 1000 s: a stop must end the run without waiting for it.
    fixture = Fixture(["ok"])
    wl = workload_from_dict(
        {
            "lanes": [
                {
                    "kind": "hammer",
                    "rate_rps": 0.001,
                    "arrival": "constant",
                    "count": 3,
                    "input_tokens": 8,
                    "output_tokens": 2,
                },
            ],
            "probe": {"enabled": False},
        }
    )
    stop = asyncio.Event()
    async for url in serve(fixture):
        rec = await asyncio.wait_for(
            run_plan(
                url,
                wl,
                plan_requests(wl),
                WordPrompts(1),
                stop=stop,
                progress=lambda _s: stop.set(),
            ),
            timeout=60,  # a hang guard, not a measurement
        )
    assert rec.interrupted
    assert rec.sent == 1
    assert rec.count("completed") == 1


async def test_flush_cache_outcomes_are_reported_never_raised() -> None:
    """ok on 200, unsupported on 404 (a server without /flush_cache), failed when unreachable."""

    from aiohttp import web

    from tierctl.bench.ab import flush_cache

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="Cache flushed.")

    for routes, expected in (
        ([web.post("/flush_cache", ok)], "ok"),
        ([], "unsupported ("),  # names the endpoints it tried and their HTTP 404
    ):
        app = web.Application()
        app.add_routes(routes)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            outcome = await flush_cache(f"http://127.0.0.1:{port}")
            assert outcome.startswith(expected), outcome
            assert expected == "ok" or "HTTP 404" in outcome, outcome
        finally:
            await runner.cleanup()
    closed = free_port()
    assert (await flush_cache(f"http://127.0.0.1:{closed}")).startswith("failed (")


async def test_a_client_that_blocks_its_loop_is_marked_client_bound():
    """Each completion blocks the client's loop 40 ms (as a slow callback would): flagged."""
    import time

    def slow(_sample):
        time.sleep(0.04)

    rec = await run(Fixture(["ok"], chunks=8, chunk_delay_s=0.01), burst(12), progress=slow)
    assert rec.count("completed") == 12
    assert rec.client is not None
    assert rec.client_bound
    assert any("event-loop lag p99" in r for r in rec.client.reasons)
    assert rec.client.loop_lag_max_s is not None
    assert rec.client.loop_lag_max_s >= 0.03
    assert rec.warnings == rec.client.reasons
