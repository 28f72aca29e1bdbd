"""`tierctl.sim.fidelity.measure` against servers on loopback: what it records and refuses."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tierctl.errors import RuntimeFailure
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import preset
from tierctl.sim.fidelity import burst_plan, measure
from tierctl.sim.server import ServeOptions, SimServer

pytestmark = pytest.mark.integration


async def test_measure_records_every_token_of_a_simulated_vllm() -> None:
    server = SimServer(
        EngineConfig.from_argv(["vllm", "serve", "/m", "--port", "0"]),
        preset("dense-8b-h100"),
        ServeOptions(time_scale=100.0),
    )
    ts = TestServer(server.app(), host="127.0.0.1")
    await ts.start_server()
    try:
        got = await measure(str(ts.make_url("")).rstrip("/"), "/m", burst_plan(3, 50, 6))
    finally:
        await ts.close()
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
