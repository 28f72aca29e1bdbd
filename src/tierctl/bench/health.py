"""Arm health over a run: restarts, OOM kills, fatal log lines, queue-full rejections.

An arm is watched through whatever the operator can give, all optional:

- its URL: ``process_start_time_seconds`` on ``/metrics`` (prometheus_client's process
  collector, which real engines and ``sim serve`` export); a changed value is a restart;
- a container name: ``docker inspect`` (``State.StartedAt``, ``State.OOMKilled``,
  ``RestartCount``) and ``docker logs --since`` the run start;
- a pid file: the process's start time from ``/proc/<pid>/stat`` (a new pid or start time is
  a restart);
- a log file: the lines appended during the run.

Log lines are matched against the engine profile's fatal patterns
(:attr:`tierctl.engines.EngineProfile.fatal_log_patterns`); CUDA out-of-memory lines and a
container the kernel OOM-killed count as OOM kills. Queue-full rejections are counted from the
run's own responses. Sampling is sync (httpx, subprocess) and runs in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tierctl.engines import EngineProfile, default_profile, engine_at_or_default, profile_for
from tierctl.engines.liveness import log_matches, metrics_start_time
from tierctl.errors import InputError
from tierctl.readers import read_text

#: ``run(argv) -> (exit code, stdout)``; injected so tests need no Docker engine.
Runner = Callable[[Sequence[str]], tuple[int, str]]

_MAX_LOG_BYTES = 64 * 1024 * 1024


def _subprocess_runner(argv: Sequence[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, proc.stdout + proc.stderr


@dataclass(frozen=True)
class ArmTarget:
    """What can be watched of one arm (every source optional).

    Attributes:
        arm: ``A`` or ``B``.
        url: Base URL (``/metrics`` is read for the process start time).
        engine: Engine kind for the fatal patterns; ``None``: guessed from ``/metrics``.
        log_path: A log file the engine writes.
        container: A container name or id (``docker inspect`` / ``docker logs``).
        pid_file: A file holding the engine's pid.
    """

    arm: str
    url: str | None = None
    engine: str | None = None
    log_path: Path | None = None
    container: str | None = None
    pid_file: Path | None = None


@dataclass(frozen=True)
class StartSample:
    """One look at an arm's identity: when its process (or container) started."""

    at_s: float
    source: str
    started: str | None  # the start time as the source reports it; None: unreachable
    oom_killed: bool = False


@dataclass(frozen=True)
class ArmHealth:
    """What happened to one arm during the run.

    Attributes:
        arm: ``A`` or ``B``.
        restarts: Times a start time changed between samples (over every source).
        restart_evidence: One line per change seen.
        oom_kills: OOM kills (container OOM-killed, CUDA out-of-memory lines).
        fatal_lines: ``(pattern, line)`` of fatal log lines written during the run.
        warnings: Non-fatal matches (a traceback alone) and sources that could not be read.
        queue_full: Requests the arm rejected with a full queue.
        down_at_end: The arm did not answer at the last sample.
        sources: The sources that gave a start time at least once.
        samples: Samples taken.
    """

    arm: str
    restarts: int = 0
    restart_evidence: tuple[str, ...] = ()
    oom_kills: int = 0
    fatal_lines: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    queue_full: int = 0
    down_at_end: bool = False
    sources: tuple[str, ...] = ()
    samples: int = 0

    @property
    def healthy(self) -> bool:
        """No restart, no OOM kill, no fatal log line, and up at the end."""
        return not (self.restarts or self.oom_kills or self.fatal_lines or self.down_at_end)

    @property
    def observed(self) -> bool:
        """Whether any source could tell a restart (else ``restarts`` 0 means "unknown")."""
        return bool(self.sources)

    def summary(self) -> str:
        """One line: ``0 restarts, 0 OOMs, 0 fatal log lines, 0 queue-full``."""
        text = (
            f"{self.restarts} restarts, {self.oom_kills} OOMs, {len(self.fatal_lines)} fatal "
            f"log lines, {self.queue_full} queue-full"
        )
        if self.down_at_end:
            text += ", DOWN at the end"
        if not self.observed:
            text += " (no start-time source: restarts not observable)"
        return text


