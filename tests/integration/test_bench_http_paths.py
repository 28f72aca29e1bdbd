"""The lean HTTP/1.1 path and the aiohttp path record the same samples for the same answers."""

from __future__ import annotations

import pytest

from tests.integration.test_bench_failures import Fixture, burst, serve
from tierctl.bench.plan import plan_requests
from tierctl.bench.prompts import WordPrompts
from tierctl.bench.runner import run_plan
from tierctl.runtime.polling import wait_until_async
from tierctl.runtime.process import free_port

pytestmark = pytest.mark.integration

BEHAVIOURS = ["ok", "503", "reset", "malformed", "stream_error", "cut", "ok"]


async def _samples(lean: bool):
    fixture = Fixture(list(BEHAVIOURS), chunks=4, chunk_delay_s=0.001)
    wl = burst(len(BEHAVIOURS), output_tokens=4, probe={"enabled": False})
    async for url in serve(fixture):
        rec = await run_plan(url, wl, plan_requests(wl), WordPrompts(1), lean_http=lean)
        return sorted(rec.requests, key=lambda s: s.index)
    raise AssertionError("unreachable")


def _view(s):
    # A cut or reset connection may lose bytes already in flight (the RST races them), so
    # what arrived before a connection failure is not compared, only that it failed so.
    if s.error_class == "connection":
        return (s.outcome, s.error_class)
    return (
        s.outcome,
        s.error_class,
        s.http_status,
        s.output_tokens,
        s.input_tokens,
        s.ttft_s is None,
        len(s.itl_s),
        s.error,
    )


async def test_both_http_paths_agree_on_every_injected_failure() -> None:
    lean = await _samples(True)
    other = await _samples(False)
    # Requests are served in arrival order, so behaviours line up per index only when both
    # runs hand them out alike: compare the multiset of what came back.
    assert sorted(map(_view, lean), key=repr) == sorted(map(_view, other), key=repr)
    classes = {s.error_class for s in lean}
    assert {None, "http_status", "connection", "malformed_stream", "stream_error"} <= classes
    http = next(s for s in lean if s.error_class == "http_status")
    assert http.http_status == 503
    assert http.error == "HTTP 503: The request queue is full."


async def test_the_lean_path_reads_a_uvicorn_streaming_response() -> None:
    """vLLM and SGLang answer through uvicorn/starlette (chunked, one chunk per event)."""
    import asyncio
    import json

    uvicorn = pytest.importorskip("uvicorn")
    responses = pytest.importorskip("starlette.responses")
    routing = pytest.importorskip("starlette.routing")
    applications = pytest.importorskip("starlette.applications")

    async def chat(request):
        body = await request.json()
        n = int(body["max_tokens"])

        async def events():
            for i in range(n):
                delta = {"choices": [{"index": 0, "delta": {"content": f"t{i} "}}]}
                yield f"data: {json.dumps(delta)}\n\n"
                await asyncio.sleep(0.001)
            usage = {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": n}}
            yield f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n"

        return responses.StreamingResponse(events(), media_type="text/event-stream")

    app = applications.Starlette(routes=[routing.Route("/v1/completions", chat, methods=["POST"])])
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off")
    )
    serving = asyncio.create_task(server.serve())
    try:
        # uvicorn sets a flag, no event: poll it.
        assert await wait_until_async(lambda: server.started, 30, poll_s=0.02)
        wl = burst(12, output_tokens=6, probe={"enabled": False}, api="completions")
        rec = await run_plan(
            f"http://127.0.0.1:{port}", wl, plan_requests(wl), WordPrompts(1), model="m"
        )
    finally:
        server.should_exit = True
        await serving
    assert rec.count("completed") == 12, [s.error for s in rec.requests if s.error]
    assert all(s.output_tokens == 6 and s.input_tokens == 9 for s in rec.requests)
    assert all(s.ttft_s is not None and len(s.itl_s) == 5 for s in rec.requests)
