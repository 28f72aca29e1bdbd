"""`tierctl sim serve` on loopback: real clients against a real subprocess."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tierctl.bench.prompts import text_of_size

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


class Server:
    """A running `sim serve` subprocess."""

    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url


@asynccontextmanager
async def sim_serve(
    *engine_args: str,
    time_scale: float = 100.0,
    preset: str = "dense-8b-h100",
    extra: tuple[str, ...] = (),
) -> AsyncIterator[Server]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "tierctl", "sim", "serve", "--time-scale", str(time_scale),
           "--preset", preset, *extra, "--", "python3", "-m", "sglang.launch_server",
           "--host", "127.0.0.1", "--port", "0", *engine_args]  # fmt: skip
    # Popen returns at once; the blocking reads below go through to_thread.
    proc = subprocess.Popen(  # noqa: ASYNC220
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
        m = re.search(r"listening on (http://\S+)", line)
        assert m, f"no listening line: {line!r}"
        yield Server(proc, m.group(1))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


async def _sse_events(resp: aiohttp.ClientResponse) -> list[Any]:
    events: list[Any] = []
    async for raw in resp.content:
        line = raw.decode().strip()
        if line.startswith("data: "):
            data = line[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


async def test_streaming_token_count_equals_usage_and_server_info_reflects_argv() -> None:
    async with sim_serve("--model-path", "/models/glm", "--served-model-name", "glm-sim",
                         "--tp-size", "4", "--dist-init-addr", "127.0.0.1:29510",
                         "--enable-hierarchical-cache", "--hicache-ratio", "2",
                         "--cuda-graph-bs-decode", "1", "2", "--prefill-decode-interval", "2",
                         "--enable-metrics") as srv, aiohttp.ClientSession() as s:  # fmt: skip
        body = {"model": "glm-sim", "messages": [{"role": "user", "content": "count me " * 50}],
                "max_tokens": 37, "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
        async with s.post(srv.url + "/v1/chat/completions", json=body) as r:
            assert r.status == 200
            events = await _sse_events(r)
        assert events[-1] == "[DONE]"
        # SGLang's first chunk is the role with empty content (sent with the first token).
        assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        content = [
            e for e in events[1:-1] if e["choices"] and "content" in e["choices"][0]["delta"]
        ]
        usage = events[-2]["usage"]
        assert len(content) == usage["completion_tokens"] == 37
        assert usage["prompt_tokens"] > 50
        assert content[-1]["choices"][0]["finish_reason"] == "length"

        async with s.post(
            srv.url + "/v1/completions", json={"prompt": [5] * 900, "max_tokens": 3}
        ) as r:
            doc = await r.json()
        assert doc["usage"] == {"prompt_tokens": 900, "completion_tokens": 3, "total_tokens": 903,
                                "prompt_tokens_details": {"cached_tokens": 0}}  # fmt: skip

        for path in ("/server_info", "/get_server_info"):
            async with s.get(srv.url + path) as r:
                info = await r.json()
            assert info["tp_size"] == 4
            assert info["dist_init_addr"] == "127.0.0.1:29510"
            assert info["enable_hierarchical_cache"] is True
            assert info["hicache_ratio"] == 2
            assert info["cuda_graph_bs_decode"] == [1, 2]
            assert info["prefill_decode_interval"] == 2
            assert info["served_model_name"] == "glm-sim"
        async with s.get(srv.url + "/v1/models") as r:
            assert [m["id"] for m in (await r.json())["data"]] == ["glm-sim"]
        async with s.get(srv.url + "/metrics") as r:
            text = await r.text()
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                     "sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds",
                     "sglang:e2e_request_latency_seconds", "sglang:prompt_tokens",
                     "sglang:generation_tokens", "sglang:num_aborted_requests"):  # fmt: skip
            assert name in fams, name
        gen = [x for x in fams["sglang:generation_tokens"].samples if x.name.endswith("_total")]
        assert sum(x.value for x in gen) == 40
        assert all(x.labels["model_name"] == "glm-sim" for x in gen)
        running = fams["sglang:num_running_reqs"].samples[0]
        assert running.labels["tp_rank"] == "0"


async def test_queue_limit_answers_the_configured_status_and_bad_requests_get_400() -> None:
    async with sim_serve("--max-queued-requests", "1", "--chunked-prefill-size", "2048",
                         time_scale=1.0, extra=("--queue-full-status", "429")) as srv, \
            aiohttp.ClientSession() as s:  # fmt: skip
        # A 60K-token prompt keeps the engine in chunked prefill for ~2 s of wall time.
        long_task = asyncio.create_task(
            s.post(srv.url + "/v1/completions", json={"prompt": [7] * 60_000, "max_tokens": 2})
        )
        await asyncio.sleep(0.5)
        tasks = [asyncio.create_task(s.post(srv.url + "/v1/completions",
                                            json={"prompt": [1, 2], "max_tokens": 2}))
                 for _ in range(3)]  # fmt: skip
        done = await asyncio.gather(*tasks)
        codes = sorted(r.status for r in done)
        assert codes == [200, 429, 429]
        rejected = next(r for r in done if r.status == 429)
        assert (await rejected.json())["error"]["message"] == "The request queue is full."
        assert (await long_task).status == 200

        async with s.post(srv.url + "/v1/chat/completions", data=b"{not json") as r:
            assert r.status == 400
            assert (await r.json())["error"]["type"] == "invalid_request_error"
        lone_surrogate = b'{"prompt": "a\\ud800b"}'  # valid JSON, not encodable text
        async with s.post(srv.url + "/v1/completions", data=lone_surrogate) as r:
            assert r.status == 400
            assert (await r.json())["error"]["param"] == "prompt"
        async with s.post(srv.url + "/v1/chat/completions", json={"messages": "hi"}) as r:
            assert r.status == 400
            assert (await r.json())["error"]["param"] == "messages"
        # A legitimate 100 MB body is read and answered, not refused for its size.
        big = io.BytesIO(
            b'{"prompt": "hi", "max_tokens": 1, "user": "' + b"x" * 100_000_000 + b'"}'
        )
        async with s.post(srv.url + "/v1/completions", data=big,
                          headers={"Content-Type": "application/json"}) as r:  # fmt: skip
            assert r.status == 200
            assert (await r.json())["usage"]["completion_tokens"] == 1
        async with s.get(srv.url + "/metrics") as r:
            assert r.status == 404  # no --enable-metrics, as in SGLang
        async with s.get(srv.url + "/health_generate") as r:
            assert r.status == 200


async def test_sigterm_drains_in_flight_streams_and_health_turns_503() -> None:
    async with sim_serve(time_scale=1.0) as srv, aiohttp.ClientSession() as s:
        body = {"prompt": "drain me", "max_tokens": 150, "stream": True}
        async with s.post(srv.url + "/v1/completions", json=body) as r:
            first = await r.content.readline()
            assert first.startswith(b"data: ")
            srv.proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.2)
            async with s.get(srv.url + "/health") as h:
                assert h.status == 503
            async with s.post(srv.url + "/v1/completions", json={"prompt": "x"}) as late:
                assert late.status == 503
            events = await _sse_events(r)
        assert events[-1] == "[DONE]"
        assert len([e for e in events if e != "[DONE]"]) == 149  # the first was read above
        assert await asyncio.to_thread(srv.proc.wait, 30) == 0


async def _health_p99_during_burst(url: str, n: int) -> float:
    lat: list[float] = []
    async with aiohttp.ClientSession() as s:
        stop = asyncio.Event()

        async def probe() -> None:
            for _ in range(1000):
                if stop.is_set():
                    return
                t = time.perf_counter()
                async with s.get(url + "/health", timeout=aiohttp.ClientTimeout(total=30)) as r:
                    await r.read()
                lat.append(time.perf_counter() - t)
                await asyncio.sleep(0.05)

        prober = asyncio.create_task(probe())
        await asyncio.sleep(0.2)
        posts = [s.post(url + "/v1/completions",
                        data=io.BytesIO(json.dumps({"prompt": text_of_size(1_400_000, i),
                                                    "max_tokens": 2}).encode()),
                        headers={"Content-Type": "application/json"},
                        timeout=aiohttp.ClientTimeout(total=120)) for i in range(n)]  # fmt: skip
        resps = await asyncio.gather(*posts)
        assert [r.status for r in resps] == [200] * n
        stop.set()
        await prober
    lat.sort()
    return lat[min(len(lat) - 1, int(0.99 * len(lat)))]


@pytest.mark.slow
async def test_health_p99_far_worse_with_on_loop_tokenization() -> None:
    n = 2
    glm = {"preset": "glm53-flash-w4afp8-tp4-h200", "time_scale": 1000.0}
    async with sim_serve(**glm) as srv:  # type: ignore[arg-type]
        on_loop = await _health_p99_during_burst(srv.url, n)
    async with sim_serve("--enable-dynamic-batch-tokenizer", **glm) as srv:  # type: ignore[arg-type]
        dyntok = await _health_p99_during_burst(srv.url, n)
    assert on_loop > 5 * dyntok, (on_loop, dyntok)


async def test_flush_cache_empties_the_prefix_cache() -> None:
    """A repeated prompt hits the prefix cache; after POST /flush_cache it starts cold again."""
    async with sim_serve("--enable-cache-report") as srv, aiohttp.ClientSession() as s:
        body = {"prompt": "the same long prompt " * 400, "max_tokens": 2}

        async def cached_tokens() -> int:
            async with s.post(srv.url + "/v1/completions", json=body) as r:
                doc = await r.json()
            return int(doc["usage"]["prompt_tokens_details"]["cached_tokens"])

        assert await cached_tokens() == 0
        assert await cached_tokens() > 0
        async with s.post(srv.url + "/flush_cache") as r:
            assert r.status == 200
            assert "flushed" in await r.text()
        assert await cached_tokens() == 0


async def test_deeply_nested_json_is_a_400_and_health_keeps_answering() -> None:
    async with sim_serve() as srv, aiohttp.ClientSession() as s:
        deep = b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b', "max_tokens": 1}'
        async with s.post(
            srv.url + "/v1/completions", data=deep, headers={"Content-Type": "application/json"}
        ) as resp:
            assert resp.status == 400
            assert "nests too deeply" in (await resp.json())["error"]["message"]
        async with s.get(srv.url + "/health") as health:
            assert health.status == 200


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))


async def test_a_body_over_max_body_mib_gets_413_while_it_streams_and_is_never_buffered() -> None:
    limit_mib, upload_mib = 1, 64
    async with sim_serve(extra=("--max-body-mib", str(limit_mib))) as srv, \
            aiohttp.ClientSession() as s:  # fmt: skip
        # Warm the request path (tokenizer, scheduler) so the peak below is the upload's.
        async with s.post(srv.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 1}) as r:
            assert r.status == 200
        peak_before = _peak_rss_kib(srv.proc.pid)
        sent = 0

        async def chunks() -> AsyncIterator[bytes]:
            nonlocal sent
            yield b'{"prompt": "hi", "max_tokens": 1, "user": "'
            block = b"x" * (1024 * 1024)
            for _ in range(upload_mib):
                sent += len(block)
                yield block
            yield b'"}'

        # Chunked transfer encoding: no Content-Length, so only reading can find the size.
        async with s.post(srv.url + "/v1/completions", data=chunks(),
                          headers={"Content-Type": "application/json"}) as r:  # fmt: skip
            assert r.status == 413
            assert r.headers.get("Connection", "").lower() == "close"
            err = (await r.json())["error"]
        assert err["code"] == 413
        assert err["type"] == "invalid_request_error"
        assert "limit of 1 MiB" in err["message"]
        assert "--max-body-mib" in err["message"]
        # Refused at the limit: the upload stopped early and the server never held it.
        assert sent < upload_mib * 1024 * 1024
        growth_mib = (_peak_rss_kib(srv.proc.pid) - peak_before) / 1024
        assert growth_mib < 16, f"the server's peak RSS grew {growth_mib:.0f} MiB"

        # A Content-Length over the limit (16 GiB announced) is refused before any body byte.
        host, port = srv.url.removeprefix("http://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 17179869184\r\n\r\n{"
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
        assert head.startswith(b"HTTP/1.1 413"), head
        rest = await asyncio.wait_for(reader.read(), 60)  # the server closes the connection
        assert b"17179869184" in rest
        assert b"--max-body-mib" in rest
        writer.close()

        # The server is unharmed, and a body under the limit is still answered.
        async with s.get(srv.url + "/health") as r:
            assert r.status == 200
        body = {"prompt": "hi", "max_tokens": 1, "user": "x" * 900_000}
        async with s.post(srv.url + "/v1/completions", json=body) as r:
            assert r.status == 200


async def _line_with(proc: subprocess.Popen[str], needle: str) -> str:
    """The next line of the server's output that contains ``needle`` (bounded)."""
    assert proc.stdout is not None
    for _ in range(50):
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
        if needle in line or not line:
            return line
    return ""


