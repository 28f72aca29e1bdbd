"""The bounds every tierctl HTTP server holds its clients to: one mechanism, three servers.

``tierctl agent serve``, ``tierctl judge serve`` and ``tierctl sim serve`` are aiohttp
applications served through :func:`serve_guarded` (the agent and the judge) or a
:class:`GuardedSite` on a runner of their own (the simulator, which drains before it stops).
Each connection gets a :class:`HeaderGuard`, which aiohttp does not have:

- a **header deadline**: a connection whose request line and headers are not complete within
  ``header_timeout_s`` after its first byte (or after it opened) is answered 408 and closed,
  so a slowloris cannot hold connections one header byte at a time;
- a **header size** bound: ``max_header_bytes`` before the blank line that ends them is 431
  and closed (aiohttp's own bound is 128 fields of 8 KiB each, 1 MiB);
- a **connection** bound: past ``max_connections`` open at once, a new connection is answered
  503 and closed at once (a flood of idle sockets holds no more file descriptors);
- an idle keep-alive connection is closed after ``keepalive_timeout_s`` (aiohttp's runner
  default is an hour), and the rest of a refused body is read for ``lingering_s`` at most.

:func:`read_body` is the body deadline and size bound: a body is read chunk by chunk, refused
(:class:`BodyTooLarge`) as soon as it passes its limit, and must arrive within its deadline
(``TimeoutError``).

Both deadlines count only time the event loop was free to read (:class:`BusyClock`): the
simulated engine tokenizes on its loop (as SGLang does without the dynamic batch tokenizer),
so one big prompt can block it for seconds, and a deadline counted in wall time would then
expire for every well-behaved client that was sending meanwhile and blame it with a 408.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

__all__ = [
    "BodyTooLarge",
    "BusyClock",
    "ClientBounds",
    "GuardedSite",
    "HeaderGuard",
    "guard_of",
    "next_request_headers",
    "read_body",
    "serve_guarded",
]

#: How often the heartbeat runs; a later wake-up than this (plus the slack) is loop time spent
#: elsewhere (a prompt tokenized on the loop, a big JSON body parsed).
_TICK_S = 0.05
_SLACK_S = 0.05
_END_OF_HEADERS = b"\r\n\r\n"
#: How much of a body is read from the socket at a time (what may be held past the limit).
BODY_CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ClientBounds:
    """What one client may hold of a server (see the module docstring).

    Attributes:
        header_timeout_s: Free loop time from a request's first byte to the end of its
            headers (408 past it).
        max_header_bytes: Bytes of a request line and headers (431 past them).
        max_connections: Connections open at once (503 for one more).
        keepalive_timeout_s: How long an idle keep-alive connection is kept.
        lingering_s: How long the rest of a refused body is read (and dropped) before the
            connection closes: closing at once with bytes unread sends a reset that can
            destroy the answer before the client reads it (aiohttp's default is 10 s).
    """

    header_timeout_s: float = 10.0
    max_header_bytes: int = 64 * 1024
    max_connections: int = 256
    keepalive_timeout_s: float = 15.0
    lingering_s: float = 2.0

    def runner_options(self) -> dict[str, Any]:
        """What an aiohttp ``AppRunner`` is given of these bounds (and the logger that keeps
        a malformed request's traceback out of the server's output)."""
        return {
            "keepalive_timeout": self.keepalive_timeout_s,
            "lingering_time": self.lingering_s,
            "logger": SERVER_LOG,
        }


class _MalformedRequests(logging.Filter):
    """Drops aiohttp's "Error handling request" record of a request it could not parse (a
    4xx it has answered: a duplicated Host, a bad Content-Length, an 8 KiB line), which it
    logs with a traceback; an error in a handler (a 500: a defect) is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, HttpProcessingError) and 400 <= (exc.code or 0) < 500)


#: The servers' log: aiohttp's, less the tracebacks of requests it refused as malformed.
SERVER_LOG = logging.getLogger("tierctl.http")
SERVER_LOG.addFilter(_MalformedRequests())


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


def _answer(status: str, text: str) -> bytes:
    """A whole HTTP/1.1 response that closes the connection (written past aiohttp)."""
    body = text.encode() + b"\n"
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


_TIMEOUT_RESPONSE = _answer(
    "408 Request Timeout",
    "the request headers did not arrive in time (rule: a request's headers arrive within "
    "the server's header deadline)",
)


def _malformed_text(exc: BaseException | None) -> str:
    """What a request aiohttp could not parse is told: the kind of fault, never the bytes.
    aiohttp's own text quotes the offending line (``Got more than 8190 bytes when reading:
    b'Basic c2VjcmV0...'``), and that line may be the client's credential."""
    if isinstance(exc, LineTooLong):
        return (
            "a request line or header field is longer than 8190 bytes (rule: each line of a "
            "request's head is at most 8190 bytes)"
        )
    name = type(exc).__name__ if exc is not None else "BadHttpMessage"
    return f"the request is not well-formed HTTP/1.1 ({name}; rule: RFC 9112 message syntax)"


