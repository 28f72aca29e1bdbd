"""``sim serve``'s every route against the worst requests (issue #38, #42), for both engine
surfaces: bodies past the size bound (413), nested past any recursion limit, not UTF-8, with
a 5,000-digit number, NaN, counts and lists far past any engine's limits, and path
parameters at aiohttp's line limit. Every answer is a 4xx (or the route's 200), never a 5xx,
and comes within seconds. The server runs in-process on a free loopback port."""

from __future__ import annotations

import io
import json
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import preset
from tierctl.sim.server import ServeOptions, SimServer

MAX_BODY = 4 * 1024 * 1024
_TEXT = {"prompt": "hi", "max_tokens": 1}
_NATIVE = {"text": "hi", "sampling_params": {"max_new_tokens": 1}}

BODIES: dict[str, bytes] = {
    "deep list": b"[" * 20_000 + b"]" * 20_000,
    "deep object": b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
    "nested 900 inside a request": json.dumps(
        {**_TEXT, "x": json.loads("[" * 900 + "]" * 900)}
    ).encode(),
    "not utf-8": b"\xff\xfe",
    "5,000-digit number": b'{"prompt":"hi","max_tokens":1' + b"0" * 5_000 + b"}",
    "NaN temperature": b'{"prompt":"hi","max_tokens":1,"temperature":NaN}',
    "n of a billion": json.dumps({**_TEXT, "n": 10**9}).encode(),
    "max_tokens of 1e30": json.dumps({"prompt": "hi", "max_tokens": 10**30}).encode(),
    "200,000 stop strings": json.dumps({**_TEXT, "stop": ["x"] * 200_000}).encode(),
    "50,000 token ids": json.dumps({"prompt": list(range(50_000)), "max_tokens": 1}).encode(),
    "50,000 prompts": json.dumps({"prompt": [[1, 2]] * 50_000, "max_tokens": 1}).encode(),
    "logprobs of a billion": json.dumps({**_TEXT, "logprobs": 10**9}).encode(),
    "a seed of 10**100": json.dumps({**_TEXT, "seed": 10**100}).encode(),
    "100,000 logit biases": json.dumps(
        {**_TEXT, "logit_bias": {str(i): 1 for i in range(100_000)}}
    ).encode(),
    "native 100,000 texts": json.dumps(
        {"text": ["a"] * 100_000, "sampling_params": {"max_new_tokens": 1}}
    ).encode(),
    "native counts past any limit": json.dumps(
        {"text": "a", "sampling_params": {"max_new_tokens": 10**30, "n": 10**9}}
    ).encode(),
    "20,000 chat messages": json.dumps(
        {"messages": [{"role": "user", "content": "a"}] * 20_000, "max_tokens": 1}
    ).encode(),
    "over the size bound": b" " * (MAX_BODY + 1),
}


#: The routes that read their body (the others, /ping and the cache flushes, ignore it).
_READ_BODY = ("/v1/completions", "/v1/chat/completions", "/generate")


@pytest.fixture(params=["sglang", "vllm"])
async def served(request: pytest.FixtureRequest) -> AsyncIterator[tuple[SimServer, TestServer]]:
    argv = ["vllm", "serve", "m", "--port", "0"] if request.param == "vllm" else ["--port", "0"]
    server = SimServer(
        EngineConfig.from_argv(argv),
        preset("dense-8b-h100"),
        ServeOptions(time_scale=100.0, max_body_bytes=MAX_BODY),
    )
    ts = TestServer(server.app(), host="127.0.0.1")
    await ts.start_server()
    try:
        yield server, ts
    finally:
        await ts.close()


async def test_every_post_route_answers_the_worst_bodies_with_a_4xx(
    served: tuple[SimServer, TestServer],
) -> None:
    server, ts = served
    paths = sorted(
        {r.resource.canonical for r in server.app().router.routes() if r.method == "POST"}
    )
    assert "/v1/completions" in paths
    bad: list[tuple[str, str, int, float]] = []
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for path in paths:
            for name, body in BODIES.items():
                started = time.monotonic()
                headers = {"Content-Type": "application/json"}
                async with session.post(
                    ts.make_url(path), data=io.BytesIO(body), headers=headers
                ) as resp:
                    await resp.read()
                    took = time.monotonic() - started
                    if resp.status >= 500 or took > 20:
                        bad.append((path, name, resp.status, took))
                    if name == "over the size bound" and path in _READ_BODY:
                        assert resp.status == 413, (path, resp.status)
    assert not bad


async def test_every_get_route_answers_the_worst_paths_without_a_5xx(
    served: tuple[SimServer, TestServer],
) -> None:
    server, ts = served
    paths = sorted(
        {r.resource.canonical for r in server.app().router.routes() if r.method == "GET"}
    )
    async with aiohttp.ClientSession() as session:
        for path in paths:
            url = path.replace("{model_id:.+}", "x" * 8_000)
            async with session.get(ts.make_url(url + "?" + "q=1&" * 1_000)) as resp:
                await resp.read()
                assert resp.status < 500 or path == "/health_generate", (path, resp.status)
