"""``tierctl.runtime.http_guard`` on its own: a tiny aiohttp app on a :class:`GuardedSite`
(a real loopback socket), with small bounds so each is reached by a few bytes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from tierctl.runtime.http_guard import (
    BodyTooLarge,
    BusyClock,
    ClientBounds,
    GuardedSite,
    next_request_headers,
    read_body,
)

BOUNDS = ClientBounds(header_timeout_s=0.5, max_header_bytes=1_000, max_connections=3)
BODY_TIMEOUT_S = 3.0


@pytest.fixture
async def port() -> AsyncIterator[int]:
    async for p in _serve(BOUNDS):
        yield p


@pytest.fixture
async def wide_port() -> AsyncIterator[int]:
    """The default header bound (64 KiB): aiohttp's own 8190-byte line bound comes first."""
    async for p in _serve(ClientBounds(header_timeout_s=5.0)):
        yield p


async def _serve(bounds: ClientBounds) -> AsyncIterator[int]:
    async def echo(request: web.Request) -> web.Response:
        try:
            body = await read_body(request, 100, None, BODY_TIMEOUT_S)
        except BodyTooLarge as exc:
            resp = web.Response(status=413, text=f"{exc.limit} {exc.seen}")
            resp.force_close()  # as every server's 413: the rest is not read
            return resp
        except TimeoutError:
            return web.Response(status=408, text="late")
        return web.Response(text=f"{request.path} {len(body)}")

    app = web.Application(middlewares=[next_request_headers])
    app.router.add_route("*", "/{p:.*}", echo)
    runner = web.AppRunner(app, **bounds.runner_options())
    await runner.setup()
    clock = BusyClock()
    site = GuardedSite(runner, "127.0.0.1", 0, clock=clock, bounds=bounds)
    await site.start()
    clock.start()
    try:
        yield int(runner.addresses[0][1])
    finally:
        await clock.stop()
        await runner.cleanup()


async def _exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


async def test_headers_just_under_the_bound_are_served(port: int) -> None:
    head = b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    pad = b"X-P: " + b"p" * (BOUNDS.max_header_bytes - len(head) - 9) + b"\r\n\r\n"
    assert len(head + pad) == BOUNDS.max_header_bytes
    answer = await _exchange(port, head + pad)
    assert answer.startswith(b"HTTP/1.1 200"), answer


async def test_one_byte_over_the_header_bound_is_431(port: int) -> None:
    head = b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    pad = b"X-P: " + b"p" * (BOUNDS.max_header_bytes - len(head) - 8) + b"\r\n\r\n"
    answer = await _exchange(port, head + pad)
    assert answer.startswith(b"HTTP/1.1 431"), answer
    assert b"1000 bytes" in answer


async def test_a_connection_past_the_bound_is_503_and_the_others_stay(port: int) -> None:
    held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(BOUNDS.max_connections)]
    try:
        answer = await _exchange(port, b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 503"), answer
        assert b"3 connections" in answer
        _, writer = held[0]
        writer.write(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")  # a held one is still served
        assert (await asyncio.wait_for(held[0][0].readline(), 10)).startswith(b"HTTP/1.1 200")
    finally:
        for _, writer in held:
            writer.close()
    # Closed ones are no longer counted.
    await asyncio.sleep(0.2)
    answer = await _exchange(port, b"GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200"), answer


async def test_pipelined_requests_are_not_taken_for_slow_headers(port: int) -> None:
    """Three requests in one write: the later ones' headers were read with the first; the
    guard must not wait for (and time out on) headers aiohttp already holds."""
    one = b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
    last = b"GET /q HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    answer = await _exchange(port, one + one + last)
    assert answer.count(b"HTTP/1.1 200") == 3, answer
    assert b"408" not in answer


async def test_a_pipelined_body_arriving_later_is_not_taken_for_headers(port: int) -> None:
    """The second request's headers come with the first request; its body's rest comes
    over a second, past the header deadline: those bytes are a body (the body deadline's),
    not headers that never end."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        first = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
        second = b"POST /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 10\r\n\r\n"
        writer.write(first + second + b"01")
        await writer.drain()
        assert (await asyncio.wait_for(reader.readline(), 10)).startswith(b"HTTP/1.1 200")
        for piece in (b"23", b"45", b"67", b"89"):
            await asyncio.sleep(0.3)
            writer.write(piece)
            await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
        assert b"HTTP/1.1 200" in answer, answer
        assert answer.endswith(b"/b 10")
    finally:
        writer.close()


async def test_the_body_bound_is_413_from_the_announced_length(port: int) -> None:
    answer = await _exchange(port, b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 413"), answer
    assert answer.endswith(b"100 101")  # refused before a byte of it was read


async def test_a_chunked_body_past_the_bound_is_413_as_it_comes(port: int) -> None:
    chunks = b"".join(b"32\r\n" + b"x" * 50 + b"\r\n" for _ in range(5)) + b"0\r\n\r\n"
    answer = await _exchange(
        port, b"POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
    )
    assert answer.startswith(b"HTTP/1.1 413"), answer


async def test_a_stalled_body_is_late(port: int) -> None:
    answer = await _exchange(port, b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\nab")
    assert answer.startswith(b"HTTP/1.1 408"), answer


async def test_the_busy_clock_discounts_a_blocked_loop() -> None:
    import time

    clock = BusyClock()
    clock.start()
    try:
        await asyncio.sleep(0.1)
        mark = clock.mark()
        time.sleep(0.5)  # noqa: ASYNC251 - the loop blocked on purpose: not the client's time
        await asyncio.sleep(0.1)
        assert clock.free_since(mark) < 0.4
    finally:
        await clock.stop()


@pytest.mark.parametrize(
    "head",
    [
        b"Authorization: Basic " + b"c2VjcmV0LXRva2VuLTQ0" * 500,  # past aiohttp's 8190
        b"Content-Length: c2VjcmV0LXRva2VuLTQ0",  # not a number
        b"Authorization: Bearer c2VjcmV0LXRva2VuLTQ0\x01",  # a control character
    ],
    ids=["a line too long", "a bad length", "a control character"],
)
async def test_a_malformed_request_is_400_without_its_bytes_or_a_traceback(
    wide_port: int, head: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """The HTTP fuzzer's first findings: aiohttp answered `Got more than 8190 bytes when
    reading: b'Basic c2Vj...'` (the client's credential, quoted back) and logged each
    malformed request with a traceback."""
    answer = await _exchange(wide_port, b"GET /a HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1."), answer
    assert b" 400 " in answer[:20], answer
    assert b"c2VjcmV0" not in answer, answer
    assert b"rule: " in answer
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
