"""``sim run --trace`` in memory that does not grow with the trace: rows in, figures out.

The in-memory path (:func:`tierctl.sim.simulate.simulate`) holds every request three times
over: the workload's tuple, the scheduler's finished requests, and the per-request results the
summary is computed from (about 1.5 KB a request: a 400 MB trace peaked at 769 MiB). When the
command prints only the summary (``sim run --trace`` without ``--format json``/``--per-request``),
this path instead

* reads the trace as a stream (:func:`tierctl.traces.iter_trace`): a row becomes a request
  when the scheduler's clock reaches its arrival, and is dropped from the buffer once
  submitted;
* folds each finished request into the summary and forgets it (every 2,048 scheduler loops
  and at the end), so the scheduler holds only the requests in flight;
* keeps the three percentile series (TTFT, TPOT, queue wait) as packed float64 arrays, 8 bytes
  a value: **exact** (the same numbers as the in-memory path) up to :data:`EXACT_CAP` values
  a series; past that a series folds into a log histogram of relative width
  :data:`HIST_RELATIVE` (percentiles within 0.1 %, memory bounded whatever the trace's size).

It applies when the trace is sorted by arrival (a row earlier than the one before it stops the
stream, and the caller falls back to the in-memory path, which sorts), the cost model charges
no host-side time, and the scheduler is a single one (not DP attention): otherwise
:func:`simulate_trace_stream` returns ``None``.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterator
from pathlib import Path

from tierctl.errors import InputError, Location
from tierctl.latency import percentile
from tierctl.sim import budget
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel, preset
from tierctl.sim.engine import Live, itl_quantile, make_scheduler
from tierctl.sim.host import has_host_costs
from tierctl.sim.result import RequestResult, SimResult, SimSummary
from tierctl.sim.simulate import _run, probe_figures
from tierctl.sim.workload import SimRequest
from tierctl.traces import iter_trace, wall_clock

#: Values one percentile series keeps exactly (32 MiB of float64) before it folds into a
#: histogram: 4.2 M requests, a trace of about 1.2 GB at the Mooncake trace's row size.
EXACT_CAP = 1 << 22

#: Relative width of a folded series' histogram bucket (a percentile read from it is the
#: bucket's geometric middle: within half of this of the exact value).
HIST_RELATIVE = 2e-3


class Quantiles:
    """A series of non-negative values whose percentiles are asked once, at the end."""

    def __init__(self, cap: int = EXACT_CAP) -> None:
        self.cap = cap
        self.values: array[float] = array("d")
        self.buckets: Counter[int] | None = None
        self.zeros = 0
        self.count = 0

    @property
    def exact(self) -> bool:
        """Whether every value is still kept (percentiles as the in-memory path gives)."""
        return self.buckets is None

    def add(self, value: float) -> None:
        self.count += 1
        if self.buckets is None:
            self.values.append(value)
            if len(self.values) >= self.cap:
                self.buckets = Counter()
                for v in self.values:
                    self._bucket(v)
                self.values = array("d")
            return
        self._bucket(value)

    def _bucket(self, value: float) -> None:
        assert self.buckets is not None
        if value <= 1e-12:
            self.zeros += 1
        else:
            self.buckets[math.floor(math.log(value) / math.log1p(HIST_RELATIVE))] += 1

    def percentile(self, q: float) -> float | None:
        """The ``q``-th percentile (numpy's linear method when exact; else the middle of the
        bucket that holds the rank)."""
        if self.buckets is None:
            import numpy as np

            return percentile(np.frombuffer(self.values, dtype=float), q)
        if not self.count:
            return None
        rank = q / 100 * (self.count - 1)
        seen = self.zeros
        if rank < seen:
            return 0.0
        base = math.log1p(HIST_RELATIVE)
        for b in sorted(self.buckets):
            seen += self.buckets[b]
            if rank < seen:
                return math.exp((b + 0.5) * base)
        return math.exp((max(self.buckets) + 0.5) * base)


class _Summary:
    """:func:`tierctl.sim.result.summarize_results`, one finished request at a time."""

    def __init__(self, cap: int = EXACT_CAP) -> None:
        self.ttft, self.tpot, self.queue = Quantiles(cap), Quantiles(cap), Quantiles(cap)
        self.requests = self.done = self.aborted = self.preemptions = self.gaps = 0
        self.prompt = self.cached = 0
        self.gap_total = 0.0
        self.stall_max: float | None = None
        self.burst_max: float | None = None
        self.reasons: Counter[str] = Counter()

    def add(self, r: RequestResult) -> None:
        self.requests += 1
        if r.status == "completed":
            self.done += 1
            if r.tpot_s is not None:
                self.tpot.add(r.tpot_s)
        else:
            self.reasons[r.reason] += 1
        self.aborted += r.status in ("aborted", "rejected")
        if r.ttft_s is not None:
            self.ttft.add(r.ttft_s)
        if r.queue_s is not None:
            self.queue.add(r.queue_s)
            self.prompt += r.input_tokens
            self.cached += r.cached_tokens
        if r.itl_max_s is not None:
            self.stall_max = max(self.stall_max or r.itl_max_s, r.itl_max_s)
        self.gaps += r.burst_gaps
        self.gap_total += (r.burst_itl_mean_s or 0.0) * r.burst_gaps
        if r.burst_itl_mean_s is not None:
            self.burst_max = max(self.burst_max or r.burst_itl_mean_s, r.burst_itl_mean_s)
        self.preemptions += r.preemptions

    def summary(self, kv_waits: int, itl: tuple[float, float]) -> SimSummary:
        return SimSummary(
            completed=self.done,
            ttft_p50_s=self.ttft.percentile(50),
            ttft_p95_s=self.ttft.percentile(95),
            tpot_p50_s=self.tpot.percentile(50),
            tpot_p90_s=self.tpot.percentile(90),
            requests=self.requests,
            aborted=self.aborted,
            completion=self.done / self.requests if self.requests else 0.0,
            ttft_p99_s=self.ttft.percentile(99),
            tpot_p99_s=self.tpot.percentile(99),
            itl_p50_s=itl[0],
            itl_p99_s=itl[1],
            queue_p50_s=self.queue.percentile(50),
            queue_p95_s=self.queue.percentile(95),
            kv_waits=kv_waits,
            cached_fraction=self.cached / self.prompt if self.prompt else 0.0,
            stall_max_s=self.stall_max,
            burst_itl_mean_s=self.gap_total / self.gaps if self.gaps else None,
            burst_itl_max_mean_s=self.burst_max,
            preemptions=self.preemptions,
            **probe_figures([], 3.0),
        )

    @property
    def exact(self) -> bool:
        return self.ttft.exact and self.tpot.exact and self.queue.exact


class _Unsorted(Exception):
    """The trace is not sorted by arrival: the in-memory path (which sorts) must run."""


def trace_requests(path: str | Path, fmt: str) -> Iterator[SimRequest]:
    """The requests of a trace sorted by arrival, as :func:`tierctl.sim.workload_traces.
    read_workload` names and times them, one at a time; :class:`_Unsorted` at a row that
    arrives before the one above it."""
    stem = Path(path).stem
    t0 = None
    last = -math.inf
    for i, row in enumerate(iter_trace(path, fmt, share_hashes=False)):
        if row.arrival_s < last:
            raise _Unsorted
        last = row.arrival_s
        if t0 is None:
            t0 = row.arrival_s if wall_clock(fmt) else 0.0
        yield SimRequest(
            row.rid if row.rid is not None else f"{stem}-{i}",
            row.arrival_s - t0,
            row.input_tokens,
            row.output_tokens,
            row.hash_ids,
            row.block_tokens,
        )


def _metered(requests: Iterator[SimRequest], meter: budget.Meter) -> Iterator[SimRequest]:
    """``requests`` as they are read, each charged to the work bound.

    A row is the user's own input, so each brings an allowance of
    :data:`~tierctl.sim.budget.ROW_ALLOWANCE` units (a 400 MB trace replays whole); what rows
    amplify beyond it (one row of 2**31 prompt tokens is 131,072 chunk steps) is charged.

    Raises:
        InputError: the rows read so far amplify past the bound.
    """
    bound = budget.limit()
    tally = budget.WorkTally(meter)
    for r in requests:
        tally.add(r)
        allowed = bound + budget.ROW_ALLOWANCE * tally.requests
        total = tally.estimate(count_requests=False)
        if total.units > allowed:
            budget.check(total, allowed, what=f"replaying the trace (to row {tally.requests:,})")
        yield r


class _Lazy:
    """Requests as :func:`tierctl.sim.simulate._run` indexes them (``reqs[nxt]``, ``nxt <
    len(reqs)``, ``nxt`` only growing), pulled from a stream: a submitted request is dropped."""

    def __init__(self, stream: Iterator[SimRequest]) -> None:
        self.stream = stream
        self.buffer: deque[SimRequest] = deque()
        self.base = 0  # the index of buffer[0]
        self.ended = False
        self.last_arrival_s = 0.0
        self.seen = -1  # the highest index asked for

    def _fill(self, i: int) -> None:
        if self.base > i:
            raise IndexError(i)  # _run never goes back
        while i - self.base >= len(self.buffer) and not self.ended:
            try:
                req = next(self.stream)
            except StopIteration:
                self.ended = True
                break
            self.buffer.append(req)
            self.last_arrival_s = req.arrival_s

    def __getitem__(self, i: int) -> SimRequest:
        self.seen = max(self.seen, i)
        while self.base < i and self.buffer:
            self.buffer.popleft()
            self.base += 1
        self._fill(i)
        return self.buffer[i - self.base]

    def __len__(self) -> int:
        # `nxt < len(reqs)` asks "is there a request at nxt", and nxt is at most one past the
        # highest index asked for: pull up to there, no further (each call pulling one more
        # row held the whole trace in the buffer).
        self._fill(self.seen + 1)
        return self.base + len(self.buffer)


def simulate_trace_stream(
    config: EngineConfig,
    path: str | Path,
    fmt: str,
    cost: CostModel | str,
    *,
    seed: int = 0,
    progress: Callable[[float, float], None] | None = None,
    cap: int = EXACT_CAP,
) -> tuple[SimResult, dict[str, int], bool] | None:
    """Simulate the trace at ``path`` streamed (module docstring): the result (its
    ``requests`` empty), the not-completed counts by reason, and whether the percentiles are
    exact; ``None`` where this path does not apply (the caller runs the in-memory one)."""
    model = preset(cost) if isinstance(cost, str) else cost
    sched = make_scheduler(config, model, seed, ranks=True)
    if has_host_costs(model) or hasattr(sched, "ranks"):
        return None
    # A trace's own rows are the user's input (linear work); what a row amplifies (a prompt
    # of 2**31 tokens is 131,072 chunk steps) is charged against the bound as it is read.
    lazy = _Lazy(_metered(trace_requests(path, fmt), budget.Meter(config, model)))
    acc = _Summary(cap)

    def drain(lives: list[Live]) -> None:
        for live in lives:
            acc.add(RequestResult.of(live))

    def tick(now: float) -> None:
        drain(sched.done)
        sched.done.clear()
        if progress is not None:
            progress(now, lazy.last_arrival_s)

    try:
        bound = budget.runtime_bound()
        now, stopped = _run(sched, lazy, model, math.inf, True, None, tick, bound)  # type: ignore[arg-type]
    except _Unsorted:
        return None
    if not lazy.base and not lazy.buffer:
        raise InputError(
            "the trace has no rows (no requests to replay)",
            location=Location(file=str(path)),
            fix="pass a non-empty trace",
        )
    drain([*sched.done, *sched.lives.values()])
    hist = sched.stats.itl_hist
    summary = acc.summary(sched.stats.kv_waits, (itl_quantile(hist, 0.5), itl_quantile(hist, 0.99)))
    result = SimResult(
        workload=Path(path).stem,
        preset=model.name,
        argv=config.argv,
        requests=(),
        summary=summary,
        rounds=sched.stats.rounds,
        prefill_rounds=sched.stats.prefill_rounds,
        deferred_rounds=sched.stats.deferred_rounds,
        sim_end_s=now,
        stopped=stopped,
        domain=sched.stats.domain().to_json(),
    )
    return result, dict(acc.reasons.most_common()), acc.exact


__all__ = ["EXACT_CAP", "HIST_RELATIVE", "Quantiles", "simulate_trace_stream", "trace_requests"]
