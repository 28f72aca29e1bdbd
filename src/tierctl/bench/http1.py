"""A lean HTTP/1.1 client for the one exchange a load run repeats: POST a JSON body, stream back.

aiohttp builds and tears down a request object, a response object, a payload, header multidicts
and a stream reader per request; in an open-loop run that is most of the ~0.35 ms of client CPU
one streamed request costs (``benchmarks/client_overhead.py``), and at 2,000 req/s more than
half a core, so due sends wait behind it. This client does only what the load path needs, on
asyncio's (or uvloop's) transports:

* one request line and header block, built once per run, and the body bytes, in one write on a
  pooled keep-alive connection (plain ``http://``; anything else goes through aiohttp);
* the response head parsed once; the body de-framed (``Content-Length``, ``chunked``, or up to
  the close) and each socket read handed to the caller's sink *from the protocol callback*,
  timestamped there: no stream reader, no task wake-up per read;
* a connection goes back to the pool only after a complete response that allows keep-alive;
  anything else (an error, a cancelled or timed-out request, a malformed response) closes it.

A response that breaks HTTP/1.1 framing raises :class:`ProtocolError` (an ``OSError``, so the
load client records a ``connection`` failure, as it does for aiohttp's errors).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

#: The longest response head (status line and headers) accepted.
MAX_HEAD_BYTES = 64 * 1024
#: The longest chunk-size line accepted (size, extensions).
MAX_CHUNK_LINE_BYTES = 4096
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")
_NO_BODY = frozenset({204, 304})


class ProtocolError(ConnectionError):
    """The server's bytes are not a valid HTTP/1.1 response."""


class Sink(Protocol):
    """Where one exchange's response goes, as it arrives (called from the protocol)."""

    def on_head(self, status: int, sock: Any) -> None:
        """The status line and headers arrived (``sock``: the connection's socket)."""

    def on_data(self, data: bytes) -> bool:
        """One read's worth of body bytes; return ``False`` to stop reading (closes the
        connection). May raise: the exchange then ends with that exception."""


def supports(url: str) -> bool:
    """Whether ``url`` is one this client can serve (plain http with a host)."""
    parts = urlsplit(url)
    return parts.scheme == "http" and bool(parts.hostname)


