"""A rollout reports its waits with elapsed time, and the terminal shows them.

The health gate polls a real loopback HTTP server that answers 503 while the "engine" is
starting, then 200; the clock is the test's own (each sleep advances it), so the elapsed times
are exact and no test waits on wall time.
"""

from __future__ import annotations

import http.server
import io
import threading
from collections.abc import Iterator

import httpx
import pytest
from rich.console import Console

from tierctl.errors import GateFailed
from tierctl.progress import RolloutWaits
from tierctl.rollout.gates import GateContext, GateSettings, gate_health
from tierctl.rollout.plan_schema import Step


class _Starting(http.server.BaseHTTPRequestHandler):
    """503 for the first ``starting`` requests (the engine loading its model), then 200."""

    starting = 0
    seen = 0

    def do_GET(self) -> None:
        cls = type(self)
        cls.seen += 1
        status = 503 if cls.seen <= cls.starting else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def engine() -> Iterator[type[_Starting]]:
    handler = type("Handler", (_Starting,), {"starting": 4, "seen": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, ...]] = []

    def waiting(self, service: str, what: str, elapsed_s: float, budget_s: float) -> None:
        self.events.append(("waiting", service, what, f"{elapsed_s:g}", f"{budget_s:g}"))

    def waited(self, service: str, what: str, elapsed_s: float, ok: bool) -> None:
        self.events.append(("waited", service, what, f"{elapsed_s:g}", str(ok)))


def _ctx(url: str, progress: object, timeout_s: float = 120.0) -> GateContext:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    step = Step(
        id="01", action="recreate", service="r2", role="engine", side="new", why="", rollback=""
    )
    return GateContext(
        step=step,
        base_url=url,
        new=None,  # type: ignore[arg-type]
        settings=GateSettings(health_timeout_s=timeout_s, poll_interval_s=5.0),
        client=httpx.Client(),
        sleep=sleep,
        clock=lambda: now[0],
        progress=progress,  # type: ignore[arg-type]
    )


def test_the_health_gate_reports_each_poll_with_its_elapsed_time(engine) -> None:
    recorder = _Recorder()
    gate_health(_ctx(engine.url, recorder))
    assert recorder.events == [
        ("waiting", "r2", "/health: HTTP 503", "0", "120"),
        ("waiting", "r2", "/health: HTTP 503", "5", "120"),
        ("waiting", "r2", "/health: HTTP 503", "10", "120"),
        ("waiting", "r2", "/health: HTTP 503", "15", "120"),
        ("waited", "r2", "/health: HTTP 200", "20", "True"),
    ]


def test_a_health_gate_that_gives_up_says_so(engine) -> None:
    recorder = _Recorder()
    with pytest.raises(GateFailed):
        gate_health(_ctx(engine.url, recorder, timeout_s=10.0))
    assert recorder.events[-1] == ("waited", "r2", "/health: HTTP 503", "10", "False")


def test_the_terminal_shows_the_wait_with_elapsed_time(engine) -> None:
    out = io.StringIO()
    # Not a terminal (a log, CI): a plain line every 10 s of the wait, then the outcome.
    with RolloutWaits(Console(file=out, width=120), every_s=10.0) as waits:
        gate_health(_ctx(engine.url, waits))
    assert out.getvalue().splitlines() == [
        "r2: waiting for /health: HTTP 503: 0 s of 2 min 00 s",
        "r2: waiting for /health: HTTP 503: 10 s of 2 min 00 s",
        "r2: /health: HTTP 200 after 20 s",
    ]


def test_on_a_terminal_the_wait_is_one_live_line(engine) -> None:
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True)
    with RolloutWaits(console) as waits:
        gate_health(_ctx(engine.url, waits))
    text = out.getvalue()
    assert "waiting for /health: HTTP 503" in text
    assert "r2: /health: HTTP 200 after 20 s" in text
