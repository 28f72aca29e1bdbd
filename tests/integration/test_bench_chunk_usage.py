"""Per-chunk usage: the load client counts and stamps every token of a merged chunk.

A loopback engine stand-in merges tokens into one chunk the way vLLM does when the client
falls behind (one chunk of three tokens among single ones). Asked for per-chunk usage (the
profile's ``stream_options``), it puts its running usage on every chunk, as vLLM and SGLang
do; the client then has one timestamp per token. Not asked, the client sees chunks, and
only the final usage tells it how many tokens there were.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tierctl.bench.client import RequestShape, lean_pool, make_session, send_request
from tierctl.bench.samples import RequestSample
from tierctl.engines import PROFILES
from tierctl.fidelity import burst_plan, measure

pytestmark = pytest.mark.integration

#: Tokens per streamed chunk: the third chunk carries three merged tokens.
CHUNKS = (1, 1, 3, 1)


async def _merging(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    per_chunk = bool((body.get("stream_options") or {}).get("continuous_usage_stats"))
    prompt = body["prompt"]
    n_prompt = len(prompt) if isinstance(prompt, list) else len(prompt.split())
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    done = 0
    for k in CHUNKS:
        done += k
        chunk: dict[str, object] = {"choices": [{"index": 0, "text": "x" * k}]}
        if per_chunk:
            chunk["usage"] = {"prompt_tokens": n_prompt, "completion_tokens": done}
        await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
    final = {"choices": [], "usage": {"prompt_tokens": n_prompt, "completion_tokens": done}}
    await resp.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
    return resp


async def _serve() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/completions", _merging)
    ts = TestServer(app, host="127.0.0.1")
    await ts.start_server()
    try:
        yield str(ts.make_url("")).rstrip("/")
    finally:
        await ts.close()


async def _one(url: str, shape: RequestShape, lean: bool) -> RequestSample:
    got: list[RequestSample] = []
    endpoint = url + "/v1/completions"
    pool = lean_pool(endpoint, lean)
    try:
        async with make_session() as session:
            await send_request(
                session, endpoint, shape, index=0, lane="l", prompt=[21, 22, 23],
                planned_input_tokens=3, max_tokens=6, scheduled_s=0.0, t0=0.0,
                on_done=got.append, pool=pool,
            )  # fmt: skip
    finally:
        if pool is not None:
            pool.close()
    (sample,) = got
    return sample


@pytest.mark.parametrize("lean", [True, False], ids=["lean-http", "aiohttp"])
async def test_every_token_of_a_merged_chunk_gets_its_own_stamp(lean: bool) -> None:
    per_chunk = RequestShape("completions", "m", True, 30.0, PROFILES["vllm"].per_chunk_usage)
    plain = RequestShape("completions", "m", True, 30.0)
    async for url in _serve():
        counted = await _one(url, per_chunk, lean)
        chunked = await _one(url, plain, lean)
    assert counted.outcome == chunked.outcome == "completed"
    assert counted.output_tokens == chunked.output_tokens == sum(CHUNKS)
    assert counted.input_tokens == 3
    # One gap per token after the first; the merged chunk's extra tokens arrived at once.
    assert len(counted.itl_s) == sum(CHUNKS) - 1
    assert counted.itl_s.count(0.0) >= 2
    # Without per-chunk usage the client can only see chunks: one gap per chunk.
    assert len(chunked.itl_s) == len(CHUNKS) - 1


@pytest.mark.parametrize("engine", sorted(PROFILES))
async def test_the_fidelity_measurement_counts_merged_tokens_for_each_engine(engine: str) -> None:
    async for url in _serve():
        got = await measure(url, "m", burst_plan(2, 3, sum(CHUNKS)), engine=engine)
    assert [m.output_tokens for m in got] == [sum(CHUNKS)] * 2
    assert all(len(m.itl_s) == sum(CHUNKS) - 1 and m.tpot_s is not None for m in got)
