"""A server process's whole group is stopped, however it ends (no engine here)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tierctl.errors import RuntimeFailure
from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import ServerProcess, free_port, http_ready


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "State:\tZ" in status.read_text()


def _wait_for_file(path: Path, timeout_s: float = 30.0) -> str:
    if not wait_until(lambda: path.exists() and bool(path.read_text().strip()), timeout_s):
        raise AssertionError(f"{path} was not written")
    return path.read_text().strip()


def test_stop_kills_a_grandchild_that_ignores_sigterm(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild"
    script = (
        "import os, signal, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    proc = ServerProcess([sys.executable, "-c", script], tmp_path / "log")
    proc.start()
    grandchild = int(_wait_for_file(pidfile))
    proc.stop(timeout_s=2)
    wait_until(lambda: _gone(grandchild), 10, poll_s=0.05)
    assert _gone(grandchild)
    assert not proc.running()
    proc.stop()  # idempotent


def test_a_process_that_exits_fails_readiness_with_its_log(tmp_path: Path) -> None:
    proc = ServerProcess(
        [sys.executable, "-c", "print('bad flag value'); raise SystemExit(3)"],
        tmp_path / "log",
        name="engine r2",
    )
    proc.start()
    with pytest.raises(RuntimeFailure) as err:
        proc.wait_ready(lambda: False, timeout_s=60, poll_s=0.05)
    text = err.value.format()
    assert "engine r2 exited with status 3" in text
    assert "bad flag value" in text


def test_readiness_times_out_and_stops_the_process(tmp_path: Path) -> None:
    proc = ServerProcess([sys.executable, "-c", "import time; time.sleep(600)"], tmp_path / "log")
    proc.start()
    port = free_port()
    with pytest.raises(RuntimeFailure, match=r"not ready in 0\.5 s"):
        proc.wait_ready(http_ready(f"http://127.0.0.1:{port}/health", 0.2), 0.5, poll_s=0.05)
    assert not proc.running()
