"""The SGLang model gateway (``sglang-router``, PyPI) as the tier's real proxy.

The router is a Rust server in a Python wheel; ``sglang-router launch --worker-urls URL...``
runs it in front of any OpenAI-compatible engines (SGLang, vLLM). Measured with 0.3.2 against
vLLM 0.32 on CPU: the default (``sglang``) backend forwards ``/v1/completions`` and
``/v1/chat/completions`` (streaming included) to the workers; ``--backend openai`` serves chat
only (``/v1/completions`` answers 501), so it is not used.

What the router tells about itself, and where (0.3.2):

- ``GET /liveness`` (alias ``/health``): the router process is up;
- ``GET /readiness``: ``{"status": "ready", "healthy_workers": N, "total_workers": M}``
  (503 when no worker is healthy);
- ``GET /workers``: one entry per worker with ``url``, ``is_healthy``, ``load``;
- ``POST /workers`` ``{"url": ...}`` registers a worker (202, queued); ``DELETE /workers/{id}``
  removes one;
- its Prometheus endpoint (``--prometheus-host/--prometheus-port``, a separate listener)
  exports ``smg_http_responses_total{status_code}``, ``smg_worker_health{worker}``,
  ``smg_worker_health_checks_total{result}``, ``smg_http_requests_total{path}``.

Health checking (the design's "probe every few seconds with a 3 s time-out, unhealthy after 3
misses") maps to ``--health-check-interval-secs``, ``--health-check-timeout-secs``,
``--health-failure-threshold`` (and ``--health-success-threshold`` to come back);
:func:`settings_from_argv` reads them, and the worker URLs, back out of a rendered command, so
a proxy service rendered from the spec is launched exactly as rendered.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tierctl.errors import InputError, RuntimeFailure
from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import ServerProcess, free_port, log_tail
from tierctl.runtime.promtext import parse_metrics

# The binary's name on PATH and in the wheel's console scripts.
ROUTER_COMMAND = "sglang-router"
#: Its liveness and readiness paths (see the module docstring), for probes that ask them.
LIVENESS_PATH = "/liveness"
READINESS_PATH = "/readiness"
#: Where its Prometheus listener binds by default.
DEFAULT_METRICS_PORT = 29000
#: Where ``sglang-router launch`` listens when its command names no ``--port``.
DEFAULT_ROUTER_PORT = 30000


@dataclass(frozen=True)
class HealthChecks:
    """How the router probes each worker.

    Attributes:
        interval_s: Seconds between probes (``--health-check-interval-secs``).
        timeout_s: Per-probe time-out (``--health-check-timeout-secs``).
        failure_threshold: Consecutive misses before a worker is unhealthy.
        success_threshold: Consecutive answers before it is healthy again.
        endpoint: The worker's health path.
    """

    interval_s: int = 2
    timeout_s: int = 3
    failure_threshold: int = 3
    success_threshold: int = 1
    endpoint: str = "/health"


@dataclass(frozen=True)
class RouterSettings:
    """One router: where it listens, its workers, its policy and health checks.

    Attributes:
        worker_urls: The engines behind it, in order.
        host: Listen address (loopback by default; the router's own default is 0.0.0.0).
        port: Listen port; 0 picks a free one at launch.
        metrics_port: Its Prometheus listener; 0 picks a free one (its default, 29000, would
            collide between two routers on one machine).
        policy: Load-balancing policy (``round_robin``, ``random``, ``cache_aware``, ...).
        health: Health-check settings.
        retries: ``--retry-max-retries`` (None: the router's default, 5).
        log_level: ``--log-level``.
        extra: Further flags, passed as given.
    """

    worker_urls: tuple[str, ...]
    host: str = "127.0.0.1"
    port: int = 0
    metrics_port: int = 0
    policy: str = "round_robin"
    health: HealthChecks = field(default_factory=HealthChecks)
    retries: int | None = None
    log_level: str = "warn"
    extra: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        """The router's base URL (once ports are chosen)."""
        return f"http://{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        """The router's Prometheus endpoint."""
        return f"http://{self.host}:{self.metrics_port}/metrics"


def router_argv(settings: RouterSettings, binary: str | Path = ROUTER_COMMAND) -> list[str]:
    """The ``sglang-router launch`` command for ``settings`` (ports must be chosen)."""
    h = settings.health
    argv = [
        str(binary),
        "launch",
        "--host",
        settings.host,
        "--port",
        str(settings.port),
        # None given: the workers come another way (Kubernetes service discovery in `extra`).
        *(("--worker-urls", *settings.worker_urls) if settings.worker_urls else ()),
        "--policy",
        settings.policy,
        "--health-check-interval-secs",
        str(h.interval_s),
        "--health-check-timeout-secs",
        str(h.timeout_s),
        "--health-failure-threshold",
        str(h.failure_threshold),
        "--health-success-threshold",
        str(h.success_threshold),
        "--health-check-endpoint",
        h.endpoint,
        "--prometheus-host",
        settings.host,
        "--prometheus-port",
        str(settings.metrics_port),
        "--log-level",
        settings.log_level,
    ]
    if settings.retries is not None:
        argv += ["--retry-max-retries", str(settings.retries)]
    return argv + list(settings.extra)


def is_router_command(command: Any) -> bool:
    """Whether a compose ``command`` list runs sglang-router (its program or module)."""
    if not isinstance(command, list) or not command:
        return False
    head = str(command[0])
    return (
        "sglang-router" in head
        or "sglang_router" in head
        or ("sglang_router.launch_router" in map(str, command))
    )


def relocated_argv(
    command: list[str], worker_urls: tuple[str, ...], extra: tuple[str, ...]
) -> tuple[list[str], int | None, int | None]:
    """A spec's own router command moved into a pod: its workers replaced by ``worker_urls``
    (or none, with ``extra``'s service discovery), a loopback listen or metrics host made
    ``0.0.0.0`` (a pod is reached on its IP); every other flag as the spec wrote it. Returns
    the argv and its ``--port`` and ``--prometheus-port`` (None when not given)."""
    out: list[str] = []
    ports: dict[str, int | None] = {"--port": None, "--prometheus-port": None}
    i = 0
    while i < len(command):
        token = str(command[i])
        if token == "--worker-urls":
            i += 1
            while i < len(command) and not str(command[i]).startswith("--"):
                i += 1
            continue
        if token in ("--host", "--prometheus-host") and i + 1 < len(command):
            host = str(command[i + 1])
            out += [token, "0.0.0.0" if host in ("127.0.0.1", "localhost", "::1") else host]
            i += 2
            continue
        if token in ports and i + 1 < len(command):
            try:
                ports[token] = int(str(command[i + 1]))
            except ValueError:
                ports[token] = None
        out.append(token)
        i += 1
    if worker_urls:
        out += ["--worker-urls", *worker_urls]
    return [*out, *extra], ports["--port"], ports["--prometheus-port"]


_INT_FLAGS = {
    "--port": "port",
    "--prometheus-port": "metrics_port",
    "--retry-max-retries": "retries",
}
_HEALTH_FLAGS = {
    "--health-check-interval-secs": "interval_s",
    "--health-check-timeout-secs": "timeout_s",
    "--health-failure-threshold": "failure_threshold",
    "--health-success-threshold": "success_threshold",
}
_STR_FLAGS = {"--host": "host", "--policy": "policy", "--log-level": "log_level"}


def settings_from_argv(argv: Sequence[str], *, where: str = "the proxy command") -> RouterSettings:
    """Read a rendered ``sglang-router launch ...`` command back into settings.

    Flags this module does not model are kept in ``extra`` (a flag and its values), so
    ``router_argv(settings_from_argv(argv))`` launches what was rendered.

    Raises:
        InputError: no ``launch`` subcommand, no worker URLs, or a non-integer value.
    """
    args = list(argv)
    if "launch" not in args:
        raise InputError(
            f"{where} is not `sglang-router launch ...`: {' '.join(args[:3])}",
            rule="the proxy runs sglang-router's launch subcommand",
            fix="render the proxy's command as [sglang-router, launch, --worker-urls, ...]",
        )
    rest = args[args.index("launch") + 1 :]
    values: dict[str, Any] = {}
    health: dict[str, Any] = {}
    urls: list[str] = []
    extra: list[str] = []
    i = 0
    while i < len(rest):
        flag, _, inline = rest[i].partition("=")
        taken = [inline] if inline else []
        j = i + 1
        while not inline and j < len(rest) and not rest[j].startswith("--"):
            taken.append(rest[j])
            j += 1
        if flag == "--worker-urls":
            urls.extend(u for t in taken for u in t.split(",") if u)
        elif flag in _INT_FLAGS or flag in _HEALTH_FLAGS:
            if len(taken) != 1 or not re.fullmatch(r"\d+", taken[0]):
                raise InputError(
                    f"{where}: {flag} needs one integer, got {' '.join(taken) or 'nothing'}",
                    rule="sglang-router's port, retry and health settings are integers",
                    fix=f"write {flag} N",
                )
            (values if flag in _INT_FLAGS else health)[(_INT_FLAGS | _HEALTH_FLAGS)[flag]] = int(
                taken[0]
            )
        elif flag in _STR_FLAGS and len(taken) == 1:
            values[_STR_FLAGS[flag]] = taken[0]
        elif flag == "--health-check-endpoint" and len(taken) == 1:
            health["endpoint"] = taken[0]
        elif flag == "--prometheus-host":
            pass  # the metrics listener binds where the router does
        else:
            extra.extend(rest[i:j])
        i = j
    if not urls:
        raise InputError(
            f"{where} names no --worker-urls",
            rule="the proxy is launched with every replica's URL",
            fix="render --worker-urls '{{backends}}' in the proxy's command",
        )
    return RouterSettings(
        worker_urls=tuple(urls), health=HealthChecks(**health), extra=tuple(extra), **values
    )


def admin_client(argv: Sequence[str], host: str) -> RouterClient | None:
    """The client of the router a rendered proxy command launches, reached on ``host`` where
    the command binds every interface (None: the command is not ``sglang-router launch``)."""
    if not argv or Path(argv[0]).name != ROUTER_COMMAND:
        return None
    try:
        settings = settings_from_argv(argv)
    except InputError:
        return None
    bind = settings.host if "--host" in argv else "0.0.0.0"
    where = host if bind in ("0.0.0.0", "::", "[::]") else bind
    # The router's own default port when the command names none.
    port = settings.port or DEFAULT_ROUTER_PORT
    return RouterClient(f"http://{where}:{port}")


@dataclass(frozen=True)
class WorkerState:
    """One worker as the router sees it."""

    url: str
    healthy: bool
    load: int
    id: str = ""


class RouterClient:
    """Read (and steer) a running router over HTTP."""

    def __init__(self, url: str, metrics_url: str | None = None, timeout_s: float = 5.0) -> None:
        """Talk to the router at ``url`` (and its Prometheus endpoint, if known)."""
        self.url = url.rstrip("/")
        self.metrics_url = metrics_url
        self._timeout = timeout_s

    def live(self) -> bool:
        """``/liveness`` answers 200."""
        try:
            return httpx.get(f"{self.url}/liveness", timeout=self._timeout).status_code == 200
        except httpx.HTTPError:
            return False

    def readiness(self) -> tuple[int, int]:
        """(healthy workers, total workers) from ``/readiness``; (0, 0) when unreachable."""
        try:
            body = httpx.get(f"{self.url}/readiness", timeout=self._timeout).json()
        except (httpx.HTTPError, ValueError):
            return (0, 0)
        return (int(body.get("healthy_workers", 0)), int(body.get("total_workers", 0)))

    def workers(self) -> list[WorkerState]:
        """Every worker with its health and load, from ``/workers``.

        Raises:
            httpx.HTTPError: unreachable, or an error status.
            ValueError: the answer is not a worker list (JSON or shape).
        """
        resp = httpx.get(f"{self.url}/workers", timeout=self._timeout)
        resp.raise_for_status()
        try:
            return [
                WorkerState(
                    url=str(w["url"]),
                    healthy=bool(w.get("is_healthy")),
                    load=int(w.get("load") or 0),
                    id=str(w.get("id", "")),
                )
                for w in resp.json().get("workers", [])
            ]
        except (KeyError, TypeError, AttributeError) as exc:
            # Something else answers there (another server on the port): not a worker list.
            raise ValueError(f"{self.url}/workers is not sglang-router's worker list") from exc

    def health_of(self) -> dict[str, bool]:
        """Worker URL -> healthy."""
        return {w.url: w.healthy for w in self.workers()}

    def add_worker(self, url: str) -> None:
        """Register a worker (the router queues the job and probes it before routing to it)."""
        resp = httpx.post(f"{self.url}/workers", json={"url": url}, timeout=self._timeout)
        if resp.status_code >= 400:
            raise RuntimeFailure(f"router refused worker {url}: HTTP {resp.status_code}")

    def remove_worker(self, url: str) -> None:
        """Remove a worker by URL (no-op when it is not registered; the removal is queued)."""
        for w in self.workers():
            if w.url == url:
                resp = httpx.delete(f"{self.url}/workers/{w.id}", timeout=self._timeout)
                if resp.status_code >= 400:
                    raise RuntimeFailure(f"router refused to remove {url}: HTTP {resp.status_code}")

    def worker_for_port(self, port: int) -> str | None:
        """The one registered worker URL on ``port`` (None: no worker there, or several)."""
        found = [w.url for w in self.workers() if urlsplit(w.url).port == port]
        return found[0] if len(found) == 1 else None

    def drain(
        self,
        url: str,
        *,
        timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Route no new request to ``url``: remove it and wait until the router lists it no
        more (removal is queued). Requests already routed to it run to their end.

        Raises:
            RuntimeFailure: the router refused, or still lists it after ``timeout_s``.
        """
        self.remove_worker(url)
        gone = wait_until(
            lambda: all(w.url != url for w in self.workers()),
            timeout_s,
            poll_s=0.2,
            sleep=sleep,
            clock=clock,
        )
        if not gone:
            raise RuntimeFailure(
                f"the router at {self.url} still lists {url} {timeout_s:g} s after its removal",
                rule="a replica leaves the proxy before it is stopped",
                fix=f"check the router's log; GET {self.url}/workers",
            )

    def restore(
        self,
        url: str,
        *,
        timeout_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Register ``url`` again (unless listed) and wait until the router marks it healthy.

        Raises:
            RuntimeFailure: the router refused, or did not mark it healthy in ``timeout_s``.
        """
        if url not in self.health_of():
            self.add_worker(url)
        healthy = wait_until(
            lambda: self.health_of().get(url, False),
            timeout_s,
            poll_s=0.5,
            sleep=sleep,
            clock=clock,
        )
        if not healthy:
            raise RuntimeFailure(
                f"the router at {self.url} did not mark {url} healthy within "
                f"{timeout_s:g} s of its registration",
                rule="a replica rejoins the proxy once it serves again",
                fix=f"check {url} answers its health path; POST {self.url}/workers "
                f'{{"url": "{url}"}} registers it by hand',
            )

    def counters(self) -> RouterCounters:
        """The router's request and health-check counters from its Prometheus endpoint."""
        if self.metrics_url is None:
            raise RuntimeFailure("the router's metrics URL is not known")
        text = httpx.get(self.metrics_url, timeout=self._timeout).text
        return parse_counters(text)


@dataclass(frozen=True)
class RouterCounters:
    """What the router counted since it started.

    Attributes:
        responses: HTTP status code -> responses sent.
        requests: Path -> requests received.
        health_checks: ``success``/``failure`` -> probes.
        worker_health: Worker URL -> 1 healthy / 0 not.
    """

    responses: Mapping[str, float]
    requests: Mapping[str, float]
    health_checks: Mapping[str, float]
    worker_health: Mapping[str, float]

    def errors(self) -> float:
        """Responses with a 5xx status."""
        return sum(v for k, v in self.responses.items() if k.startswith("5"))

    def minus(self, before: RouterCounters) -> RouterCounters:
        """Counts since ``before`` (worker health is the current value)."""

        def sub(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
            return {k: v - b.get(k, 0.0) for k, v in a.items()}

        return replace(
            self,
            responses=sub(self.responses, before.responses),
            requests=sub(self.requests, before.requests),
            health_checks=sub(self.health_checks, before.health_checks),
        )


def parse_counters(text: str) -> RouterCounters:
    """Read the router's counters out of its Prometheus text exposition."""
    responses: dict[str, float] = {}
    requests: dict[str, float] = {}
    checks: dict[str, float] = {}
    health: dict[str, float] = {}
    for sample in parse_metrics(text):
        labels, value = sample.labels, sample.value
        if sample.name == "smg_http_responses_total":
            key = labels.get("status_code", "?")
            responses[key] = responses.get(key, 0.0) + value
        elif sample.name == "smg_http_requests_total":
            key = labels.get("path", "?")
            requests[key] = requests.get(key, 0.0) + value
        elif sample.name == "smg_worker_health_checks_total":
            key = labels.get("result", "?")
            checks[key] = checks.get(key, 0.0) + value
        elif sample.name == "smg_worker_health":
            health[labels.get("worker", "?")] = value
    return RouterCounters(responses, requests, checks, health)


class SglangRouter:
    """A running ``sglang-router``: start, wait until its workers are healthy, stop.

    Use as a context manager; the router's process group is stopped on every exit path.
    """

    def __init__(
        self,
        settings: RouterSettings,
        log: Path,
        *,
        binary: str | Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Prepare a router; free ports are chosen for ``port``/``metrics_port`` left at 0.

        Args:
            settings: What to launch.
            log: Its output goes here.
            binary: The ``sglang-router`` executable (default: found by
                :func:`tierctl.realengine.env.router_binary`).
            env: Its environment (default: this process's).
        """
        if binary is None:
            from tierctl.realengine.env import router_binary

            found = router_binary()
            if found is None:
                raise RuntimeFailure(
                    "sglang-router is not installed",
                    rule="the real proxy is the sglang-router wheel's executable",
                    fix="run scripts/ensure-vllm, `pip install sglang-router==0.3.2`, "
                    "or set TIERCTL_SGLANG_ROUTER",
                )
            binary = found
        self.settings = replace(
            settings,
            port=settings.port or free_port(settings.host),
            metrics_port=settings.metrics_port or free_port(settings.host),
        )
        self.binary = str(binary)
        self.client = RouterClient(self.settings.url, self.settings.metrics_url)
        self.process = ServerProcess(
            router_argv(self.settings, self.binary), log, env=env, name="sglang-router"
        )

    @property
    def url(self) -> str:
        """Where clients send requests."""
        return self.settings.url

    def start(self, *, ready_timeout_s: float = 60.0, healthy_workers: int | None = None) -> None:
        """Start and wait until it is live and ``healthy_workers`` (default: all) are healthy.

        Raises:
            RuntimeFailure: it exited or did not get there in time (the log's tail is shown).
        """
        want = len(self.settings.worker_urls) if healthy_workers is None else healthy_workers
        self.process.start()

        def ready() -> bool:
            return self.client.live() and self.client.readiness()[0] >= want

        try:
            self.process.wait_ready(ready, ready_timeout_s)
        except RuntimeFailure as exc:
            raise RuntimeFailure(
                f"sglang-router did not get {want} healthy worker(s): {exc.message}",
                rule="the router is ready when its workers answer its health probe",
                fix=f"read {self.process.log}; check the workers answer "
                f"{self.settings.health.endpoint}",
            ) from None

    def wait_healthy(self, workers: int, timeout_s: float = 120.0) -> bool:
        """Wait until at least ``workers`` workers are healthy; returns whether they were."""
        return wait_until(lambda: self.client.readiness()[0] >= workers, timeout_s, poll_s=0.5)

    def stop(self) -> None:
        """Stop the router's process group (idempotent)."""
        self.process.stop()

    def log_tail(self) -> str:
        """The end of its log, for messages."""
        return log_tail(self.process.log)

    def __enter__(self) -> SglangRouter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
