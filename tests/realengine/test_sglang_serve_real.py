"""``tierctl real-engine serve --engine sglang``: the real SGLang in the foreground, until
SIGTERM, which stops its whole process group (one SGLang at a time: this module's only)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tierctl.runtime.polling import wait_until

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]

START_TIMEOUT_S = float(os.environ.get("TIERCTL_REAL_START_TIMEOUT_S", "600"))
SERVING = re.compile(r"^serving sglang at (http://127\.0\.0\.1:\d+) \(pid (\d+), log ")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "State:\tZ" in status.read_text()


def test_serve_runs_sglang_until_sigterm(sglang_python: Path, tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")
    cmd = [sys.executable, "-m", "tierctl", "real-engine", "serve", "--engine", "sglang"]
    cmd += ["--log", str(log), "--", "--enable-metrics", "--prefill-decode-interval", "1"]
    err = tmp_path / "serve.err"
    with (
        err.open("w") as err_file,
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err_file, text=True, env=env) as proc,
    ):
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + START_TIMEOUT_S
            line = ""
            while time.monotonic() < deadline and proc.poll() is None:
                line = proc.stdout.readline()
                if line.startswith("serving "):
                    break
            match = SERVING.match(line)
            assert match, (line, err.read_text())
            url, pid = match[1], int(match[2])
            assert httpx.get(url + "/health", timeout=10).status_code == 200
            info = httpx.get(url + "/server_info", timeout=10).json()
            assert info["prefill_decode_interval"] == 1
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=120) == 0
            assert wait_until(lambda: _gone(pid), 30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    assert "stopping sglang" in err.read_text()
