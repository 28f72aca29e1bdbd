"""Benchmark `tierctl sim serve`: streamed requests/s, and /health p99 under a 1.4 MB burst.

Run: PYTHONPATH=src /work/venv/bin/python benchmarks/sim_server.py [--quick]

Starts the servers itself on loopback (port 0), always stops them, bounds every loop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp

from tierctl.bench.prompts import text_of_size

ROOT = Path(__file__).resolve().parent.parent


@asynccontextmanager
async def sim_server(
    *engine_args: str, time_scale: float = 100.0, preset: str = "dense-8b-h100"
) -> AsyncIterator[str]:
    """Start `tierctl sim serve` in a subprocess; yield its base URL; always stop it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    # Popen returns at once; the blocking reads below go through to_thread.
    proc = subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, "-m", "tierctl", "sim", "serve", "--time-scale", str(time_scale),
         "--preset", preset, "--", "--port", "0", "--enable-metrics", *engine_args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        url = None
        while time.monotonic() < deadline:
            line = await asyncio.to_thread(proc.stdout.readline)
            if not line:
                break
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                url = m.group(1)
                break
        if url is None:
            raise RuntimeError("sim serve did not start")
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def probe_health(
    session: aiohttp.ClientSession,
    url: str,
    stop: asyncio.Event,
    every_s: float = 0.05,
    max_probes: int = 2000,
) -> list[float]:
    """Probe /health until ``stop``; return latencies in seconds (timeouts count as 10 s)."""
    lat: list[float] = []
    for _ in range(max_probes):
        if stop.is_set():
            break
        t = time.perf_counter()
        try:
            async with session.get(url + "/health", timeout=aiohttp.ClientTimeout(total=10)) as r:
                await r.read()
            lat.append(time.perf_counter() - t)
        except (TimeoutError, aiohttp.ClientError):
            lat.append(10.0)
        await asyncio.sleep(every_s)
    return lat


async def health_under_burst(url: str, prompts: list[str]) -> tuple[float, float, float]:
    """Send the prompts at once while probing /health; (p50, p99, max) probe latency."""
    async with aiohttp.ClientSession() as s:
        stop = asyncio.Event()
        prober = asyncio.create_task(probe_health(s, url, stop))
        await asyncio.sleep(0.3)

        async def one(p: str) -> int:
            body = {"model": "m", "prompt": p, "max_tokens": 4}
            async with s.post(
                url + "/v1/completions", json=body, timeout=aiohttp.ClientTimeout(total=300)
            ) as r:
                await r.read()
                return r.status

        statuses = await asyncio.gather(*(one(p) for p in prompts))
        await asyncio.sleep(0.3)
        stop.set()
        lat = sorted(await prober)
    assert all(st == 200 for st in statuses), statuses
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]  # noqa: E731
    return p(0.5), p(0.99), lat[-1]


async def streamed_rps(url: str, n: int, concurrency: int) -> float:
    """Streamed chat requests per second (16 tokens each) at ``concurrency``."""
    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession() as s:

        async def one(i: int) -> None:
            async with sem:
                body = {
                    "model": "m",
                    "messages": [{"role": "user", "content": f"hi {i}"}],
                    "max_tokens": 16,
                    "stream": True,
                }
                async with s.post(url + "/v1/chat/completions", json=body) as r:
                    async for _ in r.content:
                        pass

        t = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return n / (time.perf_counter() - t)


async def main(quick: bool) -> None:
    n = 300 if quick else 1500
    async with sim_server(time_scale=1000.0) as url:
        rps = await streamed_rps(url, n, 64)
    print(f"streamed chat requests/s (16 tokens each, 64 concurrent, {n} requests): {rps:.0f}")
    k = 3 if quick else 6
    prompts = [text_of_size(1_400_000, i) for i in range(k)]
    rows = []
    for label, extra in (
        ("on-loop tokenizer", ()),
        ("dynamic batch tokenizer", ("--enable-dynamic-batch-tokenizer",)),
    ):
        # The long-context preset: its KV pool holds several 1.4 MB (~370K-token) prompts.
        async with sim_server(
            *extra, time_scale=1000.0, preset="glm53-flash-w4afp8-tp4-h200"
        ) as url:
            rows.append((label, *await health_under_burst(url, prompts)))
    print(f"/health latency during a burst of {k} prompts of 1.4 MB (probe every 50 ms):")
    for label, p50, p99, mx in rows:
        print(
            f"  {label:<24} p50 {p50 * 1000:8.1f} ms   p99 {p99 * 1000:8.1f} ms   max {mx * 1000:8.1f} ms"
        )
    print(f"  p99 ratio on-loop / dynamic: {rows[0][2] / rows[1][2]:.1f}x")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    asyncio.run(main(ap.parse_args().quick))
