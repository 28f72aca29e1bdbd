"""``tierctl real-engine serve``: one real engine on loopback in the foreground.

Starts the engine kind's server (:data:`~tierctl.realengine.registry.REAL_ENGINES`) on the tiny
model, waits for ``/health``, prints
one line saying where it serves, then waits until it is interrupted (Ctrl-C, SIGTERM) or the
engine exits, and stops the engine's whole process group either way.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from tierctl.errors import ExitCode, RuntimeFailure
from tierctl.realengine.registry import real_engine
from tierctl.runtime.process import free_port, http_ready, log_tail


class _Stop(Exception):
    """Raised in the waiting loop by the SIGTERM handler."""


def _on_term(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def serve(
    engine: str,
    *,
    port: int = 0,
    log: Path | None = None,
    flags: Sequence[str] = (),
    start_timeout_s: float = 600.0,
    poll_s: float = 1.0,
    announce: Callable[[str], None] = print,
    say: Callable[[str], None] = lambda line: None,
) -> ExitCode:
    """Serve until interrupted (Ctrl-C or SIGTERM: :attr:`ExitCode.OK`).

    Args:
        engine: a kind of :data:`~tierctl.realengine.registry.REAL_ENGINES`.
        port: Loopback port; 0 picks a free one.
        log: The engine's log (default ``ENGINE-PORT.log`` here).
        flags: Engine flags after its base flags.
        start_timeout_s: How long it has to answer ``/health``.
        poll_s: How often the waiting loop checks the engine is still running.
        announce: Gets the one ``serving ENGINE at URL (pid ..., log ..., ready in ...)`` line.
        say: Gets progress lines (starting, stopping).

    Raises:
        RuntimeFailure: the engine did not become healthy, or exited by itself.
    """
    port = port or free_port()
    log = log or Path(f"{engine}-{port}.log")
    server = real_engine(engine).server(log, flags, port)
    process, url = server.process, server.url
    previous = signal.signal(signal.SIGTERM, _on_term)
    try:
        process.start()
        say(f"starting {engine} (pid {process.pid}, log {log})")
        took = process.wait_ready(http_ready(f"{url}/health"), start_timeout_s)
        announce(f"serving {engine} at {url} (pid {process.pid}, log {log}, ready in {took:.1f} s)")
        while process.running():
            time.sleep(poll_s)
        raise RuntimeFailure(
            f"{engine} exited by itself: {log_tail(log)}",
            rule="a served engine runs until it is interrupted",
            fix=f"read {log}",
        )
    except (KeyboardInterrupt, _Stop):
        say(f"stopping {engine} (pid {process.pid})")
        return ExitCode.OK
    finally:
        process.stop()
        signal.signal(signal.SIGTERM, previous)
