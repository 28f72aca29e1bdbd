"""Slow clients against every tierctl HTTP server (issue #38, #42): ``agent serve``,
``judge serve`` and ``sim serve``, each started as an operator starts it (its own process,
``--header-timeout-s 1 --body-timeout-s 2``), spoken to over raw sockets.

- connections that never finish their headers, or send nothing, are answered 408 and closed;
- a request trickled one header byte at a time is cut off;
- a body that stops, or trickles, is answered 408 with the rule;
- meanwhile each server keeps answering others.

The guard is one mechanism (``tierctl.runtime.http_guard``) in all three; these tests go
through each server's real start-up, so a server that stops using it fails here.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator

import pytest

from tests.integration.servers import AGENT_TOKEN, KINDS, Served, serve
from tierctl.runtime.polling import wait_until

pytestmark = pytest.mark.integration

#: Every wait below is bounded by this (a loaded machine), not a timing claim.
PATIENCE_S = 60.0
#: A route of each server that reads a body, and what its request needs besides.
BODY_ROUTE = {
    "agent": (b"/compose/ps", b"Authorization: Bearer " + AGENT_TOKEN.encode() + b"\r\n"),
    "judge": (b"/argo", b""),
    "sim": (b"/v1/completions", b""),
}
HEALTH = {"agent": b"/health", "judge": b"/healthz", "sim": b"/health"}


@pytest.fixture(scope="module", params=KINDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with serve(request.param, tmp_path_factory.mktemp(request.param)) as served:
        yield served


def _connect(served: Served) -> socket.socket:
    return socket.create_connection(served.addr, timeout=PATIENCE_S)


def _answered_and_closed(sock: socket.socket, within_s: float = PATIENCE_S) -> bytes | None:
    """What the server sent before it closed ``sock``; None if it kept it open."""
    data = bytearray()

    def closed() -> bool:
        while select.select([sock], [], [], 0)[0]:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return True
            if not chunk:
                return True
            data.extend(chunk)
        return False

    return bytes(data) if wait_until(closed, within_s, poll_s=0.05) else None


def _health(served: Served) -> int:
    with _connect(served) as s:
        path = HEALTH[served.kind]
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = _answered_and_closed(s)
    assert answer, "no answer to the health check"
    return int(answer.split(b" ", 2)[1])


def test_unfinished_and_silent_connections_are_408_and_closed(server: Served) -> None:
    socks = [_connect(server) for _ in range(20)]
    try:
        for i, s in enumerate(socks):
            if i % 2 == 0:  # half never finish their headers, half send nothing at all
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        answers = [_answered_and_closed(s) for s in socks]
        assert all(a is not None and a.startswith(b"HTTP/1.1 408") for a in answers), answers
        assert b"rule: " in answers[0]  # type: ignore[operator]
        assert _health(server) == 200
    finally:
        for s in socks:
            s.close()


def test_a_trickled_request_is_cut_off_and_others_are_served(server: Served) -> None:
    with _connect(server) as t:
        t.sendall(b"G")
        cut = False
        for byte in b"ET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 1_000:
            try:
                t.sendall(bytes([byte]))
            except OSError:
                cut = True
                break
            if select.select([t], [], [], 0.1)[0]:
                cut = True
                break
        assert cut, "a trickled request was never cut off"
        assert _health(server) == 200


@pytest.mark.parametrize("trickle", [False, True], ids=["stalled body", "trickled body"])
def test_a_slow_body_is_408_with_the_rule(server: Served, trickle: bool) -> None:
    route, extra = BODY_ROUTE[server.kind]
    head = (
        b"POST " + route + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + extra + b"Content-Length: 1000\r\n\r\n{"
    )  # fmt: skip
    with _connect(server) as s:
        s.sendall(head)
        if trickle:
            for _ in range(200):  # a byte every 0.1 s: 20 s, far past the 2 s deadline
                if select.select([s], [], [], 0.1)[0]:
                    break
                try:
                    s.sendall(b" ")
                except OSError:
                    break
        answer = _answered_and_closed(s)
    assert answer is not None, "the slow body's connection was kept open"
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    assert b"within 2 s" in answer, answer[:600]
    assert _health(server) == 200


def test_the_header_bound_is_431_and_closed(server: Served) -> None:
    fields = b"".join(b"X-F%d: %s\r\n" % (i, b"v" * 8_000) for i in range(10))
    with _connect(server) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n")
        answer = _answered_and_closed(s)
    assert answer is not None
    assert answer.startswith(b"HTTP/1.1 431"), answer
    assert b"rule: " in answer
    assert _health(server) == 200


def test_the_guard_leaves_a_keep_alive_client_alone(server: Served) -> None:
    """Three requests on one connection, each answered (the guard re-arms per request)."""
    path = HEALTH[server.kind]
    with _connect(server) as s:
        for _ in range(3):
            s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(4096)
                assert chunk, "closed a keep-alive connection"
                data += chunk
            assert data.startswith(b"HTTP/1.1 200"), data
            head, rest = data.split(b"\r\n\r\n", 1)
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            while len(rest) < length:
                rest += s.recv(4096)


def test_no_server_printed_a_traceback(server: Served) -> None:
    """Everything above left no traceback (nor an aiohttp "Error handling request") in the
    server's output."""
    assert server.proc.poll() is None, "the server died"
    out = server.output()
    assert "Traceback" not in out, out[-3000:]
    assert "Error handling" not in out, out[-3000:]
