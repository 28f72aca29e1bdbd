"""The SSE decoder is linear on long lines and bounds a line's length."""

from __future__ import annotations

import pytest

from tierctl.bench.sse import MalformedStream, SSEDecoder


def test_a_long_line_in_many_chunks_is_joined_once() -> None:
    dec = SSEDecoder()
    payload = b"x" * 200_000
    line = b"data: " + payload + b"\n\n"
    out: list[bytes] = []
    for i in range(0, len(line), 7):
        out += dec.feed(line[i : i + 7])
    assert out == [payload]


def test_a_line_over_the_limit_is_a_malformed_stream() -> None:
    dec = SSEDecoder(max_line_bytes=1000)
    dec.feed(b"data: " + b"x" * 900)
    with pytest.raises(MalformedStream, match="over 1,000 bytes"):
        dec.feed(b"y" * 200)
    with pytest.raises(MalformedStream, match="over 1,000 bytes"):
        SSEDecoder(max_line_bytes=1000).feed(b"data: " + b"z" * 2000 + b"\n")
