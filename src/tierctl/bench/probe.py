"""The probe lane: liveness probes beside the load, seen the way an inference proxy sees them.

Probes go out on their own connection pool, outside any concurrency cap of the workload, at a
fixed rate (a slow probe does not delay the next one, as with a proxy's health checker). A
probe is a *miss* when it times out, fails to connect or gets a non-2xx status.
:func:`unhealthy_episodes` replays the misses through a proxy's rule — N consecutive misses
mark the backend unhealthy until the next success.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp

from tierctl.bench.pacing import make_pacer
from tierctl.bench.samples import ProbeSample
from tierctl.bench.workload import ProbeSpec


@dataclass(frozen=True)
class Episode:
    """A span during which a proxy would have held the backend unhealthy.

    ``end_s`` is ``None`` when the backend had not recovered by the end of the run.
    """

    start_s: float
    end_s: float | None


def unhealthy_episodes(probes: Sequence[ProbeSample], misses_to_mark: int = 3) -> list[Episode]:
    """Episodes a proxy marking a backend unhealthy after ``misses_to_mark`` misses would see.

    The episode starts at the send time of the probe that completed the run of misses and ends
    at the send time of the next successful probe.
    """
    episodes: list[Episode] = []
    streak = 0
    start: float | None = None
    for probe in sorted(probes, key=lambda p: p.sent_s):
        if probe.missed:
            streak += 1
            if streak == misses_to_mark:
                start = probe.sent_s
        else:
            if start is not None:
                episodes.append(Episode(start, probe.sent_s))
            start = None
            streak = 0
    if start is not None:
        episodes.append(Episode(start, None))
    return episodes


async def run_probes(
    base_url: str,
    spec: ProbeSpec,
    *,
    t0: float,
    stop: asyncio.Event,
    sink: list[ProbeSample],
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Probe ``base_url + spec.path`` every ``spec.interval_s`` until ``stop`` is set.

    In-flight probes are awaited (each is bounded by its own timeout) before returning, so
    every probe sent ends up in ``sink``.
    """
    url = base_url.rstrip("/") + spec.path
    pacer = make_pacer(precise=False)  # ms granularity is plenty at a 1 s interval
    tasks: set[asyncio.Task[None]] = set()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        k = 0
        try:
            await pacer.sleep_until(t0)
            while not stop.is_set():
                task = asyncio.create_task(
                    _probe_once(session, url, spec.timeout_s, t0, sink, clock)
                )
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                k += 1
                next_at = t0 + k * spec.interval_s
                waiter = asyncio.create_task(stop.wait())
                sleeper = asyncio.create_task(pacer.sleep_until(next_at))
                _, pending = await asyncio.wait(
                    {waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED
                )
                for t in pending:
                    t.cancel()
        finally:
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            pacer.close()


async def _probe_once(
    session: aiohttp.ClientSession,
    url: str,
    timeout_s: float,
    t0: float,
    sink: list[ProbeSample],
    clock: Callable[[], float],
) -> None:
    sent = clock()
    status: int | None = None
    try:
        async with asyncio.timeout(timeout_s), session.get(url) as resp:
            status = resp.status
            await resp.read()
    except TimeoutError:
        sink.append(ProbeSample(sent - t0, None, status, f"timeout after {timeout_s:g} s"))
        return
    except asyncio.CancelledError:
        sink.append(ProbeSample(sent - t0, None, status, "interrupted"))
        raise
    except (aiohttp.ClientError, OSError) as exc:
        sink.append(ProbeSample(sent - t0, None, status, f"{type(exc).__name__}"))
        return
    latency = clock() - sent
    if 200 <= status < 300:
        sink.append(ProbeSample(sent - t0, latency, status))
    else:
        sink.append(ProbeSample(sent - t0, None, status, f"HTTP {status}"))