async def test_ctrl_c_says_what_it_drains_and_a_second_ctrl_c_stops_at_once() -> None:
    # 100x slower than the modelled GPU: the stream is still going when both signals land.
    extra = ("--drain-timeout-s", "600")
    async with sim_serve(time_scale=0.01, extra=extra) as srv, aiohttp.ClientSession() as s:
        body = {"prompt": "drain me", "max_tokens": 150, "stream": True}
        async with s.post(srv.url + "/v1/completions", json=body) as r:
            first = await r.content.readline()
            assert first.startswith(b"data: ")
            srv.proc.send_signal(signal.SIGINT)
            draining = await _line_with(srv.proc, "draining")
            assert "1 request(s) in flight" in draining, draining
            assert "up to 600 s" in draining
            assert "Ctrl-C again to stop now" in draining
            srv.proc.send_signal(signal.SIGINT)
            stopped = await _line_with(srv.proc, "stopped")
            assert "stopped with 1 request(s) in flight (stopped now, as asked)" in stopped
            # Well before the 600 s drain deadline: the second Ctrl-C did not wait it out.
            assert await asyncio.to_thread(srv.proc.wait, 30) == 0


async def test_a_drain_with_nothing_in_flight_says_so() -> None:
    async with sim_serve() as srv:
        srv.proc.send_signal(signal.SIGINT)
        assert "0 request(s) in flight" in await _line_with(srv.proc, "draining")
        assert "drained: no request in flight" in await _line_with(srv.proc, "drained")
        assert await asyncio.to_thread(srv.proc.wait, 30) == 0
