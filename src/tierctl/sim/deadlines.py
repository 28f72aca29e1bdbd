"""Deadlines that blame a client only for the client's own slowness.

The simulated engine tokenizes on its event loop (as SGLang does without the dynamic batch
tokenizer), so the loop can be blocked for a long time by one big prompt. A deadline counted
in wall time would then expire for every well-behaved upload that arrived meanwhile, and the
server would answer 408 blaming the client. :class:`BusyClock` measures how long the loop was
blocked (a heartbeat that notices its own lateness), and a deadline counts only the time the
loop was free to read: :meth:`BusyClock.free_since`.

:class:`HeaderGuard` is the header-read deadline aiohttp does not have: a connection whose
request line and headers are not complete within ``timeout_s`` of free loop time after its
first byte (or after it opened) is answered 408 and closed, so a slowloris cannot hold
connections open one header byte at a time. :class:`GuardedSite` is a TCP site whose
connections are guarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from aiohttp import web

#: How often the heartbeat runs; a later wake-up than this (plus the slack) is loop time spent
#: elsewhere (a prompt tokenized on the loop, a big JSON body parsed).
_TICK_S = 0.05
_SLACK_S = 0.05
_END_OF_HEADERS = b"\r\n\r\n"


class BusyClock:
    """How long the event loop has been busy (blocked), to discount from client deadlines."""

    def __init__(self) -> None:
        """A clock that counts nothing until :meth:`start`."""
        self._busy_s = 0.0
        self._last = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the heartbeat on the running loop."""
        self._last = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._beat())

    async def stop(self) -> None:
        """Stop the heartbeat."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(_TICK_S)
            now = time.monotonic()
            late = now - self._last - _TICK_S
            if late > _SLACK_S:
                self._busy_s += late
            self._last = now

    def busy_s(self) -> float:
        """Seconds the loop has been busy so far, including a block still in progress (the
        heartbeat has not run for longer than it should)."""
        pending = time.monotonic() - self._last - _TICK_S - _SLACK_S
        running = self._task is not None and not self._task.done()
        return self._busy_s + (max(0.0, pending) if running else 0.0)

    def mark(self) -> tuple[float, float]:
        """A start mark for :meth:`free_since`."""
        return time.monotonic(), self.busy_s()

    def free_since(self, mark: tuple[float, float]) -> float:
        """Seconds since ``mark`` during which the loop was free (wall time less busy time)."""
        t0, busy0 = mark
        return max(0.0, (time.monotonic() - t0) - (self.busy_s() - busy0))


_TIMEOUT_BODY = b"the request headers did not arrive in time\n"
_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    b"Content-Length: " + str(len(_TIMEOUT_BODY)).encode() + b"\r\n\r\n" + _TIMEOUT_BODY
)


class HeaderGuard(asyncio.Protocol):
    """Wraps aiohttp's protocol for one connection: a header-read deadline on each request.

    The deadline runs from the connection's start, then from the first byte of each later
    request, until the blank line that ends the headers; it counts free loop time only
    (:class:`BusyClock`). :meth:`next_request` (called when a response is done) starts
    watching for the next request's headers.
    """

    def __init__(self, inner: Any, clock: BusyClock, timeout_s: float) -> None:
        """Guard ``inner`` (an aiohttp request handler) with a ``timeout_s`` header deadline."""
        self.inner = inner
        self._clock = clock
        self._timeout_s = timeout_s
        self._transport: asyncio.Transport | None = None
        self._waiting = True  # for a request's headers
        self._tail = b""
        self._mark: tuple[float, float] | None = None
        self._timer: asyncio.TimerHandle | None = None
        #: Connections closed for slow headers (tests and logs read it).
        self.timed_out = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Arm the deadline (a connection that sends nothing is a slowloris too)."""
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._arm()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        """Watch for the end of the headers, then hand the bytes on."""
        if self._waiting:
            if self._mark is None:
                self._arm()
            seen = self._tail + data
            if _END_OF_HEADERS in seen:
                self._waiting = False
                self._disarm()
            else:
                self._tail = seen[-(len(_END_OF_HEADERS) - 1) :]
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        """Forwarded."""
        result: bool | None = self.inner.eof_received()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        """Forwarded; the deadline is dropped."""
        self._disarm()
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        """Forwarded."""
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        """Forwarded."""
        self.inner.resume_writing()

    def next_request(self) -> None:
        """A response is done: the next request's headers are watched from its first byte
        (an idle keep-alive connection is aiohttp's keep-alive timeout's business)."""
        self._waiting = True
        self._tail = b""
        self._disarm()

    def _arm(self) -> None:
        self._mark = self._clock.mark()
        self._schedule(self._timeout_s)

    def _schedule(self, after_s: float) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(after_s, self._expire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._mark = None

    def _expire(self) -> None:
        self._timer = None
        if not self._waiting or self._mark is None or self._transport is None:
            return
        left = self._timeout_s - self._clock.free_since(self._mark)
        if left > 0:
            # The loop was busy: the client is not to blame for that time.
            self._schedule(left)
            return
        self.timed_out = True
        self._transport.write(_TIMEOUT_RESPONSE)
        self._transport.close()


def guard_of(request: web.BaseRequest) -> HeaderGuard | None:
    """The guard of the connection ``request`` came on, if it has one."""
    transport = request.transport
    protocol = transport.get_protocol() if transport is not None else None
    return protocol if isinstance(protocol, HeaderGuard) else None


class GuardedSite(web.BaseSite):
    """A TCP site whose connections each have a :class:`HeaderGuard`."""

    __slots__ = ("_clock", "_host", "_port", "_timeout_s")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        clock: BusyClock,
        header_timeout_s: float,
        backlog: int = 1024,
    ) -> None:
        """Listen on ``host``:``port`` (0 picks a free port)."""
        super().__init__(runner, backlog=backlog)
        self._host = host
        self._port = port
        self._clock = clock
        self._timeout_s = header_timeout_s

    @property
    def name(self) -> str:
        """The site's URL."""
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        """Start listening."""
        await super().start()
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None

        def guarded() -> HeaderGuard:
            return HeaderGuard(server(), self._clock, self._timeout_s)

        self._server = await loop.create_server(
            guarded, self._host, self._port, backlog=self._backlog, reuse_address=True
        )