class _QuietHandler(RequestHandler):
    """aiohttp's protocol, answering a malformed request without quoting it."""

    __slots__ = ()

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """aiohttp's answer, with :func:`_malformed_text` for a request it could not parse."""
        if isinstance(exc, HttpProcessingError) and 400 <= status < 500:
            message = _malformed_text(exc)
        return super().handle_error(request, status, exc, message)


def _handler_of(server: web.Server) -> RequestHandler:
    """The protocol of one connection, as ``server()`` makes it (its own class aside)."""
    return _QuietHandler(server, loop=asyncio.get_running_loop(), **server._kwargs)


class HeaderGuard(asyncio.Protocol):
    """Wraps aiohttp's protocol for one connection: a header-read deadline and size bound on
    each request.

    The deadline runs from the connection's start, then from the first byte of each later
    request, until the blank line that ends the headers; it counts free loop time only
    (:class:`BusyClock`). :meth:`next_request` (called when a response is done) starts
    watching for the next request's headers, unless aiohttp has already read them (a
    pipelined request).
    """

    def __init__(
        self,
        inner: Any,
        clock: BusyClock,
        bounds: ClientBounds,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        """Guard ``inner`` (an aiohttp request handler) with ``bounds``."""
        self.inner = inner
        self._clock = clock
        self._bounds = bounds
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self._waiting = True  # for a request's headers
        self._tail = b""
        self._seen_bytes = 0
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
        """Watch for the end of the headers and their size, then hand the bytes on."""
        if self._waiting:
            if self._mark is None:
                self._arm()
            seen = self._tail + data
            end = seen.find(_END_OF_HEADERS)
            counted = len(data) if end < 0 else end + len(_END_OF_HEADERS) - len(self._tail)
            self._seen_bytes += max(0, counted)
            if self._seen_bytes > self._bounds.max_header_bytes:
                self._refuse(
                    "431 Request Header Fields Too Large",
                    f"the request line and headers are larger than "
                    f"{self._bounds.max_header_bytes} bytes (rule: a request's headers are "
                    "at most the server's header bound)",
                )
                return
            if end >= 0:
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
        """Forwarded; the deadline is dropped and the connection no longer counted."""
        self._disarm()
        if self._on_close is not None:
            self._on_close()
            self._on_close = None
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        """Forwarded."""
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        """Forwarded."""
        self.inner.resume_writing()

    def next_request(self) -> None:
        """A response is done: the next request's headers are watched from its first byte
        (an idle keep-alive connection is the keep-alive timeout's business). When aiohttp
        already holds the next request whole (pipelined), there is nothing to watch."""
        self._disarm()
        self._tail = b""
        self._seen_bytes = 0
        self._waiting = not getattr(self.inner, "_messages", None)

    def _arm(self) -> None:
        self._mark = self._clock.mark()
        self._schedule(self._bounds.header_timeout_s)

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
        left = self._bounds.header_timeout_s - self._clock.free_since(self._mark)
        if left > 0:
            # The loop was busy: the client is not to blame for that time.
            self._schedule(left)
            return
        self.timed_out = True
        self._transport.write(_TIMEOUT_RESPONSE)
        self._transport.close()

    def _refuse(self, status: str, text: str) -> None:
        self._disarm()
        self._waiting = False
        if self._transport is not None:
            self._transport.write(_answer(status, text))
            self._transport.close()


class _Refused(asyncio.Protocol):
    """A connection past the connection bound: 503 and closed, nothing read."""

    def __init__(self, limit: int) -> None:
        self._limit = limit

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(
            _answer(
                "503 Service Unavailable",
                f"the server holds {self._limit} connections already (rule: at most the "
                "server's connection bound at once); retry later",
            )
        )
        transport.close()


def guard_of(request: web.BaseRequest) -> HeaderGuard | None:
    """The guard of the connection ``request`` came on, if it has one."""
    transport = request.transport
    protocol = transport.get_protocol() if transport is not None else None
    return protocol if isinstance(protocol, HeaderGuard) else None


@web.middleware
async def next_request_headers(request: web.Request, handler: Any) -> web.StreamResponse:
    """After each response, the connection's header deadline watches the next request (every
    guarded application has this middleware)."""
    try:
        response: web.StreamResponse = await handler(request)
        return response
    finally:
        guard = guard_of(request)
        if guard is not None:
            guard.next_request()


class GuardedSite(web.BaseSite):
    """A TCP site (a host and port, or a bound socket) whose connections each have a
    :class:`HeaderGuard`, at most ``bounds.max_connections`` of them at once."""

    __slots__ = ("_bounds", "_clock", "_host", "_open", "_port", "_sock")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        clock: BusyClock,
        bounds: ClientBounds,
        sock: socket.socket | None = None,
        ssl_context: ssl.SSLContext | None = None,
        backlog: int = 1024,
    ) -> None:
        """Listen on ``sock`` if given, else on ``host``:``port`` (0 picks a free port)."""
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._host = host
        self._port = port
        self._sock = sock
        self._clock = clock
        self._bounds = bounds
        self._open = 0

    @property
    def name(self) -> str:
        """The site's URL."""
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    async def start(self) -> None:
        """Start listening."""
        await super().start()
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None

        def closed() -> None:
            self._open -= 1

        def guarded() -> asyncio.Protocol:
            if self._open >= self._bounds.max_connections:
                return _Refused(self._bounds.max_connections)
            self._open += 1
            return HeaderGuard(_handler_of(server), self._clock, self._bounds, closed)

        # A TLS handshake is held to the header deadline too (asyncio's default is 60 s).
        handshake_s = self._bounds.header_timeout_s if self._ssl_context else None
        if self._sock is not None:
            self._server = await loop.create_server(
                guarded,
                sock=self._sock,
                ssl=self._ssl_context,
                backlog=self._backlog,
                ssl_handshake_timeout=handshake_s,
            )
        else:
            self._server = await loop.create_server(
                guarded,
                self._host,
                self._port,
                ssl=self._ssl_context,
                backlog=self._backlog,
                reuse_address=True,
                ssl_handshake_timeout=handshake_s,
            )


