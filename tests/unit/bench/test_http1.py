"""The lean HTTP/1.1 client: response framing read by read, connection reuse, failures.

The protocol is driven directly with a recording transport, so every way the bytes of one
response can be cut into socket reads is tried (Hypothesis); a few exchanges go over real
loopback sockets to a scripted asyncio server.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.bench.http1 import Http1Pool, ProtocolError, _Connection, supports


class Transport(asyncio.Transport):
    """Records writes; ``aborted`` when the client dropped the connection."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.aborted = False

    def write(self, data: Any) -> None:
        self.written += data

    def abort(self) -> None:
        self.aborted = True

    def is_closing(self) -> bool:
        return self.aborted

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


class Sink:
    def __init__(self, stop_after: int | None = None) -> None:
        self.status: int | None = None
        self.body = bytearray()
        self.reads = 0
        self.stop_after = stop_after

    def on_head(self, status: int, sock: Any) -> None:
        self.status = status

    def on_data(self, data: bytes) -> bool:
        assert data, "an empty read was handed on"
        self.body += data
        self.reads += 1
        return self.stop_after is None or len(self.body) < self.stop_after


def cuts(data: bytes, points: list[int]) -> list[bytes]:
    marks = sorted({p % (len(data) + 1) for p in points} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(marks) if b > a]


async def drive(pieces: list[bytes], sink: Sink | None = None) -> tuple[Http1Pool, Any, Sink]:
    """One exchange on a fresh connection fed ``pieces``; (pool, outcome, sink)."""
    pool = Http1Pool("http://127.0.0.1:9/v1/completions")
    conn = _Connection(pool)
    transport = Transport()
    conn.connection_made(transport)
    sink = sink or Sink()
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    conn.start(pool.request(b"{}"), sink, done)
    for piece in pieces:
        if done.done():
            break
        conn.data_received(piece)
    outcome: Any = "pending"
    if done.done():
        outcome = done.exception() or "ok"
    return pool, (outcome, transport, conn), sink


def chunked(body: bytes, sizes: list[int], *, ext: bool, trailer: bool) -> bytes:
    out, pos, k = bytearray(), 0, 0
    while pos < len(body):
        n = max(1, sizes[k % len(sizes)]) if sizes else len(body)
        piece = body[pos : pos + n]
        out += b"%x%s\r\n%s\r\n" % (len(piece), b";x=1" if ext else b"", piece)
        pos, k = pos + n, k + 1
    out += b"0\r\n" + (b"X-Trailer: 1\r\n" if trailer else b"") + b"\r\n"
    return bytes(out)


HEAD_CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)

bodies = st.binary(min_size=0, max_size=300)
points = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


@settings(max_examples=150, deadline=None)
@given(body=bodies, split=points)
async def test_content_length_body_arrives_whole_and_the_connection_is_kept(body, split):
    wire = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    pool, (outcome, transport, _), sink = await drive(cuts(wire, split))
    assert outcome == "ok"
    assert sink.status == 200
    assert bytes(sink.body) == body
    assert not transport.aborted
    assert pool.idle_connections == 1


@settings(max_examples=150, deadline=None)
@given(
    body=bodies,
    sizes=st.lists(st.integers(1, 64), max_size=6),
    split=points,
    ext=st.booleans(),
    trailer=st.booleans(),
)
async def test_chunked_body_is_dechunked_whatever_the_reads(body, sizes, split, ext, trailer):
    wire = HEAD_CHUNKED + chunked(body, sizes, ext=ext, trailer=trailer)
    pool, (outcome, transport, _), sink = await drive(cuts(wire, split))
    assert outcome == "ok"
    assert bytes(sink.body) == body
    assert pool.idle_connections == 1
    assert not transport.aborted


