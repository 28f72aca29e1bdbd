"""How much the load client itself costs, against a server that is never the bottleneck.

Run: ``PYTHONPATH=src python benchmarks/client_overhead.py [--quick] [--skip-aiperf]
[--only floor,ramp,goal,bare,libraries,aiperf] [--goal-seconds 5] [--goal-runs 3]``

A trivial Node.js ``http`` server (``benchmarks/assets/sse_server.js``) answers every request
with 16 SSE chunks; it and the client are pinned to different cores when there are two.
tierctl's runs are driven as ``tierctl bench run`` drives them: uvloop when installed, the lean
HTTP/1.1 path, the timerfd relay pacer. Every step also reports how much CPU the *rest* of the
machine used meanwhile (``/proc/stat`` minus client and server) and marks a step NOT QUIET above
5% of a core: a pacing figure is only the client's on a quiet machine. Printed, side by side:

0. noise floor: lateness of bare timerfd wake-ups (no HTTP), every 2 ms and on the goal's
   2,000 req/s Poisson schedule;
1. pacing: send-time error (actual - planned) with the timerfd pacer vs ``asyncio.sleep``;
2. the Poisson ramp: per rate, pacing p50/p99/max, CPU per request and share of a core; the
   highest rate held with pacing p99 < 1 ms and every request completed;
   2a. the goal, measured alone: 2,000 req/s Poisson, pacing p99 < 1 ms, every request
   completed, in each of ``--goal-runs`` quiet runs;
   2b. the same rates from a bare aiohttp loop (``asyncio.sleep`` pacing), tierctl, and
   tierctl forced onto aiohttp: pacing p99 and CPU per request;
3. client library cost: CPU per streamed request of minimal aiohttp and httpx loops vs
   tierctl's request path on aiohttp and on the lean path, on asyncio's loop and on uvloop;
4. cyclic GC: pacing p99 at a high rate with and without the runner's GC tuning;
5. TTFT measurement error: the client's first-chunk time minus the server's write time,
   both read from CLOCK_MONOTONIC;
6. 100 MB uploads: ``json.dumps`` vs orjson encode time, and upload throughput of a streamed
   body vs one bytes object;
7. AIPerf side by side (if it can run here; otherwise the script says why).

Every load loop is bounded in count and in time. Figures depend on the machine and on what
else runs on it; read them as ratios measured side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import httpx
import numpy as np
import orjson

from tierctl.bench import eventloop
from tierctl.bench import runner as runner_mod
from tierctl.bench.client import (
    HEADERS,
    RequestShape,
    encode_body,
    make_session,
    send_request,
    stream_body,
)
from tierctl.bench.http1 import Http1Pool
from tierctl.bench.plan import plan_requests
from tierctl.bench.prompts import WordPrompts
from tierctl.bench.runner import run_plan
from tierctl.bench.samples import RequestSample
from tierctl.bench.workload import workload_from_dict

HERE = Path(__file__).resolve().parent
SERVER_JS = HERE / "assets" / "sse_server.js"
AIPERF_VENV = Path(os.environ.get("AIPERF_VENV", "/tmp/aiperf-venv"))
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
MAX_SECONDS_PER_STEP = 20.0
#: The issue's goal: this Poisson rate at pacing p99 under GOAL_P99_MS, every request completed.
GOAL_RATE = 2000.0
GOAL_P99_MS = 1.0


# ---------------------------------------------------------------------------- set-up


def cores() -> tuple[int | None, int | None]:
    """(server core, client core), or (None, None) when there is only one core."""
    avail = sorted(os.sched_getaffinity(0))
    if len(avail) < 2:
        return None, None
    return avail[-1], avail[0]


@contextlib.contextmanager
def node_server(chunks: int = 16, delay_ms: float = 0.0, core: int | None = None) -> Iterator[str]:
    """Start the Node SSE server on a free loopback port (pinned to ``core``); yield its URL."""
    cmd = ["node", str(SERVER_JS), "0", str(chunks), str(delay_ms)]
    if core is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(core), *cmd]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            METER.server_pid = proc.pid  # taskset execs node: the same process
            yield f"http://127.0.0.1:{port}"
        finally:
            METER.server_pid = None
            proc.terminate()
            proc.wait(timeout=10)


def hammer(rate: float, count: int, *, output_tokens: int = 16) -> object:
    return workload_from_dict(
        {
            "name": f"poisson-{rate:g}",
            "seed": 1,
            "max_duration_s": MAX_SECONDS_PER_STEP,
            "timeout_s": 10,
            "lanes": [
                {
                    "kind": "hammer",
                    "rate_rps": rate,
                    "count": count,
                    "input_tokens": 32,
                    "output_tokens": output_tokens,
                }
            ],
            "probe": {"enabled": False},
        }
    )


class MachineMeter:
    """CPU the rest of the machine used while a step ran: total busy time (``/proc/stat``)
    minus this process and the server, and the hypervisor's steal. A step is only a
    measurement of the client when the rest of the machine stayed quiet."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid

    @staticmethod
    def _stat() -> tuple[float, float, float]:
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
        except OSError:
            return 0.0, 0.0, 0.0
        hz = os.sysconf("SC_CLK_TCK")
        return sum(v) / hz, (v[3] + v[4]) / hz, v[7] / hz

    def _server_cpu(self) -> float:
        if self.server_pid is None:
            return 0.0
        try:
            with open(f"/proc/{self.server_pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    @contextlib.contextmanager
    def step(self) -> Iterator[dict[str, float]]:
        """Yields a dict filled at exit: ``foreign_cores`` (other processes, in cores) and
        ``steal_s``."""
        out: dict[str, float] = {}
        total0, idle0, steal0 = self._stat()
        own0, srv0, wall0 = time.process_time(), self._server_cpu(), time.monotonic()
        yield out
        total1, idle1, steal1 = self._stat()
        own, srv = time.process_time() - own0, self._server_cpu() - srv0
        wall = max(1e-9, time.monotonic() - wall0)
        busy = (total1 - total0) - (idle1 - idle0)
        out["foreign_cores"] = max(0.0, busy - own - srv) / wall
        out["steal_s"] = steal1 - steal0


METER = MachineMeter(None)
#: A step counts as quiet when the rest of the machine used less than this share of a core.
QUIET_CORES = 0.05


def run_rate(
    url: str, rate: float, seconds: float, *, precise: bool = True, lean: bool = True
) -> dict[str, float]:
    """tierctl's runner at a Poisson ``rate`` for about ``seconds``: pacing and CPU figures.

    Driven as ``tierctl bench run`` drives it (uvloop when installed, the lean HTTP path
    unless ``lean`` is off). CPU per request is the run's own client CPU (``client_cpu_s``:
    sending and reading, not the prompt synthesis before the clock) over the requests sent.
    """
    count = max(50, int(rate * seconds))
    wl = hammer(rate, count)
    plan = plan_requests(wl)  # type: ignore[arg-type]
    with METER.step() as machine:
        rec = eventloop.run(
            run_plan(
                url, wl, plan, WordPrompts(1), model="m", precise_pacing=precise, lean_http=lean
            )  # type: ignore[arg-type]
        )
    lag = np.array([s.queue_s for s in rec.requests]) * 1e3
    e2e = np.array([s.e2e_s for s in rec.requests]) * 1e3
    ok = rec.count("completed")
    return {
        "rate": rate,
        "sent": rec.sent,
        "planned": rec.planned,
        "completed": ok,
        "p50_ms": float(np.percentile(lag, 50)),
        "p99_ms": float(np.percentile(lag, 99)),
        "max_ms": float(lag.max()),
        "cpu_ms_per_req": 1e3 * rec.client_cpu_s / max(1, rec.sent),
        "cpu_share": rec.client_cpu_s / max(1e-9, rec.duration_s),
        "achieved_rps": rec.sent / max(1e-9, rec.duration_s),
        "e2e_p50_ms": float(np.percentile(e2e, 50)),
        "e2e_p99_ms": float(np.percentile(e2e, 99)),
        "foreign_cores": machine["foreign_cores"],
        "steal_s": machine["steal_s"],
    }


def fmt_rate(r: dict[str, float]) -> str:
    quiet = "" if r.get("foreign_cores", 0.0) < QUIET_CORES else "  NOT QUIET"
    return (
        f"rate {r['rate']:>6.0f}/s  sent {r['sent']:>6.0f}  ok {r['completed']:>6.0f}  "
        f"pacing p50 {r['p50_ms']:6.3f} ms  p99 {r['p99_ms']:7.3f} ms  "
        f"CPU {r['cpu_ms_per_req']:.3f} ms/req ({100 * r.get('cpu_share', 0):.0f}% of a core)  "
        f"others {100 * r.get('foreign_cores', 0):.0f}% of a core{quiet}"
    )


# ---------------------------------------------------------------------------- sections


def section_floor(n: int, rate: float = GOAL_RATE) -> float:
    """Lateness of bare timerfd wake-ups, no HTTP: the best pacing this machine allows now.

    Twice: every 2 ms, and on the goal's Poisson schedule (``rate``), on the bench loop.
    Returns the Poisson schedule's p99 in ms.
    """
    import random

    from tierctl.bench.pacing import TimerfdPacer

    async def loop(offsets: list[float]) -> list[float]:
        pacer = TimerfdPacer()
        late = []
        t = time.monotonic() + 0.01
        for off in offsets:
            d = t + off
            await pacer.sleep_until(d)
            late.append(time.monotonic() - d)
        pacer.close()
        return late

    rng = random.Random(5)
    poisson, t = [], 0.0
    for _ in range(n * 4):
        t += rng.expovariate(rate)
        poisson.append(t)
    print(
        f"\n== 0. noise floor: bare timerfd wake-ups on the {eventloop.run(_loop_name())} loop, no HTTP"
    )
    p99 = 0.0
    for label, offsets in (
        ("every 2 ms", [k * 0.002 for k in range(n)]),
        (f"Poisson {rate:g}/s", poisson),
    ):
        with METER.step() as machine:
            late = np.array(eventloop.run(loop(offsets))) * 1e3
        p99 = float(np.percentile(late, 99))
        print(
            f"   {label:>14}: {len(offsets)} wake-ups, lateness p50 {np.percentile(late, 50):.3f} ms, "
            f"p99 {p99:.3f} ms, max {late.max():.3f} ms; others {100 * machine['foreign_cores']:.0f}% "
            f"of a core, steal {machine['steal_s']:.2f} s"
        )
    print(f"   load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    return p99


async def _loop_name() -> str:
    return eventloop.loop_name()


def section_pacing(url: str, rate: float, seconds: float) -> None:
    print(f"\n== 1. pacing at {rate:g} req/s Poisson: timerfd vs asyncio.sleep")
    a = run_rate(url, rate, seconds, precise=True)
    b = run_rate(url, rate, seconds, precise=False)
    print("  timerfd      ", fmt_rate(a))
    print("  asyncio.sleep", fmt_rate(b))
    print(f"  p99 pacing error ratio sleep/timerfd: {b['p99_ms'] / max(a['p99_ms'], 1e-6):.1f}x")


def section_ramp(url: str, rates: list[float], seconds: float) -> dict[str, object]:
    """The Poisson ramp; every step's figures plus the highest rates held."""
    print(
        f"\n== 2. Poisson ramp with tierctl's runner ({eventloop.run(_loop_name())} loop, lean "
        "HTTP/1.1 path, timerfd relay pacing, GC tuning); client and server on their own cores"
    )
    best = relaxed = peak = 0.0
    misses = 0
    steps: list[dict[str, float]] = []
    for rate in rates:
        r = run_rate(url, rate, seconds)
        steps.append(r)
        complete = r["completed"] == r["sent"] == r["planned"]
        good = r["p99_ms"] < GOAL_P99_MS and complete
        ok = r["p50_ms"] < 1.0 and r["p99_ms"] < 10.0 and complete
        peak = max(peak, r["achieved_rps"])
        verdict = "p99 < 1 ms" if good else "p50 < 1 ms, p99 < 10 ms" if ok else "late"
        print(
            "  ",
            fmt_rate(r),
            f"max {r['max_ms']:.2f} ms, achieved {r['achieved_rps']:.0f}/s",
            verdict,
        )
        if good:
            best = max(best, rate)
        if ok:
            relaxed = max(relaxed, rate)
            misses = 0
        else:
            misses += 1
            if misses >= 2:
                break
    print(f"  highest rate with pacing p99 < 1 ms, every request completed: {best:g} req/s")
    print(f"  highest rate with pacing p50 < 1 ms and p99 < 10 ms: {relaxed:g} req/s")
    print(f"  peak achieved send rate: {peak:.0f} req/s")
    return {"best": best, "relaxed": relaxed, "peak": peak, "steps": steps}


def section_goal(url: str, seconds: float, repeats: int, floor_p99: float) -> bool | None:
    """The issue's goal, measured alone: GOAL_RATE Poisson, pacing p99 < GOAL_P99_MS."""
    print(
        f"\n== 2a. goal: {GOAL_RATE:g} req/s Poisson for {seconds:g} s, pacing p99 < "
        f"{GOAL_P99_MS:g} ms, every request completed ({repeats} runs)"
    )
    held_quiet = quiet_runs = 0
    for _ in range(repeats):
        r = run_rate(url, GOAL_RATE, seconds)
        complete = r["completed"] == r["sent"] == r["planned"]
        held = complete and r["p99_ms"] < GOAL_P99_MS
        quiet = r["foreign_cores"] < QUIET_CORES
        quiet_runs += quiet
        held_quiet += held and quiet
        print(
            "  ", fmt_rate(r), f"max {r['max_ms']:.2f} ms",
            "HELD" if held else "NOT HELD", "" if quiet else "(machine not quiet: not counted)",
        )  # fmt: skip
    if quiet_runs < min(2, repeats):
        verdict, met = "INCONCLUSIVE (too few quiet runs: rerun on a quiet machine)", None
    else:
        met = held_quiet == quiet_runs
        verdict = "MET" if met else "NOT MET"
    print(
        f"  goal {verdict}: {held_quiet} of {quiet_runs} quiet runs held it ({repeats} runs) "
        f"(bare timer floor p99 {floor_p99:.3f} ms on the same schedule, load average "
        f"{os.getloadavg()[0]:.2f})"
    )
    return met


def bare_aiohttp_rate(url: str, rate: float, seconds: float, seed: int = 7) -> dict[str, float]:
    """The baseline a user would write: Poisson arrivals, ``asyncio.sleep`` until each one,
    one task per request on a plain aiohttp session; pacing error = actual - planned send."""
    import random

    rng = random.Random(seed)
    offsets, t = [], 0.0
    while t < seconds:
        t += rng.expovariate(rate)
        offsets.append(t)
    body = orjson.dumps({"model": "m", "prompt": "hi", "max_tokens": 16, "stream": True})
    lags: list[float] = []

    async def main() -> float:
        async with aiohttp.ClientSession() as s:

            async def one() -> bool:
                async with s.post(url + "/v1/completions", data=body) as r:
                    async for _chunk in r.content.iter_any():
                        pass
                return r.status == 200

            tasks = []
            t0 = time.monotonic() + 0.05
            cpu0 = time.process_time()
            for off in offsets:
                delay = t0 + off - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                lags.append(time.monotonic() - (t0 + off))
                tasks.append(asyncio.create_task(one()))
            done = await asyncio.gather(*tasks, return_exceptions=True)
            completed.append(sum(1 for d in done if d is True))
            return time.process_time() - cpu0

    completed: list[int] = []
    cpu = asyncio.run(main())
    lag = np.array(lags) * 1e3
    return {
        "rate": rate,
        "sent": len(offsets),
        "completed": completed[0],
        "p50_ms": float(np.percentile(lag, 50)),
        "p99_ms": float(np.percentile(lag, 99)),
        "cpu_ms_per_req": 1e3 * cpu / max(1, len(offsets)),
    }


def section_bare(url: str, rates: list[float], seconds: float) -> None:
    print(
        "\n== 2b. the same Poisson rates: a bare aiohttp loop (asyncio.sleep pacing, asyncio's "
        "loop, what a user would write) vs tierctl, lean path and aiohttp path"
    )
    for rate in rates:
        r = bare_aiohttp_rate(url, rate, seconds)
        tierctl = run_rate(url, rate, seconds)
        via_aiohttp = run_rate(url, rate, seconds, lean=False)
        print(
            f"   rate {rate:>6.0f}/s  bare aiohttp: pacing p99 {r['p99_ms']:7.3f} ms, CPU "
            f"{r['cpu_ms_per_req']:.3f} ms/req | tierctl: p99 {tierctl['p99_ms']:7.3f} ms, CPU "
            f"{tierctl['cpu_ms_per_req']:.3f} ms/req | tierctl on aiohttp: p99 "
            f"{via_aiohttp['p99_ms']:7.3f} ms, CPU {via_aiohttp['cpu_ms_per_req']:.3f} ms/req | "
            f"CPU tierctl/bare {tierctl['cpu_ms_per_req'] / max(r['cpu_ms_per_req'], 1e-9):.2f}x"
        )


async def _aiohttp_loop(url: str, n: int, conc: int) -> None:
    body = orjson.dumps({"model": "m", "prompt": "hi", "max_tokens": 16, "stream": True})
    it = iter(range(n))
    async with make_session() as s:

        async def worker() -> None:
            for _ in it:
                async with s.post(url + "/v1/completions", data=body) as r:
                    async for _chunk in r.content.iter_any():
                        pass

        await asyncio.gather(*(worker() for _ in range(conc)))


async def _httpx_loop(url: str, n: int, conc: int) -> None:
    body = orjson.dumps({"model": "m", "prompt": "hi", "max_tokens": 16, "stream": True})
    it = iter(range(n))
    limits = httpx.Limits(max_connections=conc, max_keepalive_connections=conc)
    async with httpx.AsyncClient(limits=limits, timeout=10) as c:

        async def worker() -> None:
            for _ in it:
                async with c.stream("POST", url + "/v1/completions", content=body) as r:
                    async for _chunk in r.aiter_raw():
                        pass

        await asyncio.gather(*(worker() for _ in range(conc)))


async def _tierctl_loop(url: str, n: int, conc: int, lean: bool = True) -> None:
    """tierctl's own request path (body, SSE decoding, sample) in the same closed loop."""
    shape = RequestShape(api="completions", model="m", ignore_eos=True, timeout_s=10)
    it = iter(range(n))
    samples: list[RequestSample] = []
    pool = Http1Pool(url + "/v1/completions", headers=HEADERS) if lean else None
    async with make_session() as s:

        async def worker() -> None:
            for i in it:
                await send_request(
                    s, url + "/v1/completions", shape, index=i, lane="cpu", prompt="hi",
                    planned_input_tokens=1, max_tokens=16, scheduled_s=0.0, t0=0.0,
                    on_done=samples.append, pool=pool,
                )  # fmt: skip

        await asyncio.gather(*(worker() for _ in range(conc)))
    if pool is not None:
        pool.close()
    assert all(x.outcome == "completed" and x.output_tokens == 16 for x in samples), samples[:1]


async def _tierctl_aiohttp_loop(url: str, n: int, conc: int) -> None:
    await _tierctl_loop(url, n, conc, lean=False)


def section_libraries(url: str, n: int) -> None:
    print(
        f"\n== 3. client library: CPU per streamed request ({n} requests, concurrency 8; "
        "asyncio's loop, then uvloop)"
    )
    out = {}
    loops = (
        ("aiohttp", _aiohttp_loop),
        ("httpx", _httpx_loop),
        ("tierctl-aiohttp", _tierctl_aiohttp_loop),
        ("tierctl", _tierctl_loop),
    )
    runs = [(name, loop, False) for name, loop in loops]
    if eventloop.uvloop_available():
        runs += [(f"{name}+uvloop", loop, True) for name, loop in loops if name != "httpx"]
    for name, loop, uv in runs:
        cpu0, t0 = time.process_time(), time.monotonic()
        try:
            eventloop.run(
                asyncio.wait_for(loop(url, n, 8), MAX_SECONDS_PER_STEP * 3), prefer_uvloop=uv
            )
        except TimeoutError:
            print(
                f"  {name:22s} did not finish {n} requests in {MAX_SECONDS_PER_STEP * 3:g} s "
                f"(load average {os.getloadavg()[0]:.1f}): not measured"
            )
            continue
        cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
        out[name] = cpu / n
        print(f"  {name:22s} CPU {1e3 * cpu / n:.3f} ms/req, {n / wall:7.0f} req/s closed loop")
    if "httpx" in out and "aiohttp" in out:
        ratio = out["httpx"] / out["aiohttp"]
        print(f"  httpx/aiohttp CPU per request: {ratio:.1f}x -> aiohttp chosen")
    for tierctl, bare in (("tierctl", "aiohttp"), ("tierctl+uvloop", "aiohttp+uvloop")):
        if tierctl in out and bare in out:
            print(
                f"  {tierctl} (lean HTTP/1.1 + SSE decoding + sample) / bare {bare}: "
                f"{out[tierctl] / out[bare]:.2f}x; at 2,000 req/s that is "
                f"{2000 * out[tierctl]:.0%} of one core (bare: {2000 * out[bare]:.0%})"
            )


def section_gc(url: str, rate: float, seconds: float) -> None:
    print(f"\n== 4. cyclic GC at {rate:g} req/s: runner's GC tuning on vs off")
    on = run_rate(url, rate, seconds)
    saved = runner_mod._gc_quiet, runner_mod._gc_restore
    runner_mod._gc_quiet = lambda: (0, 0, 0)  # type: ignore[assignment]
    runner_mod._gc_restore = lambda _old: None  # type: ignore[assignment]
    try:
        off = run_rate(url, rate, seconds)
    finally:
        runner_mod._gc_quiet, runner_mod._gc_restore = saved
    print("  tuned  ", fmt_rate(on))
    print("  default", fmt_rate(off))


def section_ttft(core: int | None, n: int) -> None:
    """Client-side TTFT error: first-chunk arrival as the client records it minus the instant
    the server wrote it, both on CLOCK_MONOTONIC (Node's hrtime and Python's time.monotonic)."""
    print(f"\n== 5. TTFT measurement error ({n} sequential requests, server-stamped write time)")
    cmd = ["node", str(SERVER_JS), "0", "16"]
    if core is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(core), *cmd]
    shape = RequestShape(api="chat", model="m", ignore_eos=True, timeout_s=10)
    env = {**os.environ, "SSE_LOG": "2"}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env) as proc:
        try:
            assert proc.stdout is not None
            url = f"http://127.0.0.1:{int(proc.stdout.readline())}/v1/chat/completions"
            samples: list[RequestSample] = []

            async def go() -> None:
                async with make_session() as s:
                    for i in range(n):
                        await send_request(
                            s, url, shape, index=i, lane="ttft", prompt="hi",
                            planned_input_tokens=1, max_tokens=16, scheduled_s=0.0, t0=0.0,
                            on_done=samples.append,
                        )  # fmt: skip

            asyncio.run(go())
            written = [int(proc.stdout.readline()) / 1e9 for _ in range(n)]
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    # With t0 = 0, sent_s is the absolute monotonic send time.
    err = np.array(
        [(s.sent_s + s.ttft_s) - w for s, w in zip(samples, written, strict=True) if s.ttft_s]
    )
    err = err[1:] * 1e3  # the first includes connection set-up on the server side
    print(
        f"  client-recorded first chunk minus server write: p50 {np.percentile(err, 50):.3f} ms, "
        f"p99 {np.percentile(err, 99):.3f} ms, max {err.max():.3f} ms (loopback transfer + "
        "client wake-up and parse)"
    )