class Http1Pool:
    """Keep-alive HTTP/1.1 connections to the origin of one URL, and the request head for it."""

    def __init__(self, url: str, *, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"not a plain http URL: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = parts.netloc.rsplit("@", 1)[-1]
        lines = [f"POST {target} HTTP/1.1", f"Host: {host}", "User-Agent: tierctl"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self._head = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")
        self._idle: list[_Connection] = []
        self._closed = False

    def request(self, body: bytes) -> bytes:
        """The whole request (head and body) for ``body``."""
        return b"%b%d\r\n\r\n%b" % (self._head, len(body), body)

    async def exchange(self, body: bytes, sink: Sink) -> None:
        """POST ``body`` and feed the response to ``sink``; return when it has ended.

        Raises what connecting raises (``OSError``), what ended the response (a
        :class:`ProtocolError`, a reset, or the sink's own exception), and ``CancelledError``;
        on any of them the connection is closed, never reused.
        """
        loop = asyncio.get_running_loop()
        conn = self._take()
        if conn is None:
            _, conn = await loop.create_connection(lambda: _Connection(self), self.host, self.port)
        done: asyncio.Future[None] = loop.create_future()
        conn.start(self.request(body), sink, done)
        try:
            await done
        except BaseException:
            conn.abandon(done)
            raise

    def _take(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable():
                return conn
        return None

    def _give_back(self, conn: _Connection) -> None:
        if self._closed:
            conn.abort()
        else:
            self._idle.append(conn)

    def _forget(self, conn: _Connection) -> None:
        if conn in self._idle:
            self._idle.remove(conn)

    def close(self) -> None:
        """Close every idle connection; connections in use close when their exchange ends."""
        self._closed = True
        while self._idle:
            self._idle.pop().abort()

    @property
    def idle_connections(self) -> int:
        """How many keep-alive connections wait in the pool."""
        return len(self._idle)


# Body framing of the response being read.
_HEAD, _LENGTH, _CHUNKED, _UNTIL_CLOSE, _IDLE = range(5)
# States of the chunked decoder.
_SIZE, _DATA, _DATA_END, _TRAILER = range(4)


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one exchange at a time."""

    def __init__(self, pool: Http1Pool) -> None:
        self._pool = pool
        self._transport: asyncio.Transport | None = None
        self._sock: Any = None
        self._sink: Sink | None = None
        self._done: asyncio.Future[None] | None = None
        self._state = _IDLE
        self._buf = bytearray()
        self._left = 0  # body bytes still due (Content-Length) or of the current chunk
        self._chunk_state = _SIZE
        self._keep_alive = False
        self._lost = False

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._sock = transport.get_extra_info("socket")

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._pool._forget(self)
        if self._sink is None:
            return
        if self._state == _UNTIL_CLOSE:
            self._end(None, reuse=False)
        else:
            self._end(
                exc or ProtocolError("the server closed the connection before the response ended"),
                reuse=False,
            )

    def data_received(self, data: bytes) -> None:
        sink = self._sink
        if sink is None:
            self.abort()  # bytes nobody asked for: the connection's framing is lost
            return
        try:
            if self._state == _HEAD:
                self._buf += data
                end = self._buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self._buf) > MAX_HEAD_BYTES:
                        raise ProtocolError(f"response head over {MAX_HEAD_BYTES} bytes")
                    return
                status = self._parse_head(bytes(self._buf[:end]))
                data = bytes(self._buf[end + 4 :])
                self._buf.clear()
                sink.on_head(status, self._sock)
                if self._sink is None:
                    return
                if self._state == _LENGTH and self._left == 0:
                    self._end(None, reuse=self._keep_alive and not data)
                    return
                if not data:
                    return
            if self._state == _LENGTH:
                self._length_body(sink, data)
            elif self._state == _CHUNKED:
                self._chunked_body(sink, data)
            elif self._state == _UNTIL_CLOSE and not sink.on_data(data):
                self._end(None, reuse=False)
        except BaseException as exc:
            self._end(exc, reuse=False)
            if not isinstance(exc, Exception):
                raise

    # -- the exchange

    def start(self, request: bytes, sink: Sink, done: asyncio.Future[None]) -> None:
        """Write ``request``; the response goes to ``sink``, its end resolves ``done``."""
        assert self._transport is not None
        self._sink, self._done = sink, done
        self._state = _HEAD
        self._buf.clear()
        self._transport.write(request)

    def reusable(self) -> bool:
        """Whether this idle connection can carry another exchange."""
        return not self._lost and self._transport is not None and not self._transport.is_closing()

    def abandon(self, done: asyncio.Future[None]) -> None:
        """Drop the connection if it still carries the exchange ``done`` belongs to."""
        if self._done is done:
            self.abort()

    def abort(self) -> None:
        """Drop the connection now (an exchange cut short cannot leave it reusable)."""
        self._sink, self._done = None, None
        self._state = _IDLE
        if self._transport is not None and not self._transport.is_closing():
            self._transport.abort()

    def _end(self, error: BaseException | None, *, reuse: bool) -> None:
        done = self._done
        self._sink, self._done = None, None
        self._state = _IDLE
        self._buf.clear()
        if reuse and not self._lost:
            self._pool._give_back(self)
        elif self._transport is not None and not self._transport.is_closing():
            self._transport.abort()
        if done is not None and not done.done():
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

    # -- parsing

    def _parse_head(self, head: bytes) -> int:
        lines = head.split(b"\r\n")
        status_line = lines[0].split(b" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
            raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        try:
            status = int(status_line[1])
        except ValueError:
            raise ProtocolError(f"bad status code: {lines[0][:80]!r}") from None
        if status < 200:
            # 100 Continue and friends are never asked for; a server that sends one anyway is
            # not one this lean client serves.
            raise ProtocolError(f"unexpected informational response {status}")
        length: int | None = None
        chunked = False
        connection = b""
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise ProtocolError(f"bad header line: {line[:80]!r}")
            key = name.strip().lower()
            if key == b"content-length":
                text = value.strip()
                if not text.isdigit() or (length is not None and int(text) != length):
                    raise ProtocolError(f"bad Content-Length: {text[:40]!r}")
                length = int(text)
            elif key == b"transfer-encoding":
                codings = [c.strip() for c in value.lower().split(b",")]
                chunked = codings[-1] == b"chunked"
                if not chunked:
                    raise ProtocolError(f"unsupported Transfer-Encoding: {value.strip()[:40]!r}")
            elif key == b"connection":
                connection = value.strip().lower()
        http10 = status_line[0] == b"HTTP/1.0"
        self._keep_alive = (b"keep-alive" in connection) if http10 else b"close" not in connection
        if status in _NO_BODY:
            self._state, self._left = _LENGTH, 0
        elif chunked:
            self._state, self._chunk_state = _CHUNKED, _SIZE
        elif length is not None:
            self._state, self._left = _LENGTH, length
        else:
            self._state = _UNTIL_CLOSE
            self._keep_alive = False
        return status

    def _length_body(self, sink: Sink, data: bytes) -> None:
        if len(data) > self._left:
            raise ProtocolError("more body bytes than Content-Length announced")
        self._left -= len(data)
        if not sink.on_data(data):
            self._end(None, reuse=False)
        elif self._left == 0:
            self._end(None, reuse=self._keep_alive)

    def _chunked_body(self, sink: Sink, data: bytes) -> None:
        if self._buf:
            self._buf += data
            buf: bytes | bytearray = self._buf
        else:
            buf = data
        pieces: list[bytes] = []
        pos, size = 0, len(buf)
        state, left = self._chunk_state, self._left
        complete = False
        while pos < size:
            if state == _DATA:
                take = min(left, size - pos)
                pieces.append(bytes(buf[pos : pos + take]))
                pos += take
                left -= take
                if left == 0:
                    state = _DATA_END
                continue
            nl = buf.find(b"\r\n", pos)
            if nl < 0:
                if size - pos > MAX_CHUNK_LINE_BYTES:
                    raise ProtocolError("a chunk-size line over 4096 bytes")
                break
            line = bytes(buf[pos:nl])
            pos = nl + 2
            if state == _DATA_END:
                if line:
                    raise ProtocolError("chunk data longer than its size")
                state = _SIZE
            elif state == _SIZE:
                text = line.split(b";", 1)[0].strip()
                if not _HEX.fullmatch(text):
                    raise ProtocolError(f"bad chunk size: {line[:40]!r}")
                left = int(text, 16)
                state = _DATA if left else _TRAILER
            elif not line:  # _TRAILER: an empty line ends the message
                complete = True
                break
        rest = bytes(buf[pos:])
        self._buf.clear()
        self._chunk_state, self._left = state, left
        body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        if body and not sink.on_data(body):
            self._end(None, reuse=False)
            return
        if complete:
            # Bytes after the message: the server pipelines or lies; either way not reusable.
            self._end(None, reuse=self._keep_alive and not rest)
        elif rest:
            self._buf += rest
