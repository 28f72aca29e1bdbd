"""`tierctl sim serve` against hostile input: how fast an unfittable huge prompt is refused,
whether /health answers meanwhile, and how long a slowloris holds connections.

Run: PYTHONPATH=src /work/main/.venv/bin/python benchmarks/sim_hostile.py [--mb 100] [--conns 50]

Starts one server on a free loopback port (KV pool 100 000 tokens, header deadline 2 s) and
always stops it. Prints: the refusal's wall time for an MB-sized prompt (upload, JSON parse and
the size bound; before #22 it was tokenized in full first, 160-184 s for 100 MB), /health's
slowest answer while that request was in flight, and how many of N slowloris connections (a
request line and a header never finished) the server had closed after 2, 5 and 10 s. Every
loop is bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _start(header_timeout_s: float) -> tuple[subprocess.Popen[str], tuple[str, int]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tierctl", "sim", "serve", "--time-scale", "1000",
         "--header-timeout-s", str(header_timeout_s), "--",
         "--host", "127.0.0.1", "--port", "0", "--max-total-tokens", "100000"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    m = re.search(r"listening on http://([\d.]+):(\d+)", proc.stdout.readline())
    assert m, "the server did not start"
    return proc, (m.group(1), int(m.group(2)))


def _health_s(addr: tuple[str, int]) -> float:
    t0 = time.monotonic()
    with socket.create_connection(addr, timeout=300) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        s.recv(64)
    return time.monotonic() - t0


def huge_prompt(addr: tuple[str, int], mb: int) -> tuple[float, str, float]:
    """(refusal wall s, the answer's first line of JSON, slowest /health s meanwhile)."""
    prompt = "lorem ipsum dolor sit amet " * (mb * 1_000_000 // 27)
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": 1}).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    done = threading.Event()
    slowest = [0.0]

    def probe() -> None:
        for _ in range(10_000):  # bounded: one probe per 0.1 s at most
            if done.is_set():
                return
            slowest[0] = max(slowest[0], _health_s(addr))
            done.wait(0.1)

    t = threading.Thread(target=probe)
    t.start()
    t0 = time.monotonic()
    with socket.create_connection(addr, timeout=600) as s:
        s.sendall(head + body)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    took = time.monotonic() - t0
    done.set()
    t.join()
    return took, answer.split(b"\r\n\r\n", 1)[-1][:140].decode(), slowest[0]


def slowloris(addr: tuple[str, int], conns: int) -> dict[float, int]:
    """How many of ``conns`` unfinished requests were closed by 2, 5 and 10 s."""
    socks = [socket.create_connection(addr) for _ in range(conns)]
    for s in socks:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    t0 = time.monotonic()
    closed: set[int] = set()
    out: dict[float, int] = {}
    for mark in (2.0, 5.0, 10.0):
        while time.monotonic() - t0 < mark and len(closed) < conns:
            open_ = [s for i, s in enumerate(socks) if i not in closed]
            ready, _, _ = select.select(open_, [], [], 0.1)
            for s in ready:
                s.recv(4096)  # the 408, or the close: either way the server let go
                closed.add(socks.index(s))
        out[mark] = len(closed)
    for s in socks:
        s.close()
    return out


def main() -> None:
    """Measure and print."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="Size of the unfittable prompt.")
    ap.add_argument("--conns", type=int, default=50, help="Slowloris connections.")
    args = ap.parse_args()
    proc, addr = _start(header_timeout_s=2.0)
    try:
        took, said, slowest = huge_prompt(addr, args.mb)
        print(f"{args.mb} MB prompt over the KV pool: answered in {took:.2f} s: {said}")
        print(f"/health while it was in flight: slowest answer {slowest:.2f} s")
        for mark, n in slowloris(addr, args.conns).items():
            print(f"slowloris: {n} of {args.conns} connections closed by {mark:g} s")
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()


if __name__ == "__main__":
    main()
