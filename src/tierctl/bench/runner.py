"""Run one request plan against one endpoint, with the probe lane beside it.

Open-loop lanes (bursts, rate hammers, traces) are dispatched by one sender per lane, paced by
:mod:`tierctl.bench.pacing`; each request runs as its own task so a slow answer never delays
the next send. Closed-loop hammers run N workers. Every sent request yields exactly one sample,
also when the run is stopped (``stop`` event, Ctrl-C or ``max_duration_s``): in-flight requests
are cancelled and recorded as ``interrupted`` failures, and the partial record is returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import aiohttp

from tierctl.bench.client import RequestShape, make_session, send_request
from tierctl.bench.clientcheck import ClientCheck, LoopMonitor, ReadBacklog, judge
from tierctl.bench.pacing import make_pacer
from tierctl.bench.plan import LanePlan, Plan, PlannedRequest
from tierctl.bench.probe import run_probes
from tierctl.bench.prompts import PromptSource
from tierctl.bench.samples import ProbeSample, RequestSample, RunRecord
from tierctl.bench.workload import Workload

#: Prompts are synthesised up front when the plan holds at most this many prompt tokens
#: (about 100 MB of text).
PREGENERATE_TOKENS = 20_000_000

Progress = Callable[[RequestSample], None]


def endpoint_url(base_url: str, api: str) -> str:
    """The streaming endpoint for ``api`` under ``base_url``."""
    path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
    return base_url.rstrip("/") + path


async def resolve_model(base_url: str, configured: str | None) -> str:
    """The configured model, else the first id of ``/v1/models``, else ``default``."""
    if configured:
        return configured
    try:
        async with (
            aiohttp.ClientSession() as session,
            asyncio.timeout(10),
            session.get(base_url.rstrip("/") + "/v1/models") as resp,
        ):
            if resp.status == 200:
                data = await resp.json(content_type=None)
                models = data.get("data") if isinstance(data, dict) else None
                if isinstance(models, list) and models and isinstance(models[0], dict):
                    return str(models[0].get("id", "default"))
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
        pass
    return "default"


async def run_plan(
    base_url: str,
    workload: Workload,
    plan: Plan,
    prompts: PromptSource,
    *,
    label: str = "run",
    model: str | None = None,
    stop: asyncio.Event | None = None,
    progress: Progress | None = None,
    precise_pacing: bool = True,
) -> RunRecord:
    """Send ``plan`` to ``base_url`` and return every sample, probes included.

    Never raises for server misbehaviour: failures are samples. Cancellation of the calling
    task (Ctrl-C under ``asyncio.run``) ends the run early and still returns the record with
    ``interrupted=True``.
    """
    stop = stop or asyncio.Event()
    shape = RequestShape(
        api=workload.api,
        model=model or await resolve_model(base_url, workload.model),
        ignore_eos=workload.ignore_eos,
        timeout_s=workload.timeout_s,
    )
    url = endpoint_url(base_url, workload.api)
    samples: list[RequestSample] = []
    probes: list[ProbeSample] = []

    def on_done(sample: RequestSample) -> None:
        samples.append(sample)
        if progress is not None:
            progress(sample)

    ready = _pregenerate(plan, prompts)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    gc_state = _gc_quiet()  # before the clock: a full collection can take tens of ms
    cpu0 = time.process_time()
    t0 = time.monotonic() + 0.05
    deadline = t0 + workload.max_duration_s
    in_flight: set[asyncio.Task[None]] = set()
    idle = asyncio.Event()  # set whenever nothing is in flight: O(1) per completion

    def settle(task: asyncio.Task[None]) -> None:
        in_flight.discard(task)
        if not in_flight:
            idle.set()

    interrupted = False
    probe_stop = asyncio.Event()
    backlog = ReadBacklog()
    monitor = LoopMonitor()
    monitor.start()
    async with make_session() as session:
        probe_task = (
            asyncio.create_task(
                run_probes(base_url, workload.probe, t0=t0, stop=probe_stop, sink=probes)
            )
            if workload.probe.enabled
            else None
        )

        def launch(req: PlannedRequest, prompt: str, scheduled_s: float) -> asyncio.Task[None]:
            task = asyncio.create_task(
                send_request(
                    session,
                    url,
                    shape,
                    index=req.index,
                    lane=req.lane,
                    prompt=prompt,
                    planned_input_tokens=req.input_tokens,
                    max_tokens=req.output_tokens,
                    scheduled_s=scheduled_s,
                    t0=t0,
                    on_done=on_done,
                    backlog=backlog,
                )
            )
            in_flight.add(task)
            idle.clear()
            task.add_done_callback(settle)
            return task

        async def open_loop(lane: LanePlan) -> None:
            pacer = make_pacer(precise_pacing)
            try:
                for req in lane.requests:
                    # Built before the wait, so synthesis never delays a send that is due.
                    prompt = ready.pop(req.index, None) or prompts.prompt(
                        req.input_tokens, req.index
                    )
                    at = t0 + req.offset_s
                    if at > deadline or stop.is_set():
                        return
                    await pacer.sleep_until(at)
                    if stop.is_set():
                        return
                    launch(req, prompt, req.offset_s)
            finally:
                pacer.close()

        async def closed_loop(lane: LanePlan) -> None:
            assert lane.concurrency is not None
            queue: Iterator[PlannedRequest] = iter(lane.requests)
            stop_at = t0 + lane.stop_s if lane.stop_s is not None else deadline
            start = t0 + (lane.requests[0].offset_s if lane.requests else 0.0)

            async def worker() -> None:
                await asyncio.sleep(max(0.0, start - time.monotonic()))
                for req in queue:
                    now = time.monotonic()
                    if now > min(stop_at, deadline) or stop.is_set():
                        return
                    prompt = ready.pop(req.index, None) or prompts.prompt(
                        req.input_tokens, req.index
                    )
                    await launch(req, prompt, time.monotonic() - t0)

            await asyncio.gather(*(worker() for _ in range(lane.concurrency)))

        senders = [
            asyncio.create_task(closed_loop(lane) if lane.concurrency else open_loop(lane))
            for lane in plan.lanes
        ]
        stopped: asyncio.Future[Any] = asyncio.create_task(stop.wait())
        sending: asyncio.Future[Any] = asyncio.gather(*senders, return_exceptions=True)
        drained: asyncio.Future[Any] | None = None
        try:
            async with asyncio.timeout_at(_loop_time_at(deadline)):
                await asyncio.wait([sending, stopped], return_when=asyncio.FIRST_COMPLETED)
                if not stop.is_set() and in_flight:
                    # Invariant: ``idle`` is set exactly when nothing is in flight.
                    drained = asyncio.create_task(idle.wait())
                    await asyncio.wait([drained, stopped], return_when=asyncio.FIRST_COMPLETED)
            interrupted = stop.is_set() and bool(in_flight)
        except TimeoutError:
            interrupted = True
        except asyncio.CancelledError:
            interrupted = True
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        finally:
            stopped.cancel()
            if drained is not None:
                drained.cancel()
            for t in [*senders, *in_flight]:
                t.cancel()
            await asyncio.gather(sending, stopped, *list(in_flight), return_exceptions=True)
            if drained is not None:
                await asyncio.gather(drained, return_exceptions=True)
            interrupted = interrupted or stop.is_set()
            probe_stop.set()
            if probe_task is not None:
                await asyncio.gather(probe_task, return_exceptions=True)
            _gc_restore(gc_state)
            await monitor.stop()
    duration = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    samples.sort(key=lambda s: (s.sent_s, s.index))
    check = client_check(samples, plan, monitor.lags_s, cpu, duration, backlog.max_bytes)
    return RunRecord(
        url=base_url,
        label=label,
        started_at=started_at,
        duration_s=duration,
        requests=tuple(samples),
        probes=tuple(sorted(probes, key=lambda p: p.sent_s)),
        planned=plan.size,
        interrupted=interrupted,
        client_cpu_s=cpu,
        warnings=check.reasons,
        client=check,
    )


def _pregenerate(plan: Plan, prompts: PromptSource) -> dict[int, str]:
    """Synthesise every prompt before the clock starts when they fit in memory.

    Tokenizer-based synthesis of a long prompt takes milliseconds to seconds; done between
    sends it would show up as client lag (and hit whichever arm runs first hardest). Beyond
    :data:`PREGENERATE_TOKENS` in total, prompts are built lazily, each before its wait.
    """
    if plan.size == 0:
        return {}
    prompts.prompt(plan.max_input_tokens, -1)  # warm the source's base text once
    total = sum(r.input_tokens for lane in plan.lanes for r in lane.requests)
    if total > PREGENERATE_TOKENS:
        return {}
    return {
        r.index: prompts.prompt(r.input_tokens, r.index)
        for lane in plan.lanes
        for r in lane.requests
    }


def _loop_time_at(monotonic_deadline: float) -> float:
    loop = asyncio.get_running_loop()
    return loop.time() + (monotonic_deadline - time.monotonic())


def client_check(
    samples: list[RequestSample],
    plan: Plan,
    loop_lags_s: list[float],
    cpu_s: float,
    duration_s: float,
    backlog_bytes: int,
) -> ClientCheck:
    """The client-bottleneck verdict of a run (see :mod:`tierctl.bench.clientcheck`)."""
    # A burst queues by design (its sends are serialised); pacing is judged on paced lanes.
    paced = {lane.name for lane in plan.lanes if lane.concurrency is None and lane.kind != "burst"}
    lags = [s.queue_s for s in samples if s.lane in paced]
    return judge(lags, loop_lags_s, cpu_s, duration_s, backlog_bytes)


def _gc_quiet() -> tuple[int, int, int]:
    """Freeze what exists and raise the gen-0 threshold: cyclic GC pauses skew pacing.

    Frozen objects (plan, prompts, modules) are never scanned again. Gen-0 runs every 10K
    allocations instead of 700: rarer, and each pass stays short (a 100K threshold made the
    passes themselves millisecond pauses; disabling GC did no better and lets a long run grow).
    """
    old = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 100)
    return old


def _gc_restore(old: tuple[int, int, int]) -> None:
    gc.set_threshold(*old)
    gc.unfreeze()
    with contextlib.suppress(Exception):
        gc.collect(0)
