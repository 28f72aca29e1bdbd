"""``judge serve`` against the worst requests and a Prometheus that answers nonsense (#38,
#42): a huge window or step count, a deep or large or non-UTF-8 body are 4xx with the rule,
before any query; a malformed Prometheus answer is inconclusive (Argo 200, Flagger 503),
never a 500. Both servers run in-process on free loopback ports (aiohttp's test server)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tierctl.readout.analysis import MAX_STEPS
from tierctl.readout.judge_server import JudgeSettings, judge_app
from tierctl.spec import load_spec_text, resolve_tier

SPEC = (
    "tier: t\nhost: t\noutput: c.yaml\n"
    "engine: {kind: sglang, version: 0.5.23, service: 'svc-{replica}',\n"
    "  image: 'x/y@sha256:" + "a" * 64 + "', args: {prefill-decode-interval: 1}}\n"
    "replicas:\n  r1: {gpus: [0], role: control}\n"
    "  r2: {gpus: [1], role: canary, args: {prefill-decode-interval: 2}}\n"
    "telemetry: {variant: 'tier-pdi{prefill-decode-interval}', places: [service-labels]}\n"
)
NAMES = ["sglang:num_running_reqs", "sglang:time_to_first_token_seconds_bucket"]


class FakeProm:
    """A Prometheus that answers every query with ``data`` (names: a plausible list)."""

    def __init__(self) -> None:
        self.data: Any = {"resultType": "matrix", "result": []}
        self.queries = 0
        #: When set, the names route waits for it (a slow Prometheus holding each readout).
        self.gate: Any = None

    def app(self) -> web.Application:
        async def names(_request: web.Request) -> web.Response:
            if self.gate is not None:
                await self.gate.wait()
            return web.json_response({"status": "success", "data": NAMES})

        async def query(_request: web.Request) -> web.Response:
            self.queries += 1
            return web.json_response({"status": "success", "data": self.data})

        app = web.Application()
        app.router.add_get("/api/v1/label/__name__/values", names)
        app.router.add_get("/api/v1/query", query)
        app.router.add_get("/api/v1/query_range", query)
        return app


@pytest.fixture
async def judge() -> AsyncIterator[tuple[TestClient, FakeProm]]:
    prom = FakeProm()
    prom_server = TestServer(prom.app(), host="127.0.0.1")
    await prom_server.start_server()
    settings = JudgeSettings(
        prometheus=f"http://127.0.0.1:{prom_server.port}", window_s=1800, step_s=300
    )
    tier = resolve_tier(load_spec_text(SPEC, "tier.yaml"))
    client = TestClient(TestServer(judge_app(tier, settings), host="127.0.0.1"))
    await client.start_server()
    try:
        yield client, prom
    finally:
        await client.close()
        await prom_server.close()


@pytest.mark.parametrize(
    "window", ["10000000h", f"{MAX_STEPS * 300 + 300}s", "9" * 400 + "d", "x" * 5_000]
)
async def test_a_window_past_the_bound_is_400_before_any_query(
    judge: tuple[TestClient, FakeProm], window: str
) -> None:
    client, prom = judge
    started = time.monotonic()
    for method, path, kw in (
        ("GET", f"/argo?window={window}", {}),
        ("POST", "/argo", {"json": {"window": window}}),
        ("POST", "/flagger", {"json": {"name": "c", "metadata": {"window": window}}}),
    ):
        resp = await client.request(method, path, **kw)
        assert resp.status == 400, (path, await resp.text())
        doc = await resp.json()
        assert doc["rule"], doc
    assert prom.queries == 0
    assert time.monotonic() - started < 5  # the 4.4 GB request took minutes


async def test_the_largest_window_the_bound_allows_is_judged(
    judge: tuple[TestClient, FakeProm],
) -> None:
    client, _ = judge
    resp = await client.get(f"/argo?window={MAX_STEPS * 300}s")
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["verdict"] == "inconclusive"  # no data in the fake


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 20_000 + b"]" * 20_000,
        json.dumps({"metadata": {"a": [[[[[[[[[[1]]]]]]]]]]}}).encode(),
        b'{"window": 1' + b"0" * 5000 + b"}",
        b"\xff\xfe",
        b"{not json",
    ],
    ids=["deep", "deeper than the bound", "long number", "not utf-8", "not json"],
)
@pytest.mark.parametrize("path", ["/argo", "/flagger"])
async def test_a_body_past_the_bounds_is_400_with_its_rule(
    judge: tuple[TestClient, FakeProm], path: str, body: bytes
) -> None:
    client, _ = judge
    resp = await client.post(path, data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 400, await resp.text()
    assert (await resp.json())["rule"]


@pytest.mark.parametrize("path", ["/argo", "/flagger"])
async def test_a_body_over_64_kib_is_413(judge: tuple[TestClient, FakeProm], path: str) -> None:
    client, _ = judge
    resp = await client.post(path, data=b" " * (65 * 1024))
    assert resp.status == 413


@pytest.mark.parametrize(
    "data",
    [
        {"resultType": "matrix", "result": 5},
        {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, "1"], 7]}]},
        {"resultType": "matrix", "result": [{"metric": [], "values": []}]},
        {"resultType": "matrix", "result": [{"metric": {"a": 1}, "values": [[1, "x"]]}]},
        {"resultType": "matrix", "result": [{"values": [[1, "1"]]}]},
        {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, None]]}]},
        ["not", "a", "map"],
        "text",
    ],
)
async def test_a_malformed_prometheus_answer_is_inconclusive(
    judge: tuple[TestClient, FakeProm], data: Any
) -> None:
    client, prom = judge
    prom.data = data
    resp = await client.get("/argo?window=30m")
    assert resp.status == 200, await resp.text()
    doc = await resp.json()
    assert doc["verdict"] == "inconclusive"
    resp = await client.post("/flagger", json={"name": "c", "metadata": {"window": "30m"}})
    assert resp.status == 503, await resp.text()


@pytest.mark.parametrize(
    "argv",
    [
        ("--prometheus", "http://[::1"),
        ("--prometheus", "http://127.0.0.1:9090", "--window", "10000000h"),
    ],
    ids=["bad Prometheus URL", "default window past the step bound"],
)
def test_judge_serve_refuses_before_serving(run_cli: Any, argv: tuple[str, ...]) -> None:
    from pathlib import Path

    spec = Path(__file__).resolve().parents[3] / "examples/glm53-long-context/tier.yaml"
    result = run_cli("judge", "serve", "--spec", str(spec), "--listen", "127.0.0.1:0", *argv)
    assert result.code == 2, (result.out, result.err)
    assert "Traceback" not in result.err


async def test_a_slow_body_is_408_at_the_deadline() -> None:
    import asyncio

    prom = FakeProm()
    prom_server = TestServer(prom.app(), host="127.0.0.1")
    await prom_server.start_server()
    settings = JudgeSettings(
        prometheus=f"http://127.0.0.1:{prom_server.port}", window_s=1800, body_timeout_s=0.5
    )
    tier = resolve_tier(load_spec_text(SPEC, "tier.yaml"))
    client = TestClient(TestServer(judge_app(tier, settings), host="127.0.0.1"))
    await client.start_server()
    assert client.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    try:
        writer.write(b"POST /argo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), 10)
        assert status.startswith(b"HTTP/1.1 408"), status
        # The rest of the answer, then the close (after aiohttp's lingering read, 10 s here).
        assert b"rule" in await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
        await client.close()
        await prom_server.close()
    assert prom.queries == 0


async def test_readouts_past_the_concurrency_bound_are_429_with_the_rule() -> None:
    """A Prometheus that answers slowly holds each readout: of MAX_JUDGEMENTS + 3 at once,
    the bound's number run and the others are refused at once, naming the rule."""
    import asyncio

    from tierctl.readout.judge_server import MAX_JUDGEMENTS

    release = asyncio.Event()
    prom = FakeProm()
    prom.gate = release
    app = prom.app()
    prom_server = TestServer(app, host="127.0.0.1")
    await prom_server.start_server()
    settings = JudgeSettings(prometheus=f"http://127.0.0.1:{prom_server.port}")
    tier = resolve_tier(load_spec_text(SPEC, "tier.yaml"))
    client = TestClient(TestServer(judge_app(tier, settings), host="127.0.0.1"))
    await client.start_server()
    try:
        calls = [asyncio.ensure_future(client.get("/argo")) for _ in range(MAX_JUDGEMENTS + 3)]
        done: list[Any] = []
        while len(done) < 3:  # the refused ones answer while the others wait
            finished, _ = await asyncio.wait(calls, timeout=30, return_when="FIRST_COMPLETED")
            assert finished, "nothing was refused"
            done = [c for c in calls if c.done()]
        refused = [c.result() for c in done]
        assert all(r.status == 429 for r in refused), [r.status for r in refused]
        doc = await refused[0].json()
        assert f"at most {MAX_JUDGEMENTS} readouts run at once" in doc["rule"]
        release.set()
        answers = await asyncio.gather(*calls)
        assert sorted(r.status for r in answers).count(200) == MAX_JUDGEMENTS
    finally:
        release.set()
        await client.close()
        await prom_server.close()
