"""`tierctl.fidelity.measure` against servers on loopback: what it records and refuses."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tierctl.errors import RuntimeFailure
from tierctl.fidelity import burst_plan, measure
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import preset
from tierctl.sim.server import ServeOptions, SimServer

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def _sim_vllm() -> AsyncIterator[str]:
    """A simulated vLLM on a loopback port (100x time scale); yields its URL."""
    server = SimServer(
        EngineConfig.from_argv(["vllm", "serve", "/m", "--port", "0"]),
        preset("dense-8b-h100"),
        ServeOptions(time_scale=100.0),
    )
    ts = TestServer(server.app(), host="127.0.0.1")
    await ts.start_server()
    try:
        yield str(ts.make_url("")).rstrip("/")
    finally:
        await ts.close()


async def test_measure_records_every_token_of_a_simulated_vllm() -> None:
    async with _sim_vllm() as url:
        got = await measure(url, "/m", burst_plan(3, 50, 6))
    assert [m.output_tokens for m in got] == [6, 6, 6]
    assert all(m.ttft_s > 0 and len(m.itl_s) == 5 for m in got)


async def test_an_empty_stream_is_an_engine_failure_not_a_zero_figure() -> None:
    # What a dead vLLM engine core looked like to the benchmark: 200, then no token.
    async def empty(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", empty)
    ts = TestServer(app, host="127.0.0.1")
    await ts.start_server()
    try:
        with pytest.raises(RuntimeFailure, match="no token"):
            await measure(str(ts.make_url("")).rstrip("/"), "m", burst_plan(2, 10, 4))
    finally:
        await ts.close()


async def test_the_measuring_client_reports_when_it_fell_behind() -> None:
    import asyncio
    import time

    from tierctl.fidelity import PlannedSend, measure_checked

    plan = [PlannedSend(0.0, 20, 4), PlannedSend(0.2, 20, 4)]
    async with _sim_vllm() as url:
        _, kept_up = await measure_checked(url, "/m", plan)
        # The client's own loop blocked for 0.4 s across the second send's time: the check
        # must say so, or the stall would be read as the engine's.
        asyncio.get_running_loop().call_later(0.05, time.sleep, 0.4)
        _, stalled = await measure_checked(url, "/m", plan)
    # (Not kept_up.trusted(): a loaded CI machine may hold a loop 100 ms now and then.)
    assert (kept_up.loop_lag_max_s or 0.0) < (stalled.loop_lag_max_s or 0.0)
    assert not stalled.trusted()
    assert (stalled.loop_lag_max_s or 0.0) > 0.3
    assert (stalled.pacing_lag_max_s or 0.0) > 0.1
