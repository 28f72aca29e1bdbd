"""Checking the simulator against a real engine: measure, fit, predict, compare.

A *plan* is a list of requests (send time, prompt length, output length). :func:`measure` plays
it against a real OpenAI-compatible engine on loopback (token-id prompts, so the lengths are
exact; ``ignore_eos`` so every request produces its output length) and records each request's
TTFT and inter-token gaps. :func:`predict` replays the same plan through the simulator with a
cost model, and :func:`compare_figures` puts the two side by side: TTFT p50/p90, TPOT p50 and
ITL p90 with the relative error. ``benchmarks/sim_fidelity.py`` fits on one plan and predicts
others; a CI-sized test does the same with a loose bound.

It sits above both steps it joins: the simulator (:mod:`tierctl.sim`) predicts, and the
measurement reads the stream with the load client's SSE decoder (:mod:`tierctl.bench.sse`),
judges the client with its client check (:mod:`tierctl.bench.clientcheck`) and takes TPOT
from :func:`tierctl.latency.tpot_s`.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass
from typing import Any

from tierctl.bench.clientcheck import ClientCheck, LoopMonitor, judge_client
from tierctl.bench.sse import SSEDecoder, parse_event
from tierctl.errors import RuntimeFailure
from tierctl.latency import percentile, tpot_s
from tierctl.results import MeasuredRequest
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload

# Token ids for prompts: inside any small vocabulary and clear of special tokens.
_ID_RANGE = (20, 1000)


@dataclass(frozen=True)
class PlannedSend:
    """One request of a fidelity plan: when it is sent and its token counts."""

    send_s: float
    input_tokens: int
    output_tokens: int


def burst_plan(count: int, input_tokens: int, output_tokens: int) -> list[PlannedSend]:
    """``count`` requests at once."""
    return [PlannedSend(0.0, input_tokens, output_tokens) for _ in range(count)]


def poisson_plan(
    rng: random.Random,
    rate_per_s: float,
    count: int,
    input_tokens: tuple[int, int],
    output_tokens: tuple[int, int],
) -> list[PlannedSend]:
    """``count`` requests with Poisson arrivals and uniform lengths."""
    t, out = 0.0, []
    for _ in range(count):
        out.append(PlannedSend(t, rng.randint(*input_tokens), rng.randint(*output_tokens)))
        t += rng.expovariate(rate_per_s)
    return out


def decoders_and_long_plan(
    decoders: int,
    long_prompts: int,
    long_tokens: int,
    gap_s: float,
    *,
    decoder_output: int = 160,
    first_s: float | None = None,
) -> list[PlannedSend]:
    """Short prompts with long outputs, then long prompts arriving while they decode (the
    first at ``first_s``, default ``gap_s``, then every ``gap_s``)."""
    start = gap_s if first_s is None else first_s
    plan = [PlannedSend(0.0, 32, decoder_output) for _ in range(decoders)]
    plan += [PlannedSend(start + gap_s * i, long_tokens, 8) for i in range(long_prompts)]
    return plan


async def measure(
    url: str, model: str, plan: list[PlannedSend], *, seed: int = 0, timeout_s: float = 300.0
) -> list[MeasuredRequest]:
    """Play ``plan`` against a real engine at ``url`` (loopback); one record per request.

    Bounded: at most ``len(plan)`` requests, each with a ``timeout_s`` limit.

    Raises:
        RuntimeFailure: a request got no token (the engine died or wedged).
    """
    reqs, _ = await measure_checked(url, model, plan, seed=seed, timeout_s=timeout_s)
    return reqs


async def measure_checked(
    url: str, model: str, plan: list[PlannedSend], *, seed: int = 0, timeout_s: float = 300.0
) -> tuple[list[MeasuredRequest], ClientCheck]:
    """:func:`measure`, with how well the client itself kept up: the load client's check
    (:class:`~tierctl.bench.clientcheck.ClientCheck`; its ``trusted()`` is the fidelity bar).

    Prompts are random token ids drawn from ``seed``: give each measured workload its own seed,
    or vLLM's prefix cache serves one workload's prompts from another's and its TTFTs shrink.
    """
    import aiohttp

    rng = random.Random(seed)
    prompts = [[rng.randrange(*_ID_RANGE) for _ in range(p.input_tokens)] for p in plan]
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    t0 = time.monotonic()
    cpu0 = time.process_time()
    send_lags: list[float] = []
    # The client's own event-loop lag: a blocked or descheduled client stamps tokens late.
    loop = LoopMonitor(period_s=0.01)

    async def one(s: aiohttp.ClientSession, p: PlannedSend, ids: list[int]) -> MeasuredRequest:
        delay = p.send_s - (time.monotonic() - t0)
        if delay > 0:
            await asyncio.sleep(delay)
        # vLLM merges tokens into one chunk when the client falls behind; its per-chunk usage
        # (continuous_usage_stats) says how many tokens each chunk carries.
        body = {"model": model, "prompt": ids, "max_tokens": p.output_tokens, "stream": True,
                "ignore_eos": True, "temperature": 0,
                "stream_options": {"include_usage": True, "continuous_usage_stats": True}}  # fmt: skip
        sent = time.monotonic()
        send_lags.append(sent - t0 - p.send_s)
        stamps: list[float] = []
        decoder = SSEDecoder()
        async with s.post(url + "/v1/completions", json=body) as r:
            r.raise_for_status()
            async for raw in r.content:
                now = time.monotonic()
                for ev in map(parse_event, decoder.feed(raw)):
                    if ev.completion_tokens is not None:
                        stamps += [now] * max(0, ev.completion_tokens - len(stamps))
                    elif ev.text:
                        stamps.append(now)
        n = len(stamps)
        if not n:
            # A dead or wedged engine answers 200 with an empty stream; a figure of 0 s would
            # read as a measurement.
            raise RuntimeFailure(
                f"the engine streamed no token for a {p.input_tokens}-token request",
                fix="read the engine's log: it may have died",
            )
        ttft = stamps[0] - sent
        gaps = tuple(b - a for a, b in itertools.pairwise(stamps))
        tpot = tpot_s(stamps[0], stamps[-1], n)
        return MeasuredRequest(sent - t0, p.input_tokens, n, ttft, tpot, gaps)

    loop.start()
    try:
        async with aiohttp.ClientSession(timeout=timeout) as s:
            got = list(
                await asyncio.gather(
                    *(one(s, p, ids) for p, ids in zip(plan, prompts, strict=True))
                )
            )
    finally:
        await loop.stop()
    check = judge_client(
        send_lags, loop.lags_s, time.process_time() - cpu0, time.monotonic() - t0, 0
    )
    return got, check


def predict(
    plan: list[MeasuredRequest], config: EngineConfig, cost: CostModel, *, seed: int = 0
) -> list[MeasuredRequest]:
    """The simulator's figures for the same requests (the measured send times and lengths);
    ``seed`` draws the step jitter of a cost model that has one."""
    wl = Workload.of(
        "plan",
        [SimRequest(f"p-{i}", m.sent_s, m.input_tokens, max(1, m.output_tokens))
         for i, m in enumerate(plan)],
    )  # fmt: skip
    rounds: list[Any] = []
    res = simulate(config, wl, cost, steps=rounds, seed=seed)
    # Per-token times from the stepped rounds give each request's inter-token gaps.
    times: dict[str, list[float]] = {}
    for rnd in rounds:
        end = rnd.start_s + rnd.duration_s
        for em in rnd.emitted:
            times.setdefault(em.rid, []).append(end)
    out = []
    by = {r.rid: r for r in res.requests}
    for i, m in enumerate(plan):
        r = by[f"p-{i}"]
        ts = times.get(f"p-{i}", [])
        gaps = tuple(b - a for a, b in itertools.pairwise(ts))
        out.append(MeasuredRequest(m.sent_s, m.input_tokens, r.output_tokens, r.ttft_s or 0.0,
                                   r.tpot_s, gaps))  # fmt: skip
    return out


@dataclass(frozen=True)
class FigureRow:
    """One figure, measured and predicted."""

    metric: str
    measured_s: float | None
    predicted_s: float | None

    @property
    def error(self) -> float | None:
        """Relative error of the prediction (predicted / measured - 1)."""
        if not self.measured_s or self.predicted_s is None:
            return None
        return self.predicted_s / self.measured_s - 1


def figures(reqs: list[MeasuredRequest]) -> dict[str, float | None]:
    """TTFT p50/p90, TPOT p50, ITL p90 of a run (seconds)."""
    ttft = [r.ttft_s for r in reqs]
    tpot = [r.tpot_s for r in reqs if r.tpot_s is not None]
    itl = [g for r in reqs for g in r.itl_s]
    return {
        "TTFT p50": percentile(ttft, 50),
        "TTFT p90": percentile(ttft, 90),
        "TPOT p50": percentile(tpot, 50),
        "ITL p90": percentile(itl, 90),
    }


def predicted_figures(
    plan: list[MeasuredRequest], config: EngineConfig, cost: CostModel, *, runs: int = 5
) -> dict[str, float | None]:
    """:func:`figures` of the prediction; with step jitter, the median over ``runs`` simulated
    runs (seeds 0..runs-1), as a measurement is judged by its median run: one draw of a
    jittered model is as noisy as one real run."""
    import statistics

    if not cost.step_jitter:
        return figures(predict(plan, config, cost))
    per = [figures(predict(plan, config, cost, seed=k)) for k in range(max(1, runs))]
    out: dict[str, float | None] = {}
    for metric in per[0]:
        vals = [v for f in per if (v := f[metric]) is not None]
        out[metric] = statistics.median(vals) if vals else None
    return out


def compare_figures(
    measured: list[MeasuredRequest], predicted: list[MeasuredRequest]
) -> list[FigureRow]:
    """Measured against predicted, figure by figure."""
    a, b = figures(measured), figures(predicted)
    return [FigureRow(k, a[k], b[k]) for k in a]