def section_upload(url: str, mb: int) -> None:
    print(f"\n== 6. {mb} MB request bodies")
    words = WordPrompts(0).prompt(mb * 1024 * 1024 // 6, salt=0)
    prompt = (words * (1 + mb * 1024 * 1024 // len(words)))[: mb * 1024 * 1024]
    shape = RequestShape(api="completions", model="m", ignore_eos=True, timeout_s=120)
    obj = {"model": "m", "prompt": prompt, "max_tokens": 1}
    t = time.perf_counter()
    json.dumps(obj)
    t_json = time.perf_counter() - t
    t = time.perf_counter()
    orjson.dumps(obj)
    t_orjson = time.perf_counter() - t
    print(
        f"  encode: json.dumps {t_json * 1e3:.0f} ms, orjson {t_orjson * 1e3:.0f} ms "
        f"({t_json / t_orjson:.1f}x)"
    )

    async def upload(kind: str) -> tuple[float, int]:
        async with make_session() as s:
            t0 = time.perf_counter()
            data = (
                stream_body(shape, prompt, 1)
                if kind == "streamed"
                else encode_body(shape, prompt, 1)
            )
            async with s.post(url + "/upload", data=data) as r:
                received = int(await r.text())
            return time.perf_counter() - t0, received

    for kind in ("bytes", "streamed"):
        best = min(asyncio.run(upload(kind)) for _ in range(3))
        print(
            f"  upload ({kind:8s}, encode included): {best[1] / 1e6 / best[0]:7.0f} MB/s "
            f"({best[1] / 1e6:.0f} MB in {best[0] * 1e3:.0f} ms)"
        )
    curl = shutil.which("curl")
    if curl is not None:
        # The same bytes from a file with curl: what this server and machine take at best.
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            f.write(orjson.dumps(obj))
            f.flush()
            rates = []
            for _ in range(3):
                out = subprocess.run(
                    [curl, "-s", "-o", "/dev/null", "-w", "%{speed_upload}", "--data-binary",
                     f"@{f.name}", url + "/upload"],
                    capture_output=True, text=True, timeout=120,
                )  # fmt: skip
                rates.append(float(out.stdout or 0) / 1e6)
        print(f"  reference: curl --data-binary from a file: {max(rates):7.0f} MB/s")


# ---------------------------------------------------------------------------- AIPerf


def rebuild_o200k(cache_dir: Path) -> str:
    """Write tiktoken's o200k_base file from the ranks in the npm package js-tiktoken.

    tiktoken caches a downloaded encoding under sha1(url) and checks its sha256; the ranks in
    js-tiktoken are the same table, stored as ``! <offset> <b64> <b64> ...`` runs.
    """
    target = cache_dir / hashlib.sha1(TIKTOKEN_URL.encode()).hexdigest()
    if target.exists():
        return "cached"
    work = Path(tempfile.mkdtemp(prefix="jstk-"))
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed, cannot fetch js-tiktoken")
    subprocess.run(
        [npm, "pack", "js-tiktoken@1.0.21"], cwd=work, check=True, capture_output=True, timeout=120
    )
    subprocess.run(["tar", "xzf", "js-tiktoken-1.0.21.tgz"], cwd=work, check=True, timeout=60)
    src = (work / "package/dist/ranks/o200k_base.cjs").read_text()
    data = json.loads(src[src.index("{") : src.rindex("}") + 1])
    lines = []
    for run in data["bpe_ranks"].split("\n"):
        if not run:
            continue
        _, offset, *tokens = run.split(" ")
        lines += [f"{tok} {int(offset) + i}" for i, tok in enumerate(tokens)]
    cache_dir.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n")
    return "rebuilt"


def section_aiperf(
    url: str, client_core: int | None, rates: list[float], seconds: float, tierctl_peak: float
) -> None:
    print("\n== 7. AIPerf side by side (same server, same core, same Poisson rates)")
    exe = AIPERF_VENV / "bin" / "aiperf"
    if not exe.exists():
        print(
            f"  AIPerf NOT RUN: no executable at {exe}. Install it into a throwaway venv:\n"
            f"    python3 -m venv {AIPERF_VENV} && {AIPERF_VENV}/bin/pip install aiperf"
        )
        return
    cache = Path(tempfile.gettempdir()) / "tiktoken-cache"
    try:
        how = rebuild_o200k(cache)
    except Exception as exc:
        print(f"  AIPerf NOT RUN: could not build tiktoken's o200k_base offline: {exc}")
        return
    print(f"  tiktoken o200k_base: {how} in {cache}")
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    peak = 0.0
    first: tuple[float, float] | None = None
    for rate in rates:
        count = max(50, int(rate * seconds))
        art = Path(tempfile.mkdtemp(prefix="aiperf-"))
        cmd = [str(exe), "profile", "--model", "m", "--url", url, "--endpoint-type", "chat",
               "--streaming", "--tokenizer", "builtin", "--request-rate", str(rate),
               "--request-count", str(count), "--artifact-dir", str(art),
               "--synthetic-input-tokens-mean", "32", "--output-tokens-mean", "16",
               "--ui-type", "none"]  # fmt: skip
        if client_core is not None and shutil.which("taskset"):
            cmd = ["taskset", "-c", str(client_core), *cmd]
        try:
            proc = subprocess.run(
                cmd, env=env, capture_output=True, text=True, timeout=MAX_SECONDS_PER_STEP * 6
            )
        except subprocess.TimeoutExpired:
            print(f"  rate {rate:g}: AIPerf did not finish within {MAX_SECONDS_PER_STEP * 6:g} s")
            break
        got = _aiperf_metrics(art)
        if proc.returncode != 0 or got is None:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
            print(f"  AIPerf NOT RUN at rate {rate:g}: exit {proc.returncode}; last lines:")
            for line in tail:
                print("    " + line[:200])
            return
        ours = run_rate(url, rate, seconds)
        tierctl_peak = max(tierctl_peak, ours["achieved_rps"])
        peak = max(peak, got["throughput"])
        if first is None:
            first = (got["p50_ms"], ours["e2e_p50_ms"])
        print(
            f"  rate {rate:>5.0f}/s  AIPerf: {got['throughput']:6.0f} req/s achieved, latency "
            f"p50 {got['p50_ms']:7.2f} ms p99 {got['p99_ms']:7.2f} ms | tierctl: "
            f"{ours['achieved_rps']:6.0f} req/s, E2E p50 {ours['e2e_p50_ms']:6.2f} ms "
            f"p99 {ours['e2e_p99_ms']:7.2f} ms, pacing p99 {ours['p99_ms']:.2f} ms"
        )
    if peak and first is not None:
        print(
            f"  peak achieved rate: tierctl {tierctl_peak:.0f} req/s vs AIPerf {peak:.0f} req/s "
            f"-> {tierctl_peak / peak:.1f}x"
        )
        print(
            f"  latency against the ~0.1 ms server at {rates[0]:g} req/s (client overhead): "
            f"AIPerf p50 {first[0]:.2f} ms vs tierctl {first[1]:.2f} ms -> "
            f"{first[0] / max(first[1], 1e-9):.0f}x"
        )
        print(
            "  (AIPerf reports no send-time pacing error, so achieved rate and latency are compared)"
        )


def _aiperf_metrics(art: Path) -> dict[str, float] | None:
    path = art / "profile_export_aiperf.json"
    try:
        doc = json.loads(path.read_text())
        lat = doc["request_latency"]
        return {
            "throughput": float(doc["request_throughput"]["avg"]),
            "p50_ms": float(lat["p50"]),
            "p99_ms": float(lat["p99"]),
        }
    except (OSError, ValueError, KeyError, TypeError):
        return None


# ---------------------------------------------------------------------------- main


SECTIONS = (
    "floor",
    "pacing",
    "ramp",
    "goal",
    "bare",
    "libraries",
    "gc",
    "upload",
    "aiperf",
    "ttft",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter steps")
    ap.add_argument("--skip-aiperf", action="store_true")
    ap.add_argument("--upload-mb", type=int, default=100)
    ap.add_argument(
        "--only",
        help=f"comma-separated sections to run (default: all): {','.join(SECTIONS)}",
    )
    ap.add_argument("--goal-seconds", type=float, default=5.0, help="length of each goal run")
    ap.add_argument("--goal-runs", type=int, default=3, help="goal runs (all must hold it)")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else set(SECTIONS)
    if args.skip_aiperf:
        only.discard("aiperf")
    unknown = only - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if shutil.which("node") is None:
        print("node is not installed: the reference server cannot start", file=sys.stderr)
        return 1
    server_core, client_core = cores()
    if client_core is not None:
        os.sched_setaffinity(0, {client_core})
    print(
        f"client pinned to core {client_core}, server to core {server_core} "
        f"({os.cpu_count()} cores on this machine); event loop for tierctl runs: "
        f"{eventloop.run(_loop_name())}"
    )
    note = eventloop.fallback_note()
    if note:
        print(note)
    secs = 1.0 if args.quick else 2.0
    floor = section_floor(500 if args.quick else 1500) if "floor" in only else float("nan")
    ramp: dict[str, object] = {"relaxed": 250.0, "peak": 0.0, "best": 0.0}
    goal: bool | None = None
    goal_ran = False
    with node_server(core=server_core) as url:
        if "pacing" in only:
            section_pacing(url, 200, secs * 2)
        if "ramp" in only:
            ramp = section_ramp(url, [500, 1000, 1500, 2000, 2500, 3000, 4000], secs)
        if "goal" in only:
            goal_ran = True
            goal = section_goal(url, args.goal_seconds, args.goal_runs, floor)
        if "bare" in only:
            section_bare(url, [1000, 2000, 3000], secs)
        if "libraries" in only:
            section_libraries(url, 1000 if args.quick else 3000)
        if "gc" in only:
            section_gc(url, max(float(ramp["relaxed"]), 250.0), secs * 2)  # type: ignore[arg-type]
        if "upload" in only:
            section_upload(url, args.upload_mb)
        if "aiperf" in only:
            section_aiperf(url, client_core, [200, 500, 1000, 2000], secs, float(ramp["peak"]))  # type: ignore[arg-type]
    if "ttft" in only:
        section_ttft(server_core, 100 if args.quick else 200)
    print("\n== summary")
    print(f"   bare timer noise floor p99 (Poisson {GOAL_RATE:g}/s schedule): {floor:.3f} ms")
    if "ramp" in only:
        print(f"   highest ramp rate with pacing p99 < 1 ms, all completed: {ramp['best']:g} req/s")
    if goal_ran:
        print(
            f"   goal {GOAL_RATE:g} req/s Poisson at pacing p99 < {GOAL_P99_MS:g} ms on one core: "
            f"{'INCONCLUSIVE (machine not quiet)' if goal is None else 'MET' if goal else 'NOT MET'}"
        )
    print(f"   load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
