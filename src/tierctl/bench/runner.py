"""Run one request plan against one endpoint, with the probe lane beside it.

Open-loop lanes (bursts, rate hammers, traces) are paced by :mod:`tierctl.bench.pacing`; each
request runs as its own task, which waits for its planned time, hands the next wait on and
sends, so a slow answer never delays the next send. Closed-loop hammers run N workers. Every
sent request yields exactly one sample, also when the run is stopped (``stop`` event, Ctrl-C
or ``max_duration_s``): in-flight requests are cancelled and recorded as ``interrupted``
failures, and the partial record is returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp

from tierctl.bench.client import (
    STREAM_BODY_BYTES,
    RequestShape,
    encode_body,
    lean_pool,
    make_session,
    send_request,
)
from tierctl.bench.clientcheck import ClientCheck, LoopMonitor, ReadBacklog, judge_client
from tierctl.bench.eventloop import loop_name
from tierctl.bench.http1 import Http1Pool
from tierctl.bench.pacing import Pacer, make_pacer
from tierctl.bench.plan import LanePlan, PlannedRequest, RequestPlan
from tierctl.bench.probe import run_probes
from tierctl.bench.prompts import PromptSource
from tierctl.bench.samples import ProbeSample, RequestSample, RunRecord
from tierctl.bench.workload import BenchWorkload
from tierctl.credentials import mask_userinfo

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
    workload: BenchWorkload,
    plan: RequestPlan,
    prompts: PromptSource,
    *,
    label: str = "run",
    model: str | None = None,
    stop: asyncio.Event | None = None,
    progress: Progress | None = None,
    precise_pacing: bool = True,
    lean_http: bool | None = None,
) -> RunRecord:
    """Send ``plan`` to ``base_url`` and return every sample, probes included.

    Never raises for server misbehaviour: failures are samples. Cancellation of the calling
    task (Ctrl-C under ``asyncio.run``) ends the run early and still returns the record with
    ``interrupted=True``.

    ``lean_http`` (default: on, unless ``TIERCTL_BENCH_HTTP=aiohttp``) sends plain-http
    requests through :mod:`tierctl.bench.http1`, aiohttp otherwise (https, streamed bodies).

    Phases: resolve the request shape; synthesise prompts before the clock; send every lane
    (:class:`_Sending`) with the probe lane beside it; stop the probes and restore the GC;
    judge the client and freeze the record.
    """
    shape = RequestShape(
        api=workload.api,
        model=model or await resolve_model(base_url, workload.model),
        ignore_eos=workload.ignore_eos,
        timeout_s=workload.timeout_s,
    )
    ready = _pregenerate(plan, prompts)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    gc_state = _gc_quiet()  # before the clock: a full collection can take tens of ms
    cpu0 = time.process_time()
    t0 = time.monotonic() + 0.05
    url = endpoint_url(base_url, workload.api)
    pool = lean_pool(url, lean_http)
    run = _Sending(
        url=url,
        pool=pool,
        shape=shape,
        prompts=prompts,
        ready=ready,
        t0=t0,
        deadline=t0 + workload.max_duration_s,
        stop=stop or asyncio.Event(),
        progress=progress,
        precise_pacing=precise_pacing,
    )
    probes: list[ProbeSample] = []
    probe_stop = asyncio.Event()
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
        try:
            interrupted = await run.send(session, plan)
        finally:
            probe_stop.set()
            if probe_task is not None:
                await asyncio.gather(probe_task, return_exceptions=True)
            _gc_restore(gc_state)
            await monitor.stop()
            if pool is not None:
                pool.close()
    duration = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    samples = sorted(run.samples, key=lambda s: (s.sent_s, s.index))
    check = client_check(
        samples, plan, monitor.lags_s, cpu, duration, run.backlog.max_bytes, loop_name()
    )
    return RunRecord(
        # Printed and written (results.json, report.md): a password in the URL never is.
        url=mask_userinfo(base_url),
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


@dataclass
class _Sending:
    """One run while it sends: its clock, its in-flight requests and the samples so far.

    One task per lane (:meth:`open_loop` or :meth:`closed_loop`) starts each request as its
    own task (a relay of :meth:`_paced` tasks, or :meth:`launch`); :meth:`send` waits for all
    of them, the stop event or the deadline, and cancels what is left.
    """

    url: str
    pool: Http1Pool | None
    shape: RequestShape
    prompts: PromptSource
    ready: dict[int, str]  # prompts synthesised before the clock, by request index
    t0: float
    deadline: float
    stop: asyncio.Event
    progress: Progress | None
    precise_pacing: bool
    backlog: ReadBacklog = field(default_factory=ReadBacklog)
    samples: list[RequestSample] = field(default_factory=list)
    in_flight: set[asyncio.Task[None]] = field(default_factory=set)
    #: Set exactly when nothing is in flight: O(1) per completion.
    idle: asyncio.Event = field(default_factory=asyncio.Event)

    def _on_done(self, sample: RequestSample) -> None:
        self.samples.append(sample)
        if self.progress is not None:
            self.progress(sample)

    def _settle(self, task: asyncio.Task[None]) -> None:
        self.in_flight.discard(task)
        if not self.in_flight:
            self.idle.set()

    def _prompt(self, req: PlannedRequest) -> str:
        return self.ready.pop(req.index, None) or self.prompts.prompt(req.input_tokens, req.index)

    def _track(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        self.in_flight.add(task)
        self.idle.clear()
        task.add_done_callback(self._settle)
        return task

    def launch(
        self, session: aiohttp.ClientSession, req: PlannedRequest, prompt: str, scheduled_s: float
    ) -> asyncio.Task[None]:
        """Start one request as its own task; its sample arrives through ``_on_done``."""
        return self._track(asyncio.create_task(self._send(session, req, prompt, scheduled_s)))

    def _send(
        self,
        session: aiohttp.ClientSession,
        req: PlannedRequest,
        prompt: str,
        scheduled_s: float,
        body: bytes | None = None,
    ) -> Coroutine[Any, Any, None]:
        return send_request(
            session,
            self.url,
            self.shape,
            index=req.index,
            lane=req.lane,
            prompt=prompt,
            planned_input_tokens=req.input_tokens,
            max_tokens=req.output_tokens,
            scheduled_s=scheduled_s,
            t0=self.t0,
            on_done=self._on_done,
            backlog=self.backlog,
            pool=self.pool,
            body=body,
        )

    async def open_loop(self, session: aiohttp.ClientSession, lane: LanePlan) -> None:
        """Send each request of ``lane`` at its planned offset, not waiting for answers.

        A relay of tasks, one per request (:meth:`_paced`): the task that waited for request
        k's time starts the wait for k + 1 in a new task, then sends k itself in the same
        step. So the send's stamp and write follow the pacer's wake-up directly; a separate
        sender task that created each request's task put one more event-loop pass (every
        callback that became ready meanwhile) between the two. Returns once the last request
        was started or the lane was cut short.
        """
        if not lane.requests:
            return
        pacer = make_pacer(self.precise_pacing)
        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            self._track(asyncio.create_task(self._paced(session, lane, 0, pacer, started)))
            await started
        finally:
            pacer.close()

    async def _paced(
        self,
        session: aiohttp.ClientSession,
        lane: LanePlan,
        k: int,
        pacer: Pacer,
        started: asyncio.Future[None],
    ) -> None:
        """Wait for request ``k`` of ``lane``, hand request ``k + 1`` on, send ``k``.

        Resolves ``started`` when the lane ends: after its last request, at the run's
        deadline, on the stop event, or (cancelled) without having sent request ``k``.
        """
        req = lane.requests[k]
        try:
            # Built before the wait, so synthesis and encoding never delay a send that is due.
            prompt = self._prompt(req)
            body = (
                encode_body(self.shape, prompt, req.output_tokens)
                if len(prompt) <= STREAM_BODY_BYTES
                else None
            )
            at = self.t0 + req.offset_s
            if at > self.deadline or self.stop.is_set():
                _resolve(started)
                return
            collect_in_gap(at - time.monotonic())
            await pacer.sleep_until(at)
            if self.stop.is_set():
                _resolve(started)
                return
            # Requests already due (the client is behind) start now, each in its own task as
            # a separate sender would: relaying them one per loop pass would fall further
            # behind. The first one not yet due carries the relay on.
            nxt, now = k + 1, time.monotonic()
            while nxt < len(lane.requests):
                due = lane.requests[nxt]
                if self.t0 + due.offset_s > now or self.t0 + due.offset_s > self.deadline:
                    break
                self.launch(session, due, self._prompt(due), due.offset_s)
                nxt += 1
            if nxt < len(lane.requests):
                self._track(asyncio.create_task(self._paced(session, lane, nxt, pacer, started)))
            else:
                _resolve(started)
        except asyncio.CancelledError:
            if not started.done():
                started.cancel()
            raise
        except Exception as exc:
            if not started.done():
                started.set_exception(exc)
            raise
        await self._send(session, req, prompt, req.offset_s, body)

    async def closed_loop(self, session: aiohttp.ClientSession, lane: LanePlan) -> None:
        """``lane.concurrency`` workers, each sending its next request when one answers."""
        assert lane.concurrency is not None
        queue: Iterator[PlannedRequest] = iter(lane.requests)
        stop_at = self.t0 + lane.stop_s if lane.stop_s is not None else self.deadline
        start = self.t0 + (lane.requests[0].offset_s if lane.requests else 0.0)

        async def worker() -> None:
            await asyncio.sleep(max(0.0, start - time.monotonic()))
            for req in queue:
                now = time.monotonic()
                if now > min(stop_at, self.deadline) or self.stop.is_set():
                    return
                prompt = self._prompt(req)
                await self.launch(session, req, prompt, time.monotonic() - self.t0)

        await asyncio.gather(*(worker() for _ in range(lane.concurrency)))

    async def send(self, session: aiohttp.ClientSession, plan: RequestPlan) -> bool:
        """Send every lane; wait for the answers, the stop event or the deadline.

        Returns whether the run was interrupted (stopped, timed out or cancelled with
        requests still in flight); those requests are cancelled and become samples.
        """
        senders = [
            asyncio.create_task(
                self.closed_loop(session, lane)
                if lane.concurrency
                else self.open_loop(session, lane)
            )
            for lane in plan.lanes
        ]
        stopped: asyncio.Future[Any] = asyncio.create_task(self.stop.wait())
        sending: asyncio.Future[Any] = asyncio.gather(*senders, return_exceptions=True)
        drained: asyncio.Future[Any] | None = None
        interrupted = False
        try:
            async with asyncio.timeout_at(_loop_time_at(self.deadline)):
                await asyncio.wait([sending, stopped], return_when=asyncio.FIRST_COMPLETED)
                if not self.stop.is_set() and self.in_flight:
                    # Invariant: ``idle`` is set exactly when nothing is in flight.
                    drained = asyncio.create_task(self.idle.wait())
                    await asyncio.wait([drained, stopped], return_when=asyncio.FIRST_COMPLETED)
            interrupted = self.stop.is_set() and bool(self.in_flight)
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
            for t in [*senders, *self.in_flight]:
                t.cancel()
            await asyncio.gather(sending, stopped, *list(self.in_flight), return_exceptions=True)
            if drained is not None:
                await asyncio.gather(drained, return_exceptions=True)
        return interrupted or self.stop.is_set()


def _pregenerate(plan: RequestPlan, prompts: PromptSource) -> dict[int, str]:
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


def _resolve(started: asyncio.Future[None]) -> None:
    if not started.done():
        started.set_result(None)


def _loop_time_at(monotonic_deadline: float) -> float:
    loop = asyncio.get_running_loop()
    return loop.time() + (monotonic_deadline - time.monotonic())


def client_check(
    samples: list[RequestSample],
    plan: RequestPlan,
    loop_lags_s: list[float],
    cpu_s: float,
    duration_s: float,
    backlog_bytes: int,
    event_loop: str | None = None,
) -> ClientCheck:
    """The client-bottleneck verdict of a run (see :mod:`tierctl.bench.clientcheck`)."""
    # A burst queues by design (its sends are serialised); pacing is judged on paced lanes.
    paced = {lane.name for lane in plan.lanes if lane.concurrency is None and lane.kind != "burst"}
    lags = [s.queue_s for s in samples if s.lane in paced]
    return judge_client(lags, loop_lags_s, cpu_s, duration_s, backlog_bytes, event_loop)


#: Young objects that make a collection worth doing in a pacing gap (about 0.3 ms per 1,000 on
#: the development machine); the automatic threshold is far above, a backstop only.
GC_YOUNG_OBJECTS = 1_000
#: A pacing gap at least this long may hold a young-generation collection.
GC_SLACK_S = 0.002
_GC_AUTO_THRESHOLD = 50_000
#: Whether the runner's GC tuning is on (set by :func:`_gc_quiet`, cleared by
#: :func:`_gc_restore`); only then do pacing gaps collect.
_gc_in_gaps = False


def _gc_quiet() -> tuple[int, int, int]:
    """Freeze what exists and move cyclic GC into the gaps between paced sends.

    Frozen objects (plan, prompts, modules) are never scanned again. The run's own survivors
    (one sample per request) used to fill the young generation until an automatic pass, every
    few thousand requests, scanned ~10K objects in one 3 ms pause that made a burst of sends
    late (measured: the clusters of late sends at 2,000 req/s sat on those passes). Now a
    paced lane collects the young generation itself when its next send is at least
    :data:`GC_SLACK_S` away and more than :data:`GC_YOUNG_OBJECTS` objects are young, then
    freezes the survivors so no later pass scans them again (:func:`collect_in_gap`); the
    automatic threshold stays as a backstop at 50K. Cyclic garbage that was still reachable at
    a freeze is only reclaimed after the run, by :func:`_gc_restore` (a 100K threshold alone
    made each pass a multi-millisecond pause; disabling GC lets a long run grow).
    """
    global _gc_in_gaps
    old = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(_GC_AUTO_THRESHOLD, 20, 100)
    _gc_in_gaps = True
    return old


def collect_in_gap(gap_s: float) -> None:
    """Collect and freeze the young generation if the next send is ``gap_s`` away and it is
    worth it (see :func:`_gc_quiet`)."""
    if _gc_in_gaps and gap_s >= GC_SLACK_S and gc.get_count()[0] > GC_YOUNG_OBJECTS:
        gc.collect(0)
        gc.freeze()


def _gc_restore(old: tuple[int, int, int]) -> None:
    global _gc_in_gaps
    _gc_in_gaps = False
    gc.set_threshold(*old)
    gc.unfreeze()
    with contextlib.suppress(Exception):
        gc.collect(0)
