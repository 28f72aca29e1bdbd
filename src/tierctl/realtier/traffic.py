"""Steady client traffic through a proxy while something changes behind it, every outcome kept.

A rollout's promise is that clients of the proxy see no failure while one replica is
recreated. :class:`Traffic` keeps ``concurrency`` clients sending small completions to one URL
until stopped (bounded by a request count and a wall time, so it always ends by itself) and
records every request's outcome: the HTTP status, or the client error's name.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from tierctl.runtime.polling import wait_until


@dataclass
class TrafficResult:
    """What the clients saw.

    Attributes:
        outcomes: ``"200"``, ``"502"``, ``"ReadTimeout"`` ... -> count.
        failures: (seconds since start, outcome) of each request that did not get a 200.
        seconds: How long the traffic ran.
    """

    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[float, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def sent(self) -> int:
        """Requests sent."""
        return sum(self.outcomes.values())

    @property
    def ok(self) -> int:
        """Requests answered 200."""
        return self.outcomes.get("200", 0)


class Traffic:
    """Background clients: ``with Traffic(url) as t: ...``; ``t.result`` afterwards."""

    def __init__(
        self,
        url: str,
        *,
        model: str = "tiny-llama",
        concurrency: int = 2,
        max_tokens: int = 8,
        request_timeout_s: float = 120.0,
        max_requests: int = 50_000,
        max_seconds: float = 1800.0,
        pause_s: float = 0.05,
    ) -> None:
        """Prepare the clients (they start on ``__enter__``)."""
        self.url = url.rstrip("/") + "/v1/completions"
        self.body = {"model": model, "prompt": "", "max_tokens": max_tokens, "temperature": 0}
        self.concurrency = concurrency
        self.timeout = request_timeout_s
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        self.pause_s = pause_s
        self.result = TrafficResult()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._t0 = 0.0

    def _client(self, index: int) -> None:
        with httpx.Client(timeout=self.timeout) as client:
            n = 0
            while not self._stop.is_set():
                with self._lock:
                    if self.result.sent >= self.max_requests:
                        return
                if time.monotonic() - self._t0 > self.max_seconds:
                    return
                body = dict(self.body, prompt=f"client {index} request {n}: the tier")
                n += 1
                try:
                    outcome = str(client.post(self.url, json=body).status_code)
                except httpx.HTTPError as exc:
                    outcome = type(exc).__name__
                with self._lock:
                    self.result.outcomes[outcome] += 1
                    if outcome != "200":
                        self.result.failures.append((time.monotonic() - self._t0, outcome))
                self._stop.wait(self.pause_s)

    def __enter__(self) -> Traffic:
        self._t0 = time.monotonic()
        self._threads = [
            threading.Thread(target=self._client, args=(i,), daemon=True)
            for i in range(self.concurrency)
        ]
        for t in self._threads:
            t.start()
        return self

    def wait_for(self, requests: int, timeout_s: float = 120.0) -> None:
        """Block until at least ``requests`` have been answered (or ``timeout_s`` passed)."""

        def answered_or_done() -> bool:
            # Every client stopped at its bound: no more answers will come.
            stopped = bool(self._threads) and not any(t.is_alive() for t in self._threads)
            return self.result.sent >= requests or stopped

        wait_until(answered_or_done, timeout_s)

    def stop(self) -> TrafficResult:
        """Stop the clients (each finishes its request in flight) and return the result."""
        self._stop.set()
        for t in self._threads:
            t.join(self.timeout + 5)
        self.result.seconds = time.monotonic() - self._t0
        return self.result

    def __exit__(self, *exc: object) -> None:
        self.stop()