async def test_a_body_up_to_the_close_ends_with_the_connection() -> None:
    pool, (outcome, _transport, conn), sink = await drive(
        [b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\ndata: 1\n\n", b"data: 2\n\n"]
    )
    assert outcome == "pending"
    conn.connection_lost(None)
    assert bytes(sink.body) == b"data: 1\n\ndata: 2\n\n"
    assert pool.idle_connections == 0


async def test_connection_close_is_never_reused() -> None:
    wire = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
    pool, (outcome, transport, _), _sink = await drive([wire])
    assert outcome == "ok"
    assert pool.idle_connections == 0
    assert transport.aborted


async def test_http10_without_keep_alive_is_not_reused() -> None:
    pool, (outcome, _t, _c), _s = await drive([b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"])
    assert outcome == "ok"
    assert pool.idle_connections == 0


@pytest.mark.parametrize(
    ("wire", "match"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "status line"),
        (b"HTTP/1.1 abc OK\r\n\r\n", "status code"),
        (b"HTTP/1.1 100 Continue\r\n\r\n", "informational"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabc", "more body bytes"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "Transfer-Encoding"),
        (HEAD_CHUNKED + b"zz\r\n", "chunk size"),
        (HEAD_CHUNKED + b"-1\r\n", "chunk size"),
        (HEAD_CHUNKED + b"2\r\nabc\r\n", "longer than its size"),
        (HEAD_CHUNKED + b"1" * 5000, "chunk-size line"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 20_000, "head over"),
    ],
)
async def test_broken_framing_is_a_protocol_error_and_drops_the_connection(wire, match) -> None:
    pool, (outcome, transport, _), _sink = await drive([wire])
    assert isinstance(outcome, ProtocolError)
    assert isinstance(outcome, OSError)  # recorded as a 'connection' failure
    assert match in str(outcome)
    assert transport.aborted
    assert pool.idle_connections == 0


async def test_a_close_before_the_end_fails_the_exchange() -> None:
    wire = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"
    pool, (outcome, _t, conn), sink = await drive([wire])
    assert outcome == "pending"
    conn.connection_lost(ConnectionResetError("reset by peer"))
    assert bytes(sink.body) == b"abc"
    assert pool.idle_connections == 0


async def test_a_sink_that_has_enough_stops_the_read_and_the_connection() -> None:
    wire = b"HTTP/1.1 503 Busy\r\nContent-Length: 2000\r\n\r\n" + b"x" * 600
    pool, (outcome, transport, _), sink = await drive([wire], Sink(stop_after=512))
    assert outcome == "ok"
    assert sink.status == 503
    assert transport.aborted
    assert pool.idle_connections == 0


async def test_no_body_statuses_end_at_the_head() -> None:
    pool, (outcome, _t, _c), sink = await drive([b"HTTP/1.1 204 No Content\r\n\r\n"])
    assert outcome == "ok"
    assert sink.body == b""
    assert pool.idle_connections == 1


def test_request_head_and_supported_urls() -> None:
    pool = Http1Pool("http://127.0.0.1:8000/v1/chat/completions?x=1", headers={"Accept": "a"})
    req = pool.request(b'{"a":1}')
    assert req.startswith(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n")
    assert b"\r\nAccept: a\r\n" in req
    assert req.endswith(b'\r\nContent-Length: 7\r\n\r\n{"a":1}')
    assert supports("http://localhost:1/x")
    assert not supports("https://localhost:1/x")
    with pytest.raises(ValueError, match="plain http"):
        Http1Pool("https://127.0.0.1/x")


# ---------------------------------------------------------------- over loopback sockets


async def scripted_server(replies: list[bytes]) -> tuple[asyncio.Server, list[int]]:
    """Answers each request head with the next reply; counts connections."""
    conns: list[int] = []
    script = iter(replies)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns.append(1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                writer.write(next(script))
                await writer.drain()
        except (asyncio.IncompleteReadError, StopIteration, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, conns


async def test_sequential_exchanges_reuse_one_connection() -> None:
    ok = HEAD_CHUNKED + chunked(b"data: [DONE]\n\n", [5], ext=False, trailer=False)
    server, conns = await scripted_server([ok, ok, ok])
    port = server.sockets[0].getsockname()[1]
    pool = Http1Pool(f"http://127.0.0.1:{port}/v1/completions")
    try:
        for _ in range(3):
            sink = Sink()
            await pool.exchange(b"{}", sink)
            assert bytes(sink.body) == b"data: [DONE]\n\n"
        assert len(conns) == 1
        assert pool.idle_connections == 1
    finally:
        pool.close()
        server.close()
        await server.wait_closed()


async def test_a_cancelled_exchange_drops_its_connection() -> None:
    server, _conns = await scripted_server([HEAD_CHUNKED + b"5\r\nhello\r\n"])  # never ends
    port = server.sockets[0].getsockname()[1]
    pool = Http1Pool(f"http://127.0.0.1:{port}/v1/completions")
    sink = Sink()
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.0):
                await pool.exchange(b"{}", sink)
        assert bytes(sink.body) == b"hello"
        assert pool.idle_connections == 0
    finally:
        pool.close()
        server.close()
        await server.wait_closed()


async def test_a_refused_connection_raises_oserror() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(ConnectionRefusedError):
        await Http1Pool(f"http://127.0.0.1:{port}/x").exchange(b"{}", Sink())