def proc_start_time(pid_file: Path) -> str | None:
    """``pid:starttime`` of the process in a pid file (field 22 of ``/proc/<pid>/stat``)."""
    try:
        pid = int(read_text(pid_file, what="pid").strip())
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (InputError, OSError, ValueError):
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    # after the ")" closing the command name, starttime is the 20th field (22nd overall)
    return f"{pid}:{fields[19]}" if len(fields) > 19 else None


def docker_state(run: Runner, container: str) -> tuple[str | None, bool]:
    """(``StartedAt``, ``OOMKilled``) of a container; (None, False) when it cannot be read."""
    code, out = run(
        ["docker", "inspect", "-f", "{{.State.StartedAt}} {{.State.OOMKilled}}", container]
    )
    parts = out.split()
    if code != 0 or len(parts) < 2:
        return None, False
    return parts[0], parts[1].lower() == "true"


class HealthWatch:
    """Samples every arm's start times while a run goes on; :meth:`finish` gives the verdicts."""

    def __init__(
        self,
        targets: Sequence[ArmTarget],
        *,
        interval_s: float = 5.0,
        run: Runner = _subprocess_runner,
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.targets = list(targets)
        self.interval_s = interval_s
        self._run = run
        self._owns_client = client is None
        self._client = client or httpx.Client()
        self._clock = clock
        self._t0 = clock()
        self._wall0 = time.time()
        self.samples: dict[str, list[StartSample]] = {t.arm: [] for t in self.targets}
        self._log_offsets: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None

    # -- sampling ---------------------------------------------------------------------

    def sample(self) -> None:
        """Take one sample of every source of every arm."""
        now = self._clock() - self._t0
        for t in self.targets:
            got = self.samples[t.arm]
            if t.url:
                got.append(StartSample(now, "metrics", metrics_start_time(self._client, t.url)))
            if t.container:
                started, oom = docker_state(self._run, t.container)
                got.append(StartSample(now, "docker", started, oom))
            if t.pid_file:
                got.append(StartSample(now, "pid", proc_start_time(t.pid_file)))

    def begin(self) -> None:
        """The first sample, and where each log file ends now."""
        for t in self.targets:
            if t.log_path is not None:
                with contextlib.suppress(OSError):
                    self._log_offsets[t.arm] = t.log_path.stat().st_size
        self.sample()

    async def start(self) -> None:
        """Begin, then keep sampling every ``interval_s`` in the background."""
        await asyncio.to_thread(self.begin)
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await asyncio.to_thread(self.sample)

    async def stop(self, queue_full: dict[str, int] | None = None) -> dict[str, ArmHealth]:
        """Stop sampling, take a last sample, read the logs; one :class:`ArmHealth` per arm."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return await asyncio.to_thread(self.finish, queue_full or {})

    def finish(self, queue_full: dict[str, int]) -> dict[str, ArmHealth]:
        """The last sample and the verdicts (sync); closes the HTTP client it made."""
        try:
            self.sample()
            return {t.arm: self._judge(t, queue_full.get(t.arm, 0)) for t in self.targets}
        finally:
            if self._owns_client:
                self._client.close()

    # -- judging ----------------------------------------------------------------------

    def _profile(self, t: ArmTarget) -> EngineProfile:
        if t.engine:
            return profile_for(t.engine)
        if not t.url:
            return default_profile()
        base = t.url.rstrip("/")

        def probe(path: str) -> str | None:
            try:
                resp = self._client.get(base + path, timeout=5.0)
            except httpx.HTTPError:
                return None
            return resp.text if resp.status_code == 200 else None

        return engine_at_or_default(probe)

    def _log_text(self, t: ArmTarget, warnings: list[str]) -> str:
        parts: list[str] = []
        if t.log_path is not None:
            try:
                size = t.log_path.stat().st_size
                start = self._log_offsets.get(t.arm, 0)
                if size < start:  # rotated or truncated: read it all
                    start = 0
                with t.log_path.open("rb") as fh:
                    fh.seek(max(start, size - _MAX_LOG_BYTES))
                    parts.append(fh.read().decode("utf-8", "replace"))
            except OSError as exc:
                warnings.append(f"log {t.log_path}: {exc.strerror or exc}")
        if t.container:
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._wall0 - 1))
            code, out = self._run(["docker", "logs", "--since", since, t.container])
            if code == 0:
                parts.append(out)
            else:
                warnings.append(f"docker logs {t.container}: exit {code}")
        return "\n".join(parts)

    def _judge(self, t: ArmTarget, queue_full: int) -> ArmHealth:
        warnings: list[str] = []
        restarts = 0
        evidence: list[str] = []
        sources: list[str] = []
        oom = 0
        down_at_end = False
        by_source: dict[str, list[StartSample]] = {}
        for s in self.samples[t.arm]:
            by_source.setdefault(s.source, []).append(s)
        for source, seq in by_source.items():
            known = [s for s in seq if s.started is not None]
            if known:
                sources.append(source)
            else:
                warnings.append(f"{source}: no start time could be read")
            for prev, cur in itertools.pairwise(known):
                if cur.started != prev.started:
                    restarts += 1
                    evidence.append(
                        f"{source}: start time {prev.started} -> {cur.started} "
                        f"(between {prev.at_s:.0f} s and {cur.at_s:.0f} s)"
                    )
            ooms = [s for s in seq if s.oom_killed]
            if ooms:
                oom += 1
                evidence.append(f"{source}: OOM-killed (seen at {ooms[0].at_s:.0f} s)")
            if seq and seq[-1].started is None and known:
                down_at_end = True
        if len(sources) > 1:
            # every source saw the same restart: count it once
            per = [sum(1 for e in evidence if e.startswith(src + ": start")) for src in sources]
            restarts = max(per)
        profile = self._profile(t)
        fatal: list[tuple[str, str]] = []
        fatal_matches, warning_matches = log_matches(profile, self._log_text(t, warnings))
        for name, line in fatal_matches:
            fatal.append((name, line.strip()[:400]))
            if name == "cuda-oom":
                oom += 1
        warnings += [f"{name}: {line.strip()[:200]}" for name, line in warning_matches]
        return ArmHealth(
            arm=t.arm,
            restarts=restarts,
            restart_evidence=tuple(evidence),
            oom_kills=oom,
            fatal_lines=tuple(fatal),
            warnings=tuple(warnings),
            queue_full=queue_full,
            down_at_end=down_at_end,
            sources=tuple(sources),
            samples=len(self.samples[t.arm]),
        )


def count_queue_full(errors: Sequence[tuple[int | None, str | None]], profile_text: str) -> int:
    """Rejections among ``(http_status, error text)`` pairs: the profile's queue-full text, or
    HTTP 429/503 that says the queue is full."""
    n = 0
    for status, text in errors:
        low = (text or "").lower()
        if profile_text.lower() in low or (status in (429, 503) and "queue" in low):
            n += 1
    return n


@dataclass
class HealthReport:
    """Arm health of a whole run, for reports and the ``--fail-on-unhealthy`` gate."""

    arms: dict[str, ArmHealth] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        """Every arm healthy."""
        return all(h.healthy for h in self.arms.values())

    def lines(self) -> list[str]:
        """One line per arm, then one per piece of evidence."""
        out = []
        for arm, h in self.arms.items():
            out.append(f"arm {arm}: {h.summary()}")
            out += [f"  {e}" for e in h.restart_evidence]
            out += [f"  fatal [{name}] {line}" for name, line in h.fatal_lines[:20]]
        return out

    def to_json(self) -> dict[str, object]:
        """Plain data."""
        return {
            arm: {
                "healthy": h.healthy,
                "restarts": h.restarts,
                "restart_evidence": list(h.restart_evidence),
                "oom_kills": h.oom_kills,
                "fatal_lines": [{"pattern": p, "line": ln} for p, ln in h.fatal_lines],
                "warnings": list(h.warnings),
                "queue_full": h.queue_full,
                "down_at_end": h.down_at_end,
                "sources": list(h.sources),
                "samples": h.samples,
            }
            for arm, h in self.arms.items()
        }
