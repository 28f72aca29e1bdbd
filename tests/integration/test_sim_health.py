"""`sim serve`'s health checks as SGLang answers them, in process on loopback.

SGLang's ``/health_generate`` (and ``/health`` under ``SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION``)
queues a one-token request and polls once a second for *any* engine output since the check
began: 200 at the first poll that sees some, 503 after the time-out with none (a stuck engine).
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import preset
from tierctl.sim.server import ServeOptions, SimServer

pytestmark = pytest.mark.integration


async def _start(argv: list[str], **opts: object) -> tuple[SimServer, TestServer]:
    server = SimServer(
        EngineConfig.from_argv(["--port", "0", *argv]),
        preset("dense-8b-h100"),
        ServeOptions(time_scale=100.0, health_poll_s=0.05, **opts),  # type: ignore[arg-type]
    )
    ts = TestServer(server.app(), host="127.0.0.1")
    await ts.start_server()
    return server, ts


async def _status(ts: TestServer, path: str) -> int:
    async with aiohttp.ClientSession() as s, s.get(ts.make_url(path)) as r:
        return r.status


async def test_health_generate_answers_once_the_engine_produces_and_503_when_stuck() -> None:
    server, ts = await _start([], health_generate_timeout_s=0.5)
    try:
        assert await _status(ts, "/health_generate") == 200
        assert await _status(ts, "/health") == 200  # answered at once without the option
        # A stuck engine: the scheduler loop stops producing, so no output ever arrives.
        assert server.driver is not None
        await server.driver.stop()
        assert await _status(ts, "/health_generate") == 503
        assert await _status(ts, "/health") == 200  # the plain check cannot see it
        # Nothing of the failed check is left queued in the engine.
        assert not any(rid.startswith("HEALTH_CHECK_") for rid in server.driver.scheduler.lives)
    finally:
        await ts.close()


async def test_health_with_generation_is_the_generation_check() -> None:
    server, ts = await _start([], health_generation=True, health_generate_timeout_s=0.5)
    try:
        assert await _status(ts, "/health") == 200
        assert server.driver is not None
        await server.driver.stop()
        assert await _status(ts, "/health") == 503  # now a stuck engine fails /health too
    finally:
        await ts.close()


async def test_busy_engine_answers_health_without_running_the_check_first() -> None:
    # A long queue: the check's own token would wait behind it, but the running requests'
    # output is enough (SGLang: "if the server is running something, this request will be
    # ignored").
    _, ts = await _start(["--max-running-requests", "1"], health_generate_timeout_s=0.5)
    try:
        url = ts.make_url("/v1/completions")
        async with aiohttp.ClientSession() as s:
            # ~1.2 s each at time scale 100: the check's own token would come after 2.4 s.
            body = {"prompt": [7] * 64, "max_tokens": 20000}
            tasks = [asyncio.ensure_future(s.post(url, json=body)) for _ in range(3)]
            await asyncio.sleep(0.2)
            assert await _status(ts, "/health_generate") == 200
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await ts.close()
