"""Arm health against real `sim serve` processes: a killed and restarted replica is a
restart, a fatal line written during the run is a fatal line, an OOM-killed container an OOM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from tierctl.bench.health import ArmTarget, HealthWatch, count_queue_full
from tierctl.engines.liveness import metrics_start_time
from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


class SimProc:
    """One `sim serve` subprocess on a fixed port, its log and pid file."""

    def __init__(self, tmp: Path, port: int, name: str, extra: Sequence[str] = ()) -> None:
        self.extra = tuple(extra)
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = tmp / f"{name}.log"
        self.pid_file = tmp / f"{name}.pid"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        cmd = [sys.executable, "-m", "tierctl", "sim", "serve", "--time-scale", "100", *self.extra, "--",
               "--host", "127.0.0.1", "--port", str(self.port), "--enable-metrics"]  # fmt: skip
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.pid_file.write_text(str(self.proc.pid))

        def healthy() -> bool:
            assert self.proc is not None
            assert self.proc.poll() is None, self.log.read_text()
            try:
                return httpx.get(self.url + "/health", timeout=3).status_code == 200
            except httpx.HTTPError:
                return False

        if not wait_until(healthy, 120, poll_s=0.2):
            raise AssertionError("sim serve did not become healthy in 120 s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[SimProc]:
    """A replica of its own (the test kills it)."""
    s = SimProc(tmp_path, free_port(), "arm")
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def steady(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProc]:
    """A replica the tests of this module share and never stop."""
    s = SimProc(tmp_path_factory.mktemp("steady"), free_port(), "steady")
    s.start()
    yield s
    s.stop()


def test_a_killed_and_restarted_replica_is_one_restart(sim: SimProc) -> None:
    watch = HealthWatch(
        [ArmTarget("B", sim.url, engine="sglang", log_path=sim.log, pid_file=sim.pid_file)]
    )
    watch.begin()
    watch.sample()
    with httpx.Client() as client:
        started = float(metrics_start_time(client, sim.url) or time.time())
    sim.kill()
    # The start time has one-second resolution in some sources: the new process must start
    # in a later second than the old one did.
    assert wait_until(lambda: int(time.time()) > int(started), 5, poll_s=0.05)
    watch.sample()  # down: no start time
    sim.start()
    health = watch.finish({})["B"]
    assert health.restarts == 1
    assert set(health.sources) == {"metrics", "pid"}
    assert any(e.startswith("metrics: start time") for e in health.restart_evidence)
    assert any(e.startswith("pid: start time") for e in health.restart_evidence)
    assert not health.healthy
    assert not health.down_at_end
    assert health.summary().startswith("1 restarts, 0 OOMs, 0 fatal log lines")


def test_a_replica_killed_and_not_restarted_is_down(sim: SimProc) -> None:
    watch = HealthWatch([ArmTarget("A", sim.url, engine="sglang")])
    watch.begin()
    sim.kill()
    health = watch.finish({})["A"]
    assert health.restarts == 0
    assert health.down_at_end
    assert not health.healthy
    assert "DOWN at the end" in health.summary()


def test_a_steady_replica_is_healthy_and_old_log_lines_do_not_count(steady: SimProc) -> None:
    with steady.log.open("a") as fh:
        fh.write("torch.OutOfMemoryError: CUDA out of memory. (before the run)\n")
    watch = HealthWatch([ArmTarget("A", steady.url, engine="sglang", log_path=steady.log)])
    watch.begin()
    watch.sample()
    with steady.log.open("a") as fh:
        fh.write("Traceback (most recent call last):\n  File x\nValueError: recovered\n")
    health = watch.finish({"A": 2})["A"]
    assert health.healthy
    assert health.restarts == 0
    assert health.fatal_lines == ()
    assert health.queue_full == 2
    assert any(w.startswith("traceback:") for w in health.warnings)  # listed, not fatal


def test_fatal_lines_written_during_the_run_count(steady: SimProc) -> None:
    watch = HealthWatch([ArmTarget("A", steady.url, engine="vllm", log_path=steady.log)])
    watch.begin()
    with steady.log.open("a") as fh:
        fh.write("ERROR 12-01 [core.py] EngineCore encountered a fatal error.\n")
        fh.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    health = watch.finish({})["A"]
    assert [name for name, _ in health.fatal_lines] == ["engine-dead", "cuda-oom"]
    assert health.oom_kills == 1
    assert not health.healthy


def test_docker_restart_and_oom_kill_through_the_runner() -> None:
    states = iter(
        [
            "2026-12-01T08:00:00.1Z false",
            "2026-12-01T08:00:00.1Z false",
            "2026-12-01T08:05:00.9Z true",
        ]
    )
    calls: list[Sequence[str]] = []

    def run(argv: Sequence[str]) -> tuple[int, str]:
        calls.append(argv)
        if argv[1] == "inspect":
            return 0, next(states)
        return 0, "INFO ok\nScheduler hit an exception: boom\n"

    watch = HealthWatch([ArmTarget("B", container="model-r2", engine="sglang")], run=run)
    watch.begin()
    watch.sample()
    health = watch.finish({})["B"]
    assert health.restarts == 1
    assert health.oom_kills == 1
    assert [n for n, _ in health.fatal_lines] == ["engine-dead"]
    assert calls[-1][:3] == ["docker", "logs", "--since"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", calls[-1][3])


def test_queue_full_counting() -> None:
    errors = [
        (503, "HTTP 503: The request queue is full."),
        (429, "too many requests: queue is full"),
        (500, "internal error"),
        (None, "ConnectionResetError"),
    ]
    assert count_queue_full(errors, "The request queue is full.") == 2


def test_the_watch_samples_in_the_background(steady: SimProc) -> None:
    import asyncio

    async def go() -> int:
        watch = HealthWatch([ArmTarget("A", steady.url)], interval_s=0.2)
        await watch.start()
        await asyncio.sleep(1.5)
        arms = await watch.stop()
        return arms["A"].samples

    assert asyncio.run(go()) >= 4


def _append_when_served(url: str, log: Path, line: str, stop: threading.Event) -> None:
    def served() -> bool:
        try:
            text = httpx.get(url + "/metrics", timeout=3).text
        except httpx.HTTPError:
            return False
        return re.search(r"sglang:num_requests_total\{[^}]*\} [1-9]", text) is not None

    # Bounded: the test stops the writer (stop) once its run is over.
    if wait_until(lambda: stop.is_set() or served(), 120, poll_s=0.02) and not stop.is_set():
        with log.open("a") as fh:
            fh.write(line)


def test_bench_quality_fails_on_an_unhealthy_arm(
    steady: SimProc, tmp_path: Path, run_cli: Callable[..., Any]
) -> None:
    other = SimProc(tmp_path, free_port(), "other")
    other.start()
    stop = threading.Event()
    writer = threading.Thread(
        target=_append_when_served,
        args=(other.url, other.log, "Received sigquit from a child process\n", stop),
    )
    writer.start()
    try:
        r = run_cli(
            "bench", "quality", steady.url, other.url, "--texts", "40", "--arithmetic", "60",
            "--b-log", str(other.log), "--fail-on-unhealthy", "--engine", "sglang",
        )  # fmt: skip
    finally:
        stop.set()
        writer.join()
        other.stop()
    assert r.code == 1, r.out + r.err
    assert "arm B: 0 restarts, 0 OOMs, 1 fatal log lines" in r.out
    assert "fatal [engine-dead] Received sigquit from a child process" in r.out
    assert "at the noise floor" in r.out


def test_bench_ab_with_quality_writes_everything_in_one_folder(
    steady: SimProc, tmp_path: Path, run_cli: Callable[..., Any]
) -> None:
    import json

    perturbed = SimProc(tmp_path, free_port(), "perturbed", ("--perturb-tokens", "0.05"))
    perturbed.start()
    out = tmp_path / "out"
    try:
        r = run_cli(
            "bench", "ab", "--a", steady.url, "--b", perturbed.url, "--order", "AB",
            "--hammer-concurrency", "2", "--hammer-count", "6", "--hammer-tokens", "32:4",
            "--api", "completions", "--no-probe", "--quality", "--texts", "12",
            "--arithmetic", "0", "--b-log", str(perturbed.log), "--fail-on-unhealthy",
            "--output", str(out),
        )  # fmt: skip
    finally:
        perturbed.stop()
    assert r.code == 0, r.out + r.err
    assert "arm A: 0 restarts, 0 OOMs, 0 fatal log lines, 0 queue-full" in r.out
    assert "arm B: 0 restarts, 0 OOMs, 0 fatal log lines, 0 queue-full" in r.out
    assert "quality: above the floor: " in r.out
    names = {p.name for p in out.iterdir()}
    assert {"results.json", "report.md", "quality.json", "quality.md"} <= names
    assert "quality_agreement.png" in names
    doc = json.loads((out / "results.json").read_text())
    assert doc["health"]["A"]["healthy"] is True
    assert doc["health"]["B"]["sources"] == ["metrics"]
    assert doc["quality"]["verdict"].startswith("above the floor")
    q = json.loads((out / "quality.json").read_text())
    assert q["lanes"][0]["lane"] == "teacher-forced"
    assert q["lanes"][0]["test"]["floor"] == 0
    assert "## Arm health" in (out / "report.md").read_text()
