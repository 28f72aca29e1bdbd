"""Drive the scheduler model in (scaled) real time for the engine server.

The driver plays SGLang's scheduler process: its simulated clock advances by each round's
modelled duration and it sleeps until the wall clock catches up (``time_scale`` modelled
seconds per wall second). Like the real scheduler, which is a separate process, it keeps its
own pace when the HTTP event loop stalls: tokens produced meanwhile are delivered late, all at
once. Only an idle engine re-syncs its clock to the wall.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from tierctl.sim.engine import Emission, Round, Scheduler
from tierctl.sim.metrics import SimMetrics
from tierctl.sim.workload import SimRequest

# A token and the modelled time (seconds since start) at which the engine produced it.
Timed = tuple[Emission, float]


class EngineDriver:
    """Runs a :class:`Scheduler` against the wall clock and fans tokens out to streams."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        time_scale: float,
        metrics: SimMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.scheduler = scheduler
        self.time_scale = time_scale
        self.metrics = metrics
        self._clock = clock
        self._t0 = clock()
        self._sim_s = 0.0
        self._streams: dict[str, asyncio.Queue[Timed]] = {}
        self._cached: dict[str, int] = {}  # rid -> prefix-cached prompt tokens, until read
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._seq = 0
        self._resting = True  # parked with nothing to run (the clock is not advancing)
        self._pending: Round | None = None  # the round run last, its tokens not yet handed out
        self._window_tokens, self._window_s, self._window_rounds = 0, 0.0, 0
        #: Rounds whose tokens were handed out (SGLang's health check watches for any).
        self.deliveries = 0

    def sim_now(self) -> float:
        """Modelled seconds since start, from the wall clock."""
        return (self._clock() - self._t0) * self.time_scale

    def new_rid(self) -> str:
        """A fresh request id."""
        self._seq += 1
        return f"req-{self._seq}"

    def submit(
        self, rid: str, input_tokens: int, output_tokens: int, block_hashes: tuple[int, ...]
    ) -> tuple[str, asyncio.Queue[Timed] | None, float]:
        """Hand a tokenized request to the scheduler.

        Returns its outcome, its token stream and the modelled time it was enqueued at.
        """
        arrived_s = self.sim_now()
        if self._resting:
            # The scheduler loop is parked: its clock stopped at the last round. Every request
            # arriving before it wakes (several can, in one event-loop tick) starts now, not
            # at that stale time, or the idle gap would show in its TTFT and E2E.
            self._sim_s = max(self._sim_s, arrived_s)
            arrived_s = self._sim_s
        elif self._sim_s < arrived_s:
            # The HTTP loop stalled (a prompt tokenized on it) while the engine had work. The
            # real scheduler is another process and kept running meanwhile, so run those
            # rounds now, before this request can be scheduled: stamped with the stale clock
            # it would jump the queue by the length of the stall.
            self._catch_up(arrived_s)
        req = SimRequest(rid, arrived_s, input_tokens, output_tokens, block_hashes)
        outcome = self.scheduler.submit(req, arrived_s)
        if outcome != "queued":
            return outcome, None, arrived_s
        q: asyncio.Queue[Timed] = asyncio.Queue()
        self._streams[rid] = q
        self._wake.set()
        return outcome, q, arrived_s

    def cancel(self, rid: str) -> None:
        """The client went away: drop the request from the scheduler."""
        self._streams.pop(rid, None)
        self._cached.pop(rid, None)
        self.scheduler.abort(rid, self._sim_s)

    def start(self) -> None:
        """Start the scheduler loop on the running event loop."""
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop the scheduler loop."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        sched = self.scheduler
        while True:
            if not sched.busy:
                self._wake.clear()
                idle_from = self._sim_s
                self._resting = True
                await self._wake.wait()
                now = self.sim_now()
                sched.idle(now - idle_from)
                self._sim_s = max(self._sim_s, now)
                self._resting = False
                continue
            self._resting = False
            if not self._advance():
                continue
            delay = self._sim_s / self.time_scale - (self._clock() - self._t0)
            # Yield even when behind so HTTP handlers get the loop between rounds.
            await asyncio.sleep(max(delay, 0.0))
            self._deliver()  # a no-op when a submit's catch-up delivered it already

    def _advance(self) -> bool:
        """Run one round; its tokens wait in ``_pending`` until its end time comes."""
        self._deliver()
        rnd = self.scheduler.step(self._sim_s)
        if rnd is None:
            return False
        self._sim_s += rnd.duration_s
        self._pending = rnd
        return True

    def _catch_up(self, until_s: float) -> None:
        """Run the rounds the engine would have run by ``until_s`` (modelled), at once."""
        self._deliver()
        while self._sim_s < until_s:
            if not self.scheduler.busy:
                self.scheduler.idle(until_s - self._sim_s)
                self._sim_s = until_s
                break
            if self._advance():
                self._deliver()

    def _deliver(self) -> None:
        """Hand the pending round's tokens to their streams; update the gauges."""
        rnd, self._pending = self._pending, None
        if rnd is None:
            return
        sched = self.scheduler
        end_s = rnd.start_s + rnd.duration_s
        if rnd.emitted:
            self.deliveries += 1
        finished = {live.req.rid: live for live in sched.done}
        for em in rnd.emitted:
            q = self._streams.get(em.rid)
            if em.index == 1 and q is not None:
                # Recorded now: a short request may already be finished (and gone from
                # sched.lives) by the time its handler reads the first token.
                live = sched.lives.get(em.rid) or finished.get(em.rid)
                self._cached[em.rid] = live.cached_tokens if live is not None else 0
            if q is not None:
                q.put_nowait((em, end_s))
                if em.finished:
                    self._streams.pop(em.rid, None)
        self._window_tokens += len(rnd.emitted)
        self._window_s += rnd.duration_s
        self._window_rounds += 1
        if self.metrics is not None and self._window_rounds >= 40:
            # SGLang logs throughput every --decode-log-interval (40) rounds.
            stats = sched.stats
            hit = stats.cached_tokens / stats.prompt_tokens if stats.prompt_tokens else 0.0
            w_s = self._window_s
            self.metrics.set_rates(self._window_tokens / w_s if w_s else 0.0, hit)
            self._window_tokens, self._window_s, self._window_rounds = 0, 0.0, 0
        if self.metrics is not None:
            running, waiting = sched.counts()
            self.metrics.set_scheduler(
                running,
                waiting,
                sched.kv_used_tokens,
                sched.kv_pool_tokens,
                sched.context_tokens,
            )
            self.metrics.set_preemptions(sched.stats.preemptions)
            self.metrics.set_spec(sched.stats.spec_drafts, sched.stats.spec_accepted_by_position)
        # Finished requests' bookkeeping is not needed by the server; keep memory flat.
        sched.done.clear()

    def cached_tokens(self, rid: str) -> int:
        """Prompt tokens the prefix cache served for a request (read once, after its first
        token; 0 when unknown)."""
        return self._cached.pop(rid, 0)
