"""Checking the simulator against a real engine: measure, fit, predict, compare.

A *plan* is a list of requests (send time, prompt length, output length). :func:`measure` plays
it against a real OpenAI-compatible engine on loopback (token-id prompts, so the lengths are
exact; ``ignore_eos`` so every request produces its output length) and records each request's
TTFT and inter-token gaps. :func:`predict` replays the same plan through the simulator with a
cost model, and :func:`compare_figures` puts the two side by side: TTFT p50/p90, TPOT p50 and
ITL p90 with the relative error. ``benchmarks/sim_fidelity.py`` fits on one plan and predicts
others; a CI-sized test does the same with a loose bound.

It sits above both steps it joins: the simulator (:mod:`tierctl.sim`) predicts, and the
measurement is the load client's: each request is sent and read by
:func:`tierctl.bench.client.send_request` (its SSE reading, its TTFT/ITL/TPOT definitions),
and the client is judged by its client check (:mod:`tierctl.bench.clientcheck`).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass
from typing import Any

from tierctl.bench.client import RequestShape, lean_pool, make_session, send_request
from tierctl.bench.clientcheck import ClientCheck, LoopMonitor, ReadBacklog, judge_client
from tierctl.bench.runner import endpoint_url
from tierctl.bench.samples import RequestSample
from tierctl.engines import profile_for
from tierctl.errors import RuntimeFailure
from tierctl.latency import percentile
from tierctl.results import MeasuredRequest
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.iteration_fit import parse_vllm_iterations
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
    url: str,
    model: str,
    plan: list[PlannedSend],
    *,
    seed: int = 0,
    timeout_s: float = 300.0,
    engine: str = "vllm",
) -> list[MeasuredRequest]:
    """Play ``plan`` against a real engine at ``url`` (loopback); one record per request.

    Bounded: at most ``len(plan)`` requests, each with a ``timeout_s`` limit.

    Raises:
        RuntimeFailure: a request failed or got no token (the engine died or wedged).
    """
    reqs, _ = await measure_checked(url, model, plan, seed=seed, timeout_s=timeout_s, engine=engine)
    return reqs


async def measure_checked(
    url: str,
    model: str,
    plan: list[PlannedSend],
    *,
    seed: int = 0,
    timeout_s: float = 300.0,
    engine: str = "vllm",
) -> tuple[list[MeasuredRequest], ClientCheck]:
    """:func:`measure`, with how well the client itself kept up: the load client's check
    (:class:`~tierctl.bench.clientcheck.ClientCheck`; its ``trusted()`` is the fidelity bar).

    Each request is the load client's (:func:`tierctl.bench.client.send_request`): a
    completions request whose prompt is token ids, streamed with per-chunk usage where
    ``engine``'s profile says the engine has it, so every token gets its own timestamp even
    when the engine merges several into one chunk.

    Prompts are random token ids drawn from ``seed``: give each measured workload its own seed,
    or vLLM's prefix cache serves one workload's prompts from another's and its TTFTs shrink.

    Raises:
        RuntimeFailure: a request failed or got no token.
    """
    rng = random.Random(seed)
    prompts = [[rng.randrange(*_ID_RANGE) for _ in range(p.input_tokens)] for p in plan]
    shape = RequestShape(
        api="completions",
        model=model,
        ignore_eos=True,
        timeout_s=timeout_s,
        per_chunk_usage=profile_for(engine).per_chunk_usage,
    )
    endpoint = endpoint_url(url, shape.api)
    pool = lean_pool(endpoint)
    backlog = ReadBacklog()
    samples: list[RequestSample] = []
    t0 = time.monotonic()
    cpu0 = time.process_time()
    # The client's own event-loop lag: a blocked or descheduled client stamps tokens late.
    loop = LoopMonitor(period_s=0.01)
    session = make_session()

    async def one(i: int, p: PlannedSend, ids: list[int]) -> None:
        delay = p.send_s - (time.monotonic() - t0)
        if delay > 0:
            await asyncio.sleep(delay)
        await send_request(
            session, endpoint, shape, index=i, lane="fidelity", prompt=ids,
            planned_input_tokens=p.input_tokens, max_tokens=p.output_tokens,
            scheduled_s=p.send_s, t0=t0, on_done=samples.append, backlog=backlog, pool=pool,
        )  # fmt: skip

    loop.start()
    try:
        async with session:
            sends = enumerate(zip(plan, prompts, strict=True))
            await asyncio.gather(*(one(i, p, ids) for i, (p, ids) in sends))
    finally:
        await loop.stop()
        if pool is not None:
            pool.close()
    ordered = sorted(samples, key=lambda sample: sample.index)
    check = judge_client(
        [sample.queue_s for sample in ordered],
        loop.lags_s,
        time.process_time() - cpu0,
        time.monotonic() - t0,
        backlog.max_bytes,
    )
    return [_measured(sample) for sample in ordered], check


def _measured(sample: RequestSample) -> MeasuredRequest:
    """One completed sample as the fits and the figures read it.

    Raises:
        RuntimeFailure: the request failed, or completed without a token.
    """
    if sample.outcome != "completed":
        raise RuntimeFailure(
            f"a {sample.planned_input_tokens}-token request {sample.outcome.replace('_', ' ')}"
            f" ({sample.error_class}: {sample.error})",
            fix="read the engine's log: it may have died",
        )
    if sample.ttft_s is None or sample.output_tokens < 1:
        # A dead or wedged engine answers 200 with an empty stream; a figure of 0 s would
        # read as a measurement.
        raise RuntimeFailure(
            f"the engine streamed no token for a {sample.planned_input_tokens}-token request",
            fix="read the engine's log: it may have died",
        )
    return MeasuredRequest(
        sample.sent_s,
        sample.planned_input_tokens,
        sample.output_tokens,
        sample.ttft_s,
        sample.tpot_s,
        sample.itl_s,
    )


def iteration_log_complete(text: str, requests: list[MeasuredRequest]) -> bool:
    """Whether a vLLM iteration log (``--enable-logging-iteration-details``) already holds
    every step that served ``requests``: one decode step per output token after each
    request's first (the first comes from its last prefill step). The engine writes its log
    a little after the stream ends, so a reader polls this before replaying the log."""
    decoded = sum(step.generation_requests for step in parse_vllm_iterations(text))
    return decoded >= sum(max(0, m.output_tokens - 1) for m in requests)


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
