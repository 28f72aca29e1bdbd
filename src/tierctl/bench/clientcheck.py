"""Is the load client the bottleneck? Four signals, one verdict per run.

A load generator that cannot keep up makes the server look slow: sends leave late, streamed
tokens wait in the client's buffers and arrive in the samples as long gaps followed by
near-zero ones. None of the peer clients (``vllm bench serve``, ``sglang.bench_serving``,
guidellm, AIPerf) says when its own limits shaped the numbers. tierctl measures, during every
run:

* **pacing lag** -- actual minus planned send time of paced (open-loop, non-burst) requests;
* **event-loop lag** -- how late a 10 ms heartbeat on the client's event loop wakes up: every
  stream's chunks are timestamped on that loop, so its lag is added to TTFT and ITL;
* **client CPU** -- process CPU time over wall time: the loop runs on one core, so near 100%
  every callback waits for the others;
* **receive-buffer backlog** -- bytes that had piled up (aiohttp's buffer plus the kernel's
  socket buffer) when a stream was read: a client that keeps up reads each SSE event as it
  lands, a few hundred bytes at a time.

A run is *client-bound* when any of them passes its limit; the reasons name the signal and
its value, and every report (terminal, Markdown, JSON, A/B blocks) carries the mark.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket
import struct
import termios
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierctl.latency import percentile

#: Paced sends later than this at p99 mean the client did not hold the planned arrivals.
PACING_LAG_LIMIT_S = 0.001
#: Event-loop heartbeat lateness at p99 above this is added to every TTFT/ITL sample.
LOOP_LAG_LIMIT_S = 0.005
#: Client CPU share of one core above which callbacks queue behind each other.
CPU_SHARE_LIMIT = 0.8
#: A client-bound run whose client used less than this share of a core was starved by the
#: host's scheduler rather than busy: its lag is other processes' CPU time.
STARVED_CPU_SHARE = 0.5
#: What to do about it (Linux autogroup scheduling, /proc/sys/kernel/sched_autogroup_enabled:
#: CPU is shared per session first, so a client in a session with busy jobs, or beside an
#: engine API server in a session of its own, gets a small slice).
STARVED_ADVICE = (
    "starved, not busy: the client used {share:.0%} of a core while it lagged, so the host "
    "gave its CPU to others; with autogroup scheduling (/proc/sys/kernel/"
    "sched_autogroup_enabled = 1) run the client in a session of its own (setsid) away from "
    "busy jobs, or raise its group's priority (echo -5 > /proc/<pid>/autogroup); where that "
    "is not enough (an engine's busy-polling processes beside the client), run the client "
    "real-time (--realtime: SCHED_FIFO, root or CAP_SYS_NICE), or measure on a quieter host"
)
#: The real-time priority of a client run with ``--realtime`` (SCHED_FIFO, 1-99): above every
#: ordinary process, below the kernel's own real-time threads (50 and up).
REALTIME_PRIORITY = 10
#: One read returning this much means the stream had queued up in buffers.
BACKLOG_LIMIT_BYTES = 256 * 1024
#: Heartbeat period of the event-loop monitor.
HEARTBEAT_S = 0.010


@dataclass
class ReadBacklog:
    """The largest backlog seen when a response stream was read (shared by a run's requests).

    Updated from the client's read loop: ``observe`` costs one ``ioctl(FIONREAD)`` when the
    chunk just read was already large (the kernel's queue only matters once user space lags).
    """

    max_read_bytes: int = 0
    max_kernel_bytes: int = 0
    reads: int = 0

    def observe(self, chunk_bytes: int, sock: socket.socket | None) -> None:
        """Record one read of ``chunk_bytes`` from a stream on ``sock``."""
        self.reads += 1
        if chunk_bytes > self.max_read_bytes:
            self.max_read_bytes = chunk_bytes
        if sock is not None and chunk_bytes >= 16 * 1024:
            with contextlib.suppress(OSError, ValueError):
                raw = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
                pending = int(struct.unpack("i", raw)[0])
                self.max_kernel_bytes = max(self.max_kernel_bytes, pending)

    @property
    def max_bytes(self) -> int:
        """The largest backlog: one read's worth plus what was still queued in the kernel."""
        return self.max_read_bytes + self.max_kernel_bytes


class LoopMonitor:
    """A heartbeat on the running event loop; records how late each beat wakes."""

    def __init__(self, period_s: float = HEARTBEAT_S) -> None:
        self.period_s = period_s
        self.lags_s: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start beating on the running loop."""
        self._task = asyncio.create_task(self._beat())

    async def _beat(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(self.period_s)
            self.lags_s.append(max(0.0, time.monotonic() - before - self.period_s))

    async def stop(self) -> None:
        """Stop the heartbeat."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


@contextlib.contextmanager
def realtime(priority: int = REALTIME_PRIORITY) -> Iterator[str | None]:
    """Run the calling thread (the client's event loop, and threads it starts) under
    ``SCHED_FIFO`` at ``priority`` for the block; yields ``None`` when that took effect, or
    why not (no permission, not Linux), and the client then runs as it was.

    Why: on a 2-core host running vLLM CPU (its worker pinned to one core, its engine core and
    API server busy on the other), a client at nice -15 in its own autogroup still saw
    200-390 ms event-loop stalls, and an idle loop pinned beside the worker one of 28 s; under
    SCHED_FIFO the same loop saw none over 40 ms on either core. The client uses a few percent
    of a core, so waking it first costs the engine nothing it would notice.
    ``SCHED_RESET_ON_FORK``: processes the block starts (an engine) run as ordinary ones.
    """
    setter = getattr(os, "sched_setscheduler", None)
    if setter is None:
        yield "real-time scheduling is Linux's (os.sched_setscheduler is missing here)"
        return
    before = os.sched_getscheduler(0)
    before_param = os.sched_getparam(0)
    try:
        setter(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(priority))
    except OSError as exc:
        yield f"SCHED_FIFO not allowed ({exc.strerror}): run as root or with CAP_SYS_NICE"
        return
    try:
        yield None
    finally:
        with contextlib.suppress(OSError):
            setter(0, before, before_param)


@dataclass(frozen=True)
class ClientCheck:
    """The four signals of one run and the verdict.

    Attributes:
        pacing_lag_p99_s: p99 of send lag over paced sends (``None``: no paced lane).
        pacing_lag_max_s: the largest send lag over paced sends.
        paced_sends: how many sends the pacing figures are over.
        loop_lag_p99_s: p99 of the event-loop heartbeat's lateness.
        loop_lag_max_s: the heartbeat's worst lateness.
        cpu_share: client process CPU time / wall time (1.0 = one core busy).
        backlog_max_bytes: the largest receive backlog seen at one read.
        reasons: one line per signal past its limit; empty when the client kept up.
        event_loop: the loop implementation the run was driven by (``uvloop`` or
            ``asyncio``; ``None``: not recorded).
        realtime: whether the client ran real-time (``SCHED_FIFO``, ``--realtime``) when
            the run was judged (``None``: not known on this platform).
    """

    pacing_lag_p99_s: float | None
    pacing_lag_max_s: float | None
    paced_sends: int
    loop_lag_p99_s: float | None
    loop_lag_max_s: float | None
    cpu_share: float
    backlog_max_bytes: int
    reasons: tuple[str, ...] = field(default_factory=tuple)
    event_loop: str | None = None
    realtime: bool | None = None

    @property
    def client_bound(self) -> bool:
        """Whether the client's own limits may have shaped the numbers."""
        return bool(self.reasons)

    @property
    def starved(self) -> bool:
        """Client-bound while the client itself was mostly idle: it lagged because the host
        gave its CPU to others (on a busy host with autogroup scheduling, the client's session
        shares the CPU as one group with everything else in it), not because it was busy."""
        return self.client_bound and self.cpu_share < STARVED_CPU_SHARE

    def trusted(self, send_limit_s: float = 0.05, lag_limit_s: float = 0.1) -> bool:
        """A stricter bar on the worst cases, for measuring an engine's own latencies (the
        simulator's fidelity): no send over ``send_limit_s`` late and no loop stall over
        ``lag_limit_s``. (Four busy processes on two cores keep a loop from its timer for
        tens of milliseconds now and then; a stalled machine, for seconds.)"""
        return (self.pacing_lag_max_s or 0.0) < send_limit_s and (
            self.loop_lag_max_s or 0.0
        ) < lag_limit_s

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the JSON report."""
        return {
            "client_bound": self.client_bound,
            "pacing_lag_p99_s": self.pacing_lag_p99_s,
            "pacing_lag_max_s": self.pacing_lag_max_s,
            "paced_sends": self.paced_sends,
            "loop_lag_p99_s": self.loop_lag_p99_s,
            "loop_lag_max_s": self.loop_lag_max_s,
            "cpu_share": self.cpu_share,
            "backlog_max_bytes": self.backlog_max_bytes,
            "reasons": list(self.reasons),
            "starved": self.starved,
            "event_loop": self.event_loop,
            "realtime": self.realtime,
        }


def judge_client(
    paced_lags_s: Sequence[float],
    loop_lags_s: Sequence[float],
    cpu_s: float,
    duration_s: float,
    backlog_bytes: int,
    event_loop: str | None = None,
) -> ClientCheck:
    """The verdict from the raw signals (limits: the module constants)."""
    lag_p99 = percentile(paced_lags_s, 99)
    lag_max = max(paced_lags_s) if paced_lags_s else None
    loop_p99 = percentile(loop_lags_s, 99)
    loop_max = max(loop_lags_s) if loop_lags_s else None
    share = cpu_s / duration_s if duration_s > 0 else 0.0
    reasons: list[str] = []
    if lag_p99 is not None and lag_max is not None and lag_p99 > PACING_LAG_LIMIT_S:
        reasons.append(
            f"pacing lag p99 {lag_p99 * 1e3:.2f} ms (max {lag_max * 1e3:.1f} ms over "
            f"{len(paced_lags_s)} paced sends) > {PACING_LAG_LIMIT_S * 1e3:g} ms: arrivals "
            "left later than planned"
        )
    if loop_p99 is not None and loop_p99 > LOOP_LAG_LIMIT_S:
        reasons.append(
            f"event-loop lag p99 {loop_p99 * 1e3:.1f} ms > {LOOP_LAG_LIMIT_S * 1e3:g} ms: "
            "chunk timestamps (TTFT, ITL) carry the client's own delay"
        )
    if share > CPU_SHARE_LIMIT:
        reasons.append(
            f"client CPU {100 * share:.0f}% of a core > {100 * CPU_SHARE_LIMIT:.0f}%: "
            "lower the rate or give the client a core of its own"
        )
    if backlog_bytes >= BACKLOG_LIMIT_BYTES:
        reasons.append(
            f"receive backlog {backlog_bytes / 1024:.0f} KiB at one read >= "
            f"{BACKLOG_LIMIT_BYTES // 1024} KiB: tokens queued in the client before being "
            "timestamped"
        )
    return ClientCheck(
        pacing_lag_p99_s=lag_p99,
        pacing_lag_max_s=lag_max,
        paced_sends=len(paced_lags_s),
        loop_lag_p99_s=loop_p99,
        loop_lag_max_s=loop_max,
        cpu_share=share,
        backlog_max_bytes=backlog_bytes,
        reasons=tuple(reasons),
        event_loop=event_loop,
        realtime=_is_realtime(),
    )


def _is_realtime() -> bool | None:
    """Whether the calling thread runs under SCHED_FIFO or SCHED_RR now."""
    get = getattr(os, "sched_getscheduler", None)
    if get is None:
        return None
    policy = get(0) & ~getattr(os, "SCHED_RESET_ON_FORK", 0)
    return policy in (os.SCHED_FIFO, os.SCHED_RR)


def verdict_line(check: ClientCheck | None) -> str:
    """One line for any report: ``client-bound: ...`` or ``client kept up: ...``."""
    if check is None:
        return "client check: not measured"
    if check.client_bound:
        line = "CLIENT-BOUND (these numbers may be the client's, not the server's): " + "; ".join(
            check.reasons
        )
        if check.starved:
            line += "; " + STARVED_ADVICE.format(share=check.cpu_share)
        return line
    parts = [f"CPU {100 * check.cpu_share:.0f}%"]
    if check.pacing_lag_p99_s is not None:
        parts.insert(0, f"pacing lag p99 {check.pacing_lag_p99_s * 1e3:.2f} ms")
    if check.loop_lag_p99_s is not None:
        parts.append(f"loop lag p99 {check.loop_lag_p99_s * 1e3:.1f} ms")
    parts.append(f"max backlog {check.backlog_max_bytes / 1024:.0f} KiB")
    if check.event_loop is not None:
        parts.append(f"{check.event_loop} event loop")
    if check.realtime:
        parts.append("real-time (SCHED_FIFO)")
    return "client kept up: " + ", ".join(parts)
