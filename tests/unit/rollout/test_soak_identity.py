"""The soak gate fails a step whose replica restarted or logged a fatal line during the soak."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tierctl.errors import GateFailed
from tierctl.rollout.gates import GATES, GateContext, GateSettings
from tierctl.rollout.plan_schema import Step


def _ctx(start_times: list[float], logs: Callable[[], str | None] | None = None) -> GateContext:
    starts = iter(start_times)
    now = [0.0]
    last = [start_times[0]]

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200)
        last[0] = next(starts, last[0])
        return httpx.Response(
            200,
            text=f"process_start_time_seconds {last[0]}\n"
            'sglang:e2e_request_latency_seconds_count{m="x"} 10\n'
            'sglang:num_aborted_requests_total{m="x"} 0\n',
        )

    def sleep(s: float) -> None:
        now[0] += s

    step = Step(
        id="01", action="recreate", service="r2", role="engine", side="new", why="", rollback=""
    )
    ctx = GateContext(
        step=step,
        base_url="http://engine",
        new=None,  # type: ignore[arg-type]
        settings=GateSettings(soak_s=5, poll_interval_s=1),
        client=httpx.Client(transport=httpx.MockTransport(handler)),
        sleep=sleep,
        clock=lambda: now[0],
    )
    if logs is not None:
        ctx.logs = logs  # type: ignore[attr-defined]  # the local driver's log reader
    return ctx


def test_a_steady_replica_passes_the_soak() -> None:
    ctx = _ctx([1.7e9, 1.7e9, 1.7e9, 1.7e9])
    GATES["soak"](ctx)
    assert ctx.notes[-1] == "soak: no restart, no fatal log line"


def test_a_restart_during_the_soak_fails_the_step() -> None:
    ctx = _ctx([1.7e9, 1.7e9, 1.7e9, 1.7e9 + 42])
    with pytest.raises(GateFailed, match=r"r2 during the soak: restarted \(process start time"):
        GATES["soak"](ctx)


def test_a_fatal_line_during_the_soak_fails_the_step() -> None:
    log = ["INFO up\nTraceback (most recent call last):\n  old, before the soak\n"]
    reads = [0]

    def logs() -> str:
        reads[0] += 1
        if reads[0] > 1:  # written during the soak
            return log[0] + "torch.OutOfMemoryError: CUDA out of memory. Tried 2 GiB\n"
        return log[0]

    ctx = _ctx([1.7e9] * 4, logs)
    with pytest.raises(
        GateFailed, match=r"fatal log line \[cuda-oom\] torch.OutOfMemoryError"
    ) as exc:
        GATES["soak"](ctx)
    assert "Traceback" not in exc.value.message  # not fatal, and before the window anyway


def test_no_soak_window_checks_nothing() -> None:
    ctx = _ctx([1.0, 2.0])
    ctx.settings = GateSettings(soak_s=0)
    GATES["soak"](ctx)
    assert ctx.notes == []
