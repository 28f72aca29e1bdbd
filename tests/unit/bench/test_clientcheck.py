"""The client-bottleneck check: each signal alone marks a run client-bound, with its value."""

from __future__ import annotations

import asyncio
import socket
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierctl.bench.clientcheck import (
    BACKLOG_LIMIT_BYTES,
    LoopMonitor,
    ReadBacklog,
    judge_client,
    verdict_line,
)
from tierctl.latency import percentile

QUIET = {"paced_lags_s": [0.0001] * 200, "loop_lags_s": [0.0005] * 100, "cpu_s": 1.0}


def _judge(**kw: object):
    args = {**QUIET, "duration_s": 10.0, "backlog_bytes": 400, **kw}
    return judge_client(**args)  # type: ignore[arg-type]


def test_a_quiet_client_kept_up() -> None:
    check = _judge()
    assert not check.client_bound
    assert verdict_line(check).startswith("client kept up: pacing lag p99 0.10 ms, CPU 10%")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"paced_lags_s": [0.0001] * 190 + [0.004] * 10}, "pacing lag p99"),
        ({"loop_lags_s": [0.0005] * 90 + [0.02] * 10}, "event-loop lag p99"),
        ({"cpu_s": 9.0}, "client CPU 90% of a core"),
        ({"backlog_bytes": BACKLOG_LIMIT_BYTES}, "receive backlog 256 KiB"),
    ],
)
def test_each_signal_alone_marks_the_run(change: dict[str, object], reason: str) -> None:
    check = _judge(**change)
    assert check.client_bound
    assert len(check.reasons) == 1
    assert reason in check.reasons[0]
    assert verdict_line(check).startswith("CLIENT-BOUND")
    assert check.to_dict()["client_bound"] is True


def test_the_pacing_reason_quotes_p99_and_max_separately() -> None:
    # 5 ms late at p99 and one 50 ms outlier: p99 is not the max (the old warning's mistake).
    lags = [0.0001] * 988 + [0.005] * 11 + [0.05]
    check = _judge(paced_lags_s=lags)
    assert check.pacing_lag_max_s == pytest.approx(0.05)
    assert check.pacing_lag_p99_s == pytest.approx(float(np.percentile(lags, 99)))
    assert check.pacing_lag_p99_s == pytest.approx(0.005)
    assert "pacing lag p99 5.00 ms (max 50.0 ms over 1000 paced sends)" in check.reasons[0]


@given(st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=50), st.floats(0, 1))
def test_quantile_is_numpys_linear_percentile(values: list[float], q: float) -> None:
    # the client check takes its p99s with the shared definition (tierctl.latency.percentile)
    assert percentile(values, 100 * q) == pytest.approx(
        float(np.percentile(values, 100 * q)), abs=1e-9
    )


def test_quantile_of_nothing_is_none() -> None:
    assert percentile([], 99) is None


def test_read_backlog_sees_the_kernel_queue() -> None:
    a, b = socket.socketpair()
    try:
        a.sendall(b"x" * 100_000)
        time.sleep(0.05)
        chunk = b.recv(20_000)
        backlog = ReadBacklog()
        backlog.observe(len(chunk), b)
        assert backlog.max_read_bytes == len(chunk)
        assert backlog.max_kernel_bytes > 0
        assert backlog.max_bytes == len(chunk) + backlog.max_kernel_bytes
        backlog.observe(300, b)  # a small read does not ask the kernel again
        assert backlog.reads == 2
    finally:
        a.close()
        b.close()


async def test_the_loop_monitor_sees_a_blocked_loop() -> None:
    monitor = LoopMonitor(period_s=0.005)
    monitor.start()
    await asyncio.sleep(0.02)
    time.sleep(0.1)  # noqa: ASYNC251 -- the point: the loop does CPU work, serves nothing
    await asyncio.sleep(0.02)
    await monitor.stop()
    assert monitor.lags_s
    assert max(monitor.lags_s) >= 0.05


def test_a_lagging_client_that_was_mostly_idle_is_called_starved_with_advice() -> None:
    # The busy 2-core host: streams read in one piece, TTFT 3x, the client at 10 % of
    # a core (it was not busy: the kernel's autogroup scheduler gave its CPU to others).
    starved = _judge(loop_lags_s=[0.0005] * 90 + [0.05] * 10)
    assert starved.starved
    line = verdict_line(starved)
    assert "starved, not busy: the client used 10% of a core" in line
    assert "setsid" in line
    assert starved.to_dict()["starved"] is True
    busy = _judge(loop_lags_s=[0.0005] * 90 + [0.05] * 10, cpu_s=9.0)
    assert busy.client_bound
    assert not busy.starved  # busy itself: lower the rate, not the host's scheduling
    assert "starved" not in verdict_line(busy)
    assert not _judge().starved


def test_realtime_runs_the_block_fifo_and_its_children_ordinary() -> None:
    """--realtime: SCHED_FIFO for the client's block, restored after; a process started in
    the block (an engine) is reset to the ordinary class. Without the permission the block
    still runs, told why."""
    import os
    import subprocess
    import sys

    from tierctl.bench.clientcheck import REALTIME_PRIORITY, realtime

    before = os.sched_getscheduler(0)
    with realtime() as why:
        if why is not None:
            assert os.geteuid() != 0, why  # root may always set it
            assert "CAP_SYS_NICE" in why
            return
        assert os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK == os.SCHED_FIFO
        assert os.sched_getparam(0).sched_priority == REALTIME_PRIORITY
        child = subprocess.run(
            [sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert int(child.stdout) == os.SCHED_OTHER
    assert os.sched_getscheduler(0) == before


def test_the_starved_advice_names_the_realtime_option() -> None:
    from tierctl.bench.clientcheck import STARVED_ADVICE

    assert "--realtime" in STARVED_ADVICE
    assert "setsid" in STARVED_ADVICE
