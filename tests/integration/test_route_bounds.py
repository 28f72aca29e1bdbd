"""Every HTTP route of every tierctl server against its worst request (issue #42: "every
HTTP route of every server has a resource bound with a test that sends the worst request").

The routes are read from the applications (``tests.integration.routes.routes``); each has its
worst request in ``routes.WORST`` and the answer its bound gives: a 4xx naming the rule, or,
for a route whose answer is of a fixed size, its 200. Each server runs as an operator runs it
(its own process); the server's peak RSS (``VmHWM``) is read before and after: the worst
request is sent twice, and the second (imports and first-use caches already paid) may raise
the peak by at most ``SECOND_GROWTH_KIB``.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest

from tests.integration.routes import WORST, request_bytes, routes
from tests.integration.servers import ALL_KINDS, Served, hwm_kib, serve

pytestmark = pytest.mark.integration

#: The most one more worst request may raise a server's peak RSS: the largest body any
#: server here accepts is 4 MiB, so a bound that holds leaves the peak nearly where it was;
#: the window of #42 took 4.4 GB.
SECOND_GROWTH_KIB = 48 * 1024
FIRST_GROWTH_KIB = 256 * 1024


def test_every_route_has_a_worst_request() -> None:
    served = set().union(*(routes(kind) for kind in ALL_KINDS))
    assert served - set(WORST) == set(), "routes without a worst request"
    assert set(WORST) - served == set(), "worst requests of routes that are gone"


@pytest.fixture(scope="module", params=ALL_KINDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with serve(request.param, tmp_path_factory.mktemp(request.param), body_timeout_s=30) as s:
        yield s


def _send(served: Served, data: bytes) -> tuple[int, bytes]:
    with socket.create_connection(served.addr, timeout=120) as s:
        s.sendall(data)
        answer = bytearray()
        # A route that never reads its body closes with the body's rest unread: the kernel
        # then resets the connection, after the answer (which must have come whole before).
        with contextlib.suppress(ConnectionResetError):
            while chunk := s.recv(65536):
                answer.extend(chunk)
    assert answer, "no answer"
    return int(answer.split(b" ", 2)[1]), bytes(answer)


def test_each_route_answers_its_worst_request_within_its_bound(server: Served) -> None:
    mine = sorted(r for r in WORST if r[0] == server.kind)
    wrong: list[str] = []
    for route in mine:
        worst = WORST[route]
        data = request_bytes(worst, route[1])
        before = hwm_kib(server.proc.pid)
        status, answer = _send(server, data)
        first = hwm_kib(server.proc.pid)
        status_again, _ = _send(server, data)
        second = hwm_kib(server.proc.pid)
        if status != worst.status or status_again != worst.status:
            wrong.append(f"{route}: {status}/{status_again}, not {worst.status}: {answer[:400]!r}")
        elif worst.says.encode() not in answer:
            wrong.append(f"{route}: the answer does not say {worst.says!r}: {answer[:600]!r}")
        if first - before > FIRST_GROWTH_KIB or second - first > SECOND_GROWTH_KIB:
            wrong.append(f"{route}: peak RSS {before} -> {first} -> {second} KiB")
    assert not wrong, "\n".join(wrong)
    assert server.proc.poll() is None
    assert "Traceback" not in server.output()