class BodyTooLarge(Exception):
    """A request body over the limit: ``seen`` bytes announced or read when it was refused."""

    def __init__(self, limit: int, seen: int) -> None:
        """Refused at ``seen`` bytes against ``limit``."""
        super().__init__(limit, seen)
        self.limit = limit
        self.seen = seen


async def read_body(
    request: web.BaseRequest, limit: int, clock: BusyClock | None, timeout_s: float
) -> bytearray:
    """The request body, read chunk by chunk and refused as soon as it passes ``limit``.

    A ``Content-Length`` over the limit is refused before a byte is read; a chunked (or
    lying) upload is refused at the first chunk that would take it past the limit, so at most
    ``limit`` plus one chunk is ever held. ``clock`` None counts wall time.

    Raises:
        BodyTooLarge: the body is, or says it is, longer than ``limit`` bytes.
        TimeoutError: it took longer than ``timeout_s`` of time the loop was free to read.
    """
    announced = request.content_length
    if announced is not None and announced > limit:
        raise BodyTooLarge(limit, announced)
    clock = clock or _WALL
    body = bytearray()
    mark = clock.mark()
    while True:
        left = timeout_s - clock.free_since(mark)
        if left <= 0:
            raise TimeoutError
        try:
            chunk = await asyncio.wait_for(request.content.read(BODY_CHUNK_BYTES), timeout=left)
        except TimeoutError:
            # Wall time ran out; whether the client is to blame is decided above, on the
            # free time (after a blocked loop the bytes are waiting in the buffer).
            continue
        if not chunk:
            return body  # json.loads reads a bytearray: no second copy of a big body
        if len(body) + len(chunk) > limit:
            raise BodyTooLarge(limit, len(body) + len(chunk))
        body += chunk


#: A clock that is never busy: :func:`read_body` without one counts wall time.
_WALL = BusyClock()


async def serve_guarded(
    app: web.Application,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    sock: socket.socket | None = None,
    ssl_context: ssl.SSLContext | None = None,
    bounds: ClientBounds | None = None,
    clock: BusyClock | None = None,
    shutdown_timeout_s: float = 60.0,
    ready: Callable[[int], Awaitable[None] | None] | None = None,
) -> None:
    """Serve ``app`` on a :class:`GuardedSite` until SIGINT or SIGTERM, then stop (requests
    in flight get ``shutdown_timeout_s``). ``ready`` receives the bound port once listening.

    Raises:
        OSError: the address cannot be bound.
    """
    if next_request_headers not in app.middlewares:
        app.middlewares.append(next_request_headers)
    await _serve(app, host, port, sock, ssl_context, bounds or ClientBounds(), clock,
                 shutdown_timeout_s, ready)  # fmt: skip


async def _serve(
    app: web.Application,
    host: str,
    port: int,
    sock: socket.socket | None,
    ssl_context: ssl.SSLContext | None,
    bounds: ClientBounds,
    clock: BusyClock | None,
    shutdown_timeout_s: float,
    ready: Callable[[int], Awaitable[None] | None] | None,
) -> None:
    clock = clock or BusyClock()
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=shutdown_timeout_s,
        **bounds.runner_options(),
    )
    await runner.setup()
    site = GuardedSite(
        runner, host, port, clock=clock, bounds=bounds, sock=sock, ssl_context=ssl_context
    )
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    clock.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        if ready is not None:
            addresses = runner.addresses
            answer = ready(int(addresses[0][1]) if addresses else port)
            if answer is not None:
                await answer
        await stop.wait()
    finally:
        await clock.stop()
        await runner.cleanup()
