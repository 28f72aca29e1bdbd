"""#22: the simulated engine against hostile and unlucky clients, a real `tierctl sim serve` on
loopback spoken to over raw sockets.

- a 100 MB prompt that cannot fit the KV pool is refused from a bound on its token count
  (bytes / the longest token), not after tokenizing it (160-184 s, /health down meanwhile);
- a well-behaved upload that arrives while the loop is blocked by another prompt's
  tokenization is read, not answered 408: the body deadline counts only free loop time;
- a slowloris (headers never finished, or trickled a byte at a time) is answered 408 and
  closed at the header deadline, and the server keeps answering others.
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierctl.runtime.polling import wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
KV_POOL = 100_000
BODY_TIMEOUT_S = 2.0
HEADER_TIMEOUT_S = 1.0


def _serve(body_timeout_s: float) -> Iterator[tuple[str, int]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tierctl", "sim", "serve", "--time-scale", "1000",
         "--body-timeout-s", str(body_timeout_s), "--header-timeout-s", str(HEADER_TIMEOUT_S),
         "--", "--host", "127.0.0.1", "--port", "0", "--max-total-tokens", str(KV_POOL)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"listening on http://([\d.]+):(\d+)", line)
        assert m, line
        yield m.group(1), int(m.group(2))
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int]]:
    """The default body deadline (a 100 MB upload has time to arrive)."""
    yield from _serve(60.0)


@pytest.fixture(scope="module")
def strict() -> Iterator[tuple[str, int]]:
    """A short body deadline, shorter than the loop is blocked in the test below."""
    yield from _serve(BODY_TIMEOUT_S)


def _connect(addr: tuple[str, int]) -> socket.socket:
    return socket.create_connection(addr, timeout=300)


def _post(path: str, body: bytes) -> tuple[bytes, bytes]:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head, body


def _response(sock: socket.socket) -> tuple[int, dict[str, object]]:
    """Status and JSON body of one response (Content-Length framed)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))  # type: ignore[union-attr]
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk
        rest += chunk
    return status, json.loads(rest[:length]) if rest[:length].startswith(b"{") else {}


def _health(addr: tuple[str, int]) -> int:
    with _connect(addr) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return int(s.recv(64).split(b" ", 2)[1])


def _prompt_body(prompt: str, max_tokens: int = 1) -> bytes:
    return json.dumps({"model": "m", "prompt": prompt, "max_tokens": max_tokens}).encode()


def test_a_100_mb_prompt_over_the_kv_pool_is_refused_from_its_size(
    server: tuple[str, int],
) -> None:
    # Built before connecting: a connection silent for the header deadline is closed.
    request = b"".join(
        _post("/v1/completions", _prompt_body("lorem ipsum dolor sit amet " * (100_000_000 // 27)))
    )
    with _connect(server) as s:
        s.sendall(request)
        status, body = _response(s)
    assert status == 400
    message = str(body["error"]["message"])  # type: ignore[index]
    # "at least": the count is the bound (bytes / the longest token), never tokenized.
    assert re.search(r"the prompt \(at least \d+ tokens\) plus max_tokens \(1\)", message), body
    assert f"exceeds the KV pool ({KV_POOL} tokens)" in message
    assert _health(server) == 200


def test_a_prompt_the_bound_cannot_refuse_is_tokenized_and_counted_exactly(
    server: tuple[str, int],
) -> None:
    # 40 000 words: under the bound's reach (bytes / 38), over the pool once tokenized.
    prompt = " ".join(f"w{i % 997}x{i % 13}" for i in range(120_000))
    request = b"".join(_post("/v1/completions", _prompt_body(prompt)))
    with _connect(server) as s:
        s.sendall(request)
        status, body = _response(s)
    assert status == 400
    message = str(body["error"]["message"])  # type: ignore[index]
    assert "at least" not in message
    assert re.search(r"the prompt \(\d+ tokens\)", message), body


def test_an_upload_during_a_blocked_loop_is_not_blamed_on_the_client(
    strict: tuple[str, int],
) -> None:
    """B sends its headers and half its body; A's prompt then blocks the loop (tokenized on
    it, as SGLang without the dynamic batch tokenizer) for longer than the body deadline; B
    sends the rest at once. B's upload took no free loop time: it is read, and answered."""
    blocker = " ".join(f"v{i % 991}y{i % 17}" for i in range(300_000))  # seconds to tokenize
    # Several MB of JSON whitespace: the rest of B's body takes many reads after the block,
    # each needing data still on its way (a deadline in wall time expires in between).
    small = b'{"model": "m",' + b" " * 4_000_000 + b'"prompt": "hello there", "max_tokens": 2}'
    head, body = _post("/v1/completions", small)
    blocking = b"".join(_post("/v1/completions", _prompt_body(blocker)))
    with _connect(strict) as b, _connect(strict) as a:
        b.sendall(head + body[:10])
        # A round trip on another connection: B's headers have been read by now (they came
        # first), so B's handler waits on its body when A arrives.
        assert _health(strict) == 200
        a.sendall(blocking)
        b.sendall(body[10:])
        status_b, answer_b = _response(b)
        status_a, _ = _response(a)
    assert status_a == 400  # over the pool: tokenized, then refused (the loop was blocked)
    assert status_b == 200, answer_b
    assert answer_b["choices"]  # type: ignore[index]


def _closed_with_408(sock: socket.socket, within_s: float) -> bool:
    """Whether the server answers 408 and closes ``sock`` (polled, up to ``within_s``)."""
    data = bytearray()

    def closed() -> bool:
        while select.select([sock], [], [], 0)[0]:
            chunk = sock.recv(4096)
            if not chunk:
                return True
            data.extend(chunk)
        return False

    return wait_until(closed, within_s, poll_s=0.05) and data.startswith(b"HTTP/1.1 408")


def test_slowloris_connections_are_closed_at_the_header_deadline(
    server: tuple[str, int],
) -> None:
    socks = [_connect(server) for _ in range(50)]
    try:
        for i, s in enumerate(socks):
            # Half of them never finish their headers; the other half send nothing at all.
            if i % 2 == 0:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        assert all(_closed_with_408(s, within_s=60) for s in socks)
        # A trickler, one header byte at a time: the deadline runs from its first byte.
        with _connect(server) as t:
            t.sendall(b"G")
            closed = False
            for byte in b"ET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 400:
                try:
                    t.sendall(bytes([byte]))
                except OSError:
                    closed = True
                    break
                ready, _, _ = select.select([t], [], [], 0.1)
                if ready:
                    closed = True
                    break
            assert closed, "a trickled request was never cut off"
        # Meanwhile others are served.
        assert _health(server) == 200
    finally:
        for s in socks:
            s.close()
